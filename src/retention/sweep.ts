import { purgeContentOnce, type ContentPurgeDeps, type ContentPurgeReport } from './content-purge.js';
import { retireNoticesOnce, type RetireDeps, type RetireReport } from './retire.js';

/**
 * One retention sweep: records `content.purged` for content past its TTL, then lets Redis go of
 * finished notices the archive holds whole. The purge runs first so that a notice due for both
 * retires in the same sweep.
 */
export async function retentionSweepOnce(purge: ContentPurgeDeps, retire: RetireDeps): Promise<ContentPurgeReport & RetireReport> {
  return { ...(await purgeContentOnce(purge)), ...(await retireNoticesOnce(retire)) };
}
