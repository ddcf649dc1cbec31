import type { Processor } from 'bullmq';
import { purgeContentOnce, type ContentPurgeDeps } from '../src/archive/content-purge.js';
import { retireNoticesOnce, type RetireDeps } from '../src/archive/retire.js';

/**
 * The `content-purge` queue: a scheduled job that records `content.purged` for expired content,
 * then lets Redis go of finished notices the archive holds whole (src/archive/retire.ts).
 */
export function contentPurgeProcessor(purge: ContentPurgeDeps, retire: RetireDeps): Processor {
  return async () => ({ ...(await purgeContentOnce(purge)), ...(await retireNoticesOnce(retire)) });
}
