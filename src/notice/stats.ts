import type { Redis } from 'ioredis';
import type { Prices } from '../config.js';
import type { Keys } from '../store/keys.js';
import { costOf } from './cost.js';
import { parseStatsMember, type RetiredStats } from '../archive/records.js';

export interface NoticeStats {
  from: string;
  to: string;
  notices: number;
  byState: Record<string, number>;
  fallbackByReason: Record<string, number>;
  /** Fraction (0–1) of the period's notices whose fallback was decided (sent or blocked). */
  fallbackRate: number;
  /** Email and SMS status checks per notice. */
  checksPerNotice: number;
  estimatedSpend: { currency: string; total: number; byChannel: { email: number; sms: number } };
}

const FIELDS = ['state', 'fallbackReason', 'emailChecksDone', 'smsChecksDone', 'emailProviderMessageId', 'smsSegments'] as const;

/**
 * Counts the notices created in [from, to] from the shards' creation indexes and their hashes,
 * pipelined a shard at a time; a retired notice's counts are in its index member.
 */
export async function noticeStats(redis: Redis, keys: Keys, prices: Prices, from: number, to: number): Promise<NoticeStats> {
  const byState: Record<string, number> = {};
  const fallbackByReason: Record<string, number> = {};
  let notices = 0;
  let checks = 0;
  const counts = { emailSends: 0, emailChecks: 0, smsSegments: 0, smsChecks: 0 };
  const count = (notice: RetiredStats) => {
    notices += 1;
    byState[notice.state] = (byState[notice.state] ?? 0) + 1;
    if (notice.fallbackReason) fallbackByReason[notice.fallbackReason] = (fallbackByReason[notice.fallbackReason] ?? 0) + 1;
    checks += notice.emailChecks + notice.smsChecks;
    counts.emailSends += notice.emailSent ? 1 : 0;
    counts.emailChecks += notice.emailChecks;
    counts.smsChecks += notice.smsChecks;
    counts.smsSegments += notice.smsSegments;
  };
  for (const shard of keys.allShards()) {
    const members = await redis.zrangebyscore(keys.created(shard), from, to);
    const ids: string[] = [];
    for (const member of members) {
      // A retired notice left Redis; its member carries its counts (src/archive/retire.ts).
      const retired = parseStatsMember(member);
      if (retired) count(retired);
      else ids.push(member);
    }
    for (let i = 0; i < ids.length; i += 500) {
      const pipeline = redis.pipeline();
      for (const id of ids.slice(i, i + 500)) pipeline.hmget(keys.notice(id), ...FIELDS);
      for (const [error, values] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        const [state, reason, emailChecks, smsChecks, emailMessage, segments] = values as (string | null)[];
        // Retired between the two reads: counted by its member at the next request.
        if (!state) continue;
        count({
          state,
          fallbackReason: reason ?? null,
          emailChecks: Number(emailChecks ?? 0),
          smsChecks: Number(smsChecks ?? 0),
          emailSent: Boolean(emailMessage),
          smsSegments: Number(segments ?? 0),
        });
      }
    }
  }
  const fallbacks = Object.values(fallbackByReason).reduce((a, b) => a + b, 0);
  return {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    notices,
    byState,
    fallbackByReason,
    fallbackRate: notices === 0 ? 0 : fallbacks / notices,
    checksPerNotice: notices === 0 ? 0 : checks / notices,
    estimatedSpend: costOf(counts, prices),
  };
}
