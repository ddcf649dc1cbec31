import type { Redis } from 'ioredis';
import type { Prices } from '../config.js';
import type { Keys } from '../store/keys.js';
import { defineScripts } from '../store/scripts.js';
import { costOf } from './cost.js';
import { parseStatsMember } from '../archive/records.js';
import { STATES, type FallbackReason } from './states.js';

/** Stats are counted per UTC hour of creation. */
export const STATS_HOUR_MS = 3_600_000;

export interface NoticeStats {
  from: string;
  to: string;
  /** The hours counted: every UTC hour that overlaps [from, to) (at least the hour holding `from`). */
  window: { from: string; to: string };
  notices: number;
  byState: Record<string, number>;
  fallbackByReason: Record<string, number>;
  /** Fraction (0–1) of the period's notices whose fallback was decided (sent or blocked). */
  fallbackRate: number;
  /** Email and SMS status checks per notice. */
  checksPerNotice: number;
  estimatedSpend: { currency: string; total: number; byChannel: { email: number; sms: number } };
}

// Every reason the engine can record: the Record makes the compiler name one that is missing here.
const REASONS: Record<FallbackReason, true> = {
  email_deadline_elapsed: true,
  email_bounced: true,
  email_rejected: true,
  email_suppressed: true,
  email_consent_missing: true,
};

/** The counters of one hour, as includes/countStats.lua names them after `<hour>|`. */
const COUNTERS = [
  ...STATES.map((state) => `state|${state}`),
  ...Object.keys(REASONS).map((reason) => `reason|${reason}`),
  'checks|email',
  'checks|sms',
  'sent|email',
  'segments|sms',
];

/** The hours that hold [from, to): from the hour of `from` to the end of the hour before `to`, at least one. */
export function statsWindow(from: number, to: number): { from: number; to: number } {
  const start = Math.floor(from / STATS_HOUR_MS) * STATS_HOUR_MS;
  return { from: start, to: Math.max(Math.ceil(to / STATS_HOUR_MS) * STATS_HOUR_MS, start + STATS_HOUR_MS) };
}

/**
 * Counts the notices created in the hours overlapping [from, to) from the shards' stats hashes,
 * kept by the scripts that change notices (includes/countStats.lua): one HMGET of (hours ×
 * counters) fields per shard and day of the window, whatever the number of notices.
 */
export async function noticeStats(redis: Redis, keys: Keys, prices: Prices, from: number, to: number): Promise<NoticeStats> {
  const window = statsWindow(from, to);
  const totals = new Map<string, number>();
  for (const counters of (await readHourlyCounters(redis, keys, window)).values())
    for (const [counter, n] of counters) totals.set(counter, (totals.get(counter) ?? 0) + n);
  return statsOf(totals, from, to, window, prices);
}

/**
 * The same figures as `noticeStats`, one per UTC hour overlapping [from, to), oldest first: the
 * history the overview charts. Summed, they are `noticeStats` of the whole window.
 */
export async function hourlyStats(redis: Redis, keys: Keys, prices: Prices, from: number, to: number): Promise<NoticeStats[]> {
  const window = statsWindow(from, to);
  const hourly = await readHourlyCounters(redis, keys, window);
  const stats: NoticeStats[] = [];
  for (let start = window.from; start < window.to; start += STATS_HOUR_MS) {
    const hour = { from: start, to: start + STATS_HOUR_MS };
    stats.push(statsOf(hourly.get(start / STATS_HOUR_MS) ?? new Map(), hour.from, hour.to, hour, prices));
  }
  return stats;
}

/** Every shard's counters of the window's hours, summed per hour (hours since the epoch → counter → n). */
async function readHourlyCounters(
  redis: Redis,
  keys: Keys,
  window: { from: number; to: number },
): Promise<Map<number, Map<string, number>>> {
  const firstHour = window.from / STATS_HOUR_MS;
  const hours = (window.to - window.from) / STATS_HOUR_MS;
  const days: string[][] = [];
  for (let h = 0; h < hours; h += 24) {
    const fields: string[] = [];
    for (let hour = firstHour + h; hour < firstHour + Math.min(h + 24, hours); hour += 1)
      for (const counter of COUNTERS) fields.push(`${hour}|${counter}`);
    days.push(fields);
  }
  // One pipeline per shard (one slot each, as Redis Cluster wants), all shards at once.
  const replies = await Promise.all(
    keys.allShards().map(async (shard) => {
      const pipeline = redis.pipeline();
      for (const fields of days) pipeline.hmget(keys.stats(shard), ...fields);
      return (await pipeline.exec()) ?? [];
    }),
  );
  const hourly = new Map<number, Map<string, number>>();
  for (const shardReplies of replies) {
    for (const [i, [error, values]] of shardReplies.entries()) {
      if (error) throw error;
      const fields = days[i]!;
      for (const [j, value] of (values as (string | null)[]).entries()) {
        if (value === null) continue;
        const field = fields[j]!;
        const bar = field.indexOf('|');
        const hour = Number(field.slice(0, bar));
        const counters = hourly.get(hour) ?? new Map<string, number>();
        hourly.set(hour, counters);
        const counter = field.slice(bar + 1);
        counters.set(counter, (counters.get(counter) ?? 0) + Number(value));
      }
    }
  }
  return hourly;
}

function statsOf(totals: Map<string, number>, from: number, to: number, window: { from: number; to: number }, prices: Prices): NoticeStats {
  const byState: Record<string, number> = {};
  const fallbackByReason: Record<string, number> = {};
  for (const [counter, n] of totals) {
    // A state or reason whose notices all moved on is 0: left out, as when it was never seen.
    if (n === 0) continue;
    const [kind, name] = counter.split('|') as [string, string];
    if (kind === 'state') byState[name] = n;
    else if (kind === 'reason') fallbackByReason[name] = n;
  }
  const notices = Object.values(byState).reduce((a, b) => a + b, 0);
  const fallbacks = Object.values(fallbackByReason).reduce((a, b) => a + b, 0);
  const count = (counter: string) => totals.get(counter) ?? 0;
  const checks = count('checks|email') + count('checks|sms');
  return {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    window: { from: new Date(window.from).toISOString(), to: new Date(window.to).toISOString() },
    notices,
    byState,
    fallbackByReason,
    fallbackRate: notices === 0 ? 0 : fallbacks / notices,
    checksPerNotice: notices === 0 ? 0 : checks / notices,
    estimatedSpend: costOf(
      {
        emailSends: count('sent|email'),
        emailChecks: count('checks|email'),
        smsSegments: count('segments|sms'),
        smsChecks: count('checks|sms'),
      },
      prices,
    ),
  };
}

export interface BackfillReport {
  /** Notices counted by this run. */
  counted: number;
  /** Members already counted (by an earlier run, or since). */
  skipped: number;
  /** Members naming a notice Redis no longer holds, without its counts: dropped. */
  gone: number;
}

/**
 * Counts the notices earlier versions indexed in the shards' `created` zsets (before the stats
 * counters existed) into the counters, once each (backfillStats-3.lua): a retired notice's
 * member carries its counts and is removed; a notice still in Redis is counted as it is and
 * from then on kept by the transition script. Safe to run again, and alongside a running Herald.
 */
export async function backfillStats(redis: Redis, keys: Keys): Promise<BackfillReport> {
  const scripts = defineScripts(redis);
  const report: BackfillReport = { counted: 0, skipped: 0, gone: 0 };
  for (const shard of keys.allShards()) {
    const created = keys.created(shard);
    let cursor = '0';
    do {
      const [next, flat] = await scripts.zscan(created, cursor, 'COUNT', 500);
      cursor = next;
      const pipeline = scripts.pipeline() as ReturnType<Redis['pipeline']> & {
        backfillStats(...args: (string | number)[]): unknown;
      };
      for (let i = 0; i < flat.length; i += 2) {
        const member = flat[i]!;
        const retired = parseStatsMember(member);
        const id = retired?.id ?? member;
        // Only members that name one of this shard's notices: anything else is left alone.
        if (!id.startsWith(`ntc_${shard.toString(16).padStart(2, '0')}`)) continue;
        const args = retired
          ? [
              '1',
              retired.state,
              retired.fallbackReason ?? '',
              retired.emailChecks,
              retired.smsChecks,
              retired.emailSent ? '1' : '',
              retired.smsSegments,
            ]
          : ['0'];
        pipeline.backfillStats(created, keys.notice(id), keys.stats(shard), member, ...args);
      }
      for (const [error, reply] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        const code = Number(reply);
        if (code === 1) report.counted += 1;
        else if (code === 0) report.skipped += 1;
        else report.gone += 1;
      }
    } while (cursor !== '0');
  }
  return report;
}

/**
 * Runs the backfill unless a run has completed before (the `stats-backfilled` marker holds
 * when); returns its report, or null when it had run. `herald retention apply` runs it always.
 */
export async function backfillStatsOnce(redis: Redis, keys: Keys, now: number): Promise<BackfillReport | null> {
  if ((await redis.exists(keys.statsBackfilled)) === 1) return null;
  const report = await backfillStats(redis, keys);
  await redis.set(keys.statsBackfilled, new Date(now).toISOString());
  return report;
}

/**
 * Drops the counters of the hours wholly older than `retentionMs` from a shard's stats hash, at
 * most once per hour (the hash's `prunedUpTo` field remembers the hour). One HSCAN of the hash,
 * so that counters a long-lived notice adds to an hour already dropped go too.
 */
export async function pruneStats(redis: Redis, keys: Keys, shard: number, now: number, retentionMs: number): Promise<number> {
  const key = keys.stats(shard);
  const keepFrom = Math.floor((now - retentionMs) / STATS_HOUR_MS);
  const pruned = await redis.hget(key, PRUNED_FIELD);
  if (pruned !== null && Number(pruned) >= keepFrom) return 0;
  let dropped = 0;
  let cursor = '0';
  do {
    const [next, flat] = await redis.hscan(key, cursor, 'COUNT', 1000);
    cursor = next;
    const old: string[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      const hour = Number.parseInt(flat[i]!, 10);
      if (flat[i] !== PRUNED_FIELD && hour < keepFrom) old.push(flat[i]!);
    }
    if (old.length > 0) dropped += await redis.hdel(key, ...old);
  } while (cursor !== '0');
  await redis.hset(key, PRUNED_FIELD, keepFrom);
  return dropped;
}

const PRUNED_FIELD = 'prunedUpTo';
