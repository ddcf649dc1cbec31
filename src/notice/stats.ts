import type { RedisClient } from '../store/redis.js';
import type { Prices } from '../config.js';
import type { Keys } from '../store/keys.js';
import { readStatsCounters, STATS_HOUR_MS, statsField } from '../store/stats.js';
import { costOf } from './cost.js';
import { STATES, type FallbackReason } from './states.js';

export { STATS_HOUR_MS } from '../store/stats.js';

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
export async function noticeStats(
  redis: RedisClient,
  keys: Keys,
  prices: Prices,
  from: number,
  to: number,
  tenants: readonly string[] = ['default'],
): Promise<NoticeStats> {
  const window = statsWindow(from, to);
  const totals = new Map<string, number>();
  for (const counters of (await readHourlyCounters(redis, keys, window, tenants)).values())
    for (const [counter, n] of counters) totals.set(counter, (totals.get(counter) ?? 0) + n);
  return statsOf(totals, from, to, window, prices);
}

/**
 * The same figures as `noticeStats`, one per UTC hour overlapping [from, to), oldest first: the
 * history the overview charts. Summed, they are `noticeStats` of the whole window.
 */
export async function hourlyStats(
  redis: RedisClient,
  keys: Keys,
  prices: Prices,
  from: number,
  to: number,
  tenants: readonly string[] = ['default'],
): Promise<NoticeStats[]> {
  const window = statsWindow(from, to);
  const hourly = await readHourlyCounters(redis, keys, window, tenants);
  const stats: NoticeStats[] = [];
  for (let start = window.from; start < window.to; start += STATS_HOUR_MS) {
    const hour = { from: start, to: start + STATS_HOUR_MS };
    stats.push(statsOf(hourly.get(start / STATS_HOUR_MS) ?? new Map(), hour.from, hour.to, hour, prices));
  }
  return stats;
}

/** Every shard's counters of the window's hours, summed per hour (hours since the epoch → counter → n). */
async function readHourlyCounters(
  redis: RedisClient,
  keys: Keys,
  window: { from: number; to: number },
  tenants: readonly string[],
): Promise<Map<number, Map<string, number>>> {
  const firstHour = window.from / STATS_HOUR_MS;
  const hours = (window.to - window.from) / STATS_HOUR_MS;
  const days: string[][] = [];
  for (let h = 0; h < hours; h += 24) {
    const fields: string[] = [];
    for (let hour = firstHour + h; hour < firstHour + Math.min(h + 24, hours); hour += 1)
      for (const counter of COUNTERS) for (const tenant of tenants) fields.push(statsField(hour, counter, tenant));
    days.push(fields);
  }
  return readStatsCounters(redis, keys, days);
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
