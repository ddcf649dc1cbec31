import { execAll, type RedisClient } from './redis.js';
import { SHARD_COUNT } from '../notice/ids.js';
import type { NoticeState } from '../notice/states.js';
import type { Keys } from './keys.js';
import type { LogEntry } from './notices.js';

/**
 * Counters are kept in Redis, one hash per shard, incremented by the same script that appends
 * the log entries they count: they hold for every web and worker process together, survive
 * restarts, and never disagree with the decision log. `/metrics` reads and sums them.
 */

/** Upper bounds of the status-checks-per-notice histogram buckets. */
export const CHECKS_BUCKETS = [0, 1, 2, 3, 5, 8, 12, 20, 40];

/** Spend is counted in millionths of the currency unit (HINCRBY takes integers). */
export const SPEND_SCALE = 1_000_000;

/** Upper bounds (ms) of the `decidedAt − deadline` histogram buckets. */
export const DECISION_LAG_BUCKETS_MS = [0, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000];

/** Upper bounds (ms) of the `observedAt − plannedAt` histogram of planned status checks, per channel. */
export const CHECK_LATENESS_BUCKETS_MS = [0, 250, 1000, 5000, 15_000, 60_000, 300_000, 900_000];

/**
 * The counters a transition adds 1 to go into one field, their names joined by `&`
 * (`&state|email_sent&entry|email.accepted&call|email|send|ok`): one HINCRBY instead of one
 * per counter. There are only as many such fields as there are kinds of transition; readers
 * expand them with `expandCounters`. No counter name contains `&`.
 */
const JOINED = '&';

/** The metric increments a transition causes: `[field, n, field, n, ...]` for the script. */
export function metricIncrements(entries: readonly LogEntry[], newState?: NoticeState): (string | number)[] {
  const counts = countsOf(entries, newState);
  const ones = [...counts].filter(([, n]) => n === 1).map(([field]) => field);
  const others = [...counts].filter(([, n]) => n !== 1);
  const joined: [string, number][] = ones.length > 1 ? [[JOINED + ones.join(JOINED), 1]] : ones.map((field) => [field, 1]);
  return [...joined, ...others].flat();
}

/** Adds the counters of a shard's metrics hash to `into`, joined fields expanded. */
export function expandCounters(hash: Record<string, string>, into: Map<string, number>): void {
  for (const [field, raw] of Object.entries(hash)) {
    const value = Number(raw);
    const names = field.startsWith(JOINED) ? field.slice(1).split(JOINED) : [field];
    for (const name of names) into.set(name, (into.get(name) ?? 0) + value);
  }
}

function countsOf(entries: readonly LogEntry[], newState?: NoticeState): Map<string, number> {
  const counts = new Map<string, number>();
  const add = (field: string, n = 1) => counts.set(field, (counts.get(field) ?? 0) + n);
  if (newState) add(`state|${newState}`);
  for (const entry of entries) {
    add(`entry|${entry.type}`);
    switch (entry.type) {
      case 'email.accepted':
      case 'sms.accepted': {
        const channel = entry.type.split('.')[0]!;
        add(`call|${channel}|${entry.resolvedBy === 'provider_search' ? 'search' : 'send'}|ok`);
        break;
      }
      case 'email.observed':
      case 'sms.observed':
        if (entry.source === 'webhook') {
          // A webhook is no provider call: it is counted as an event, and what it saved as such.
          const channel = entry.type.split('.')[0]!;
          add(`webhook|${channel}|${entry.status}`);
          if (entry.checksSaved) add(`saved|${channel}`, entry.checksSaved);
        } else if (entry.providerStatus !== null) {
          const channel = entry.type.split('.')[0]!;
          add(`poll|${channel}|${entry.status}`);
          add(`call|${channel}|status|ok`);
        }
        if (entry.plannedAt !== undefined) {
          const channel = entry.type.split('.')[0]!;
          const late = Math.max(0, Date.parse(entry.observedAt) - Date.parse(entry.plannedAt));
          add(`checklate_${channel}_le|${CHECK_LATENESS_BUCKETS_MS.find((le) => late <= le) ?? '+Inf'}`);
          add(`checklate_${channel}_sum_ms`, late);
          add(`checklate_${channel}_count`);
        }
        break;
      case 'provider.error':
        add(`perr|${entry.channel}|${entry.kind}`);
        add(`call|${entry.channel}|${entry.operation}|${entry.kind}`);
        break;
      case 'fallback.decided': {
        add(`fallback|${entry.reason}`);
        if (entry.reason === 'email_deadline_elapsed') {
          const lag = Math.max(0, Date.parse(entry.decidedAt) - Date.parse(entry.deadline));
          const bucket = DECISION_LAG_BUCKETS_MS.find((le) => lag <= le);
          add(`lag_le|${bucket ?? '+Inf'}`);
          add('lag_sum_ms', lag);
          add('lag_count');
        }
        break;
      }
      case 'fallback.blocked':
        add(`blocked|${entry.reason}`);
        break;
      case 'notice.completed': {
        for (const [channel, amount] of Object.entries(entry.cost?.byChannel ?? {}))
          add(`spend|${channel}`, Math.round(amount * SPEND_SCALE));
        if (entry.checks) {
          const total = entry.checks.email + entry.checks.sms;
          add(`checks_le|${CHECKS_BUCKETS.find((le) => total <= le) ?? '+Inf'}`);
          add('checks_sum', total);
          add('checks_count');
        }
        break;
      }
    }
  }
  return counts;
}

/** Every shard's metric counters, summed, joined fields expanded: one round trip. */
export async function readMetricCounters(redis: RedisClient, keys: Keys): Promise<Map<string, number>> {
  const replies = await execAll(
    redis,
    Array.from({ length: SHARD_COUNT }, (_, shard) => ['hgetall', keys.metrics(shard)]),
  );
  const counters = new Map<string, number>();
  for (const [error, hash] of replies) {
    if (error) throw error;
    expandCounters(hash as Record<string, string>, counters);
  }
  return counters;
}
