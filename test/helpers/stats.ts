import type { RetiredStats } from '../../src/archive/records.js';
import type { Prices } from '../../src/config.js';
import { costOf } from '../../src/notice/cost.js';

/** What `/v1/stats` counts of a notice still in Redis, read from its hash as the earlier implementation read it. */
export function statsOfHash(hash: Record<string, string | null | undefined>): RetiredStats | null {
  if (!hash.state) return null;
  return {
    state: hash.state,
    fallbackReason: hash.fallbackReason ?? null,
    emailChecks: Number(hash.emailChecksDone ?? 0),
    smsChecks: Number(hash.smsChecksDone ?? 0),
    emailSent: Boolean(hash.emailProviderMessageId),
    smsSegments: Number(hash.smsSegments ?? 0),
  };
}

/**
 * The counts of `/v1/stats` (without its period fields) computed notice by notice, as the
 * implementation before the per-hour counters computed them.
 */
export function tally(notices: readonly RetiredStats[], prices: Prices) {
  const byState: Record<string, number> = {};
  const fallbackByReason: Record<string, number> = {};
  let checks = 0;
  const counts = { emailSends: 0, emailChecks: 0, smsSegments: 0, smsChecks: 0 };
  for (const notice of notices) {
    byState[notice.state] = (byState[notice.state] ?? 0) + 1;
    if (notice.fallbackReason) fallbackByReason[notice.fallbackReason] = (fallbackByReason[notice.fallbackReason] ?? 0) + 1;
    checks += notice.emailChecks + notice.smsChecks;
    counts.emailSends += notice.emailSent ? 1 : 0;
    counts.emailChecks += notice.emailChecks;
    counts.smsChecks += notice.smsChecks;
    counts.smsSegments += notice.smsSegments;
  }
  const n = notices.length;
  const fallbacks = Object.values(fallbackByReason).reduce((a, b) => a + b, 0);
  return {
    notices: n,
    byState,
    fallbackByReason,
    fallbackRate: n === 0 ? 0 : fallbacks / n,
    checksPerNotice: n === 0 ? 0 : checks / n,
    estimatedSpend: costOf(counts, prices),
  };
}
