import type { Processor } from 'bullmq';
import { purgeContentOnce, type ContentPurgeDeps } from '../src/archive/content-purge.js';

/** The `content-purge` queue: a scheduled job that records `content.purged` for expired content. */
export function contentPurgeProcessor(deps: ContentPurgeDeps): Processor {
  return async () => purgeContentOnce(deps);
}
