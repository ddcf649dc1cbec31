import type { Processor } from 'bullmq';
import type { ContentPurgeDeps } from '../src/retention/content-purge.js';
import type { RetireDeps } from '../src/retention/retire.js';
import { retentionSweepOnce } from '../src/retention/sweep.js';

/**
 * The `content-purge` queue (its persisted name: it began as the content purge) runs the
 * retention sweep: purge expired content, then retire finished notices (src/retention/).
 */
export function retentionSweepProcessor(purge: ContentPurgeDeps, retire: RetireDeps): Processor {
  return async () => retentionSweepOnce(purge, retire);
}
