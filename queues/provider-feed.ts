import type { Processor } from 'bullmq';
import type { FeedSweep } from '../src/providers/feed.js';

/** The `provider-feed` queue: a scheduled job that runs one sweep of the feed providers' events queues. */
export function providerFeedProcessor(sweep: FeedSweep): Processor {
  return async () => sweep.sweepOnce();
}
