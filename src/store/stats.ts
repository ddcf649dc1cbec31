import type { RedisClient } from './redis.js';
import { parseStatsMember } from '../archive/records.js';
import type { Keys } from './keys.js';
import { defineScripts, type ScriptPipeline } from './scripts.js';

/**
 * The /v1/stats counters in Redis: one hash per shard (`<prefix>:{s<N>}:stats`), fields
 * `<hour>|<counter>` kept by the scripts that change notices (includes/countStats.lua), and the
 * `created` indexes earlier versions wrote, now read only by the backfill.
 */

/** Stats are counted per UTC hour of creation (the notice's `statsHour`, in hours since the epoch). */
export const STATS_HOUR_MS = 3_600_000;

/**
 * The stats-hash field of one counter of one hour (hours since the epoch), of one tenant: the
 * default tenant's fields are `<hour>|<counter>` (as before tenants), another's
 * `<tenant>/<hour>|<counter>`, its notices' `statsHour` being `<tenant>/<hour>`.
 */
export function statsField(hour: number, counter: string, tenant = 'default'): string {
  return `${statsHourOf(hour, tenant)}|${counter}`;
}

/** A notice's `statsHour`: its creation hour, led by its tenant unless it is the default one. */
export function statsHourOf(hour: number, tenant: string): string {
  return tenant === 'default' ? String(hour) : `${tenant}/${hour}`;
}

/** The hour of a stats field (`[<tenant>/]<hour>|<counter>`), NaN for another field. */
function hourOfField(field: string): number {
  const bar = field.indexOf('|');
  const slash = field.lastIndexOf('/', bar);
  return Number.parseInt(field.slice(slash + 1, bar === -1 ? undefined : bar), 10);
}

/**
 * Reads the given fields of every shard's stats hash, summed per hour and counter (hours since the epoch → counter → n):
 * one pipeline per shard (one slot each, as Redis Cluster wants) of one HMGET per group, all
 * shards at once.
 */
export async function readStatsCounters(
  redis: RedisClient,
  keys: Keys,
  fieldGroups: readonly string[][],
): Promise<Map<number, Map<string, number>>> {
  // One pipeline per shard (one slot each, as Redis Cluster wants), all shards at once.
  const replies = await Promise.all(
    keys.allShards().map(async (shard) => {
      const pipeline = redis.pipeline();
      for (const fields of fieldGroups) pipeline.hmget(keys.stats(shard), ...fields);
      return (await pipeline.exec()) ?? [];
    }),
  );
  const hourly = new Map<number, Map<string, number>>();
  for (const shardReplies of replies) {
    for (const [i, [error, values]] of shardReplies.entries()) {
      if (error) throw error;
      const fields = fieldGroups[i]!;
      for (const [j, value] of (values as (string | null)[]).entries()) {
        if (value === null) continue;
        const field = fields[j]!;
        const bar = field.indexOf('|');
        const hour = hourOfField(field);
        const counters = hourly.get(hour) ?? new Map<string, number>();
        hourly.set(hour, counters);
        const counter = field.slice(bar + 1);
        counters.set(counter, (counters.get(counter) ?? 0) + Number(value));
      }
    }
  }
  return hourly;
}

/**
 * The shards' `created` zsets, written by versions before the stats counters: a notice's ID, or
 * once it retired its stats member (src/archive/records.ts), scored by creation time.
 */
export class CreatedIndex {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  members(shard: number): Promise<string[]> {
    return this.redis.zrange(this.keys.created(shard), 0, '-1');
  }

  /** Drops the members created before `before` (ms). */
  async dropBefore(shard: number, before: number): Promise<void> {
    await this.redis.zremrangebyscore(this.keys.created(shard), '-inf', `(${before}`);
  }
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
export async function backfillStats(redis: RedisClient, keys: Keys): Promise<BackfillReport> {
  const scripts = defineScripts(redis);
  const report: BackfillReport = { counted: 0, skipped: 0, gone: 0 };
  for (const shard of keys.allShards()) {
    const created = keys.created(shard);
    let cursor = '0';
    do {
      const [next, flat] = await scripts.zscan(created, cursor, 'COUNT', 500);
      cursor = next;
      const pipeline = scripts.pipeline() as ScriptPipeline;
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
export async function backfillStatsOnce(redis: RedisClient, keys: Keys, now: number): Promise<BackfillReport | null> {
  if ((await redis.exists(keys.statsBackfilled)) === 1) return null;
  const report = await backfillStats(redis, keys);
  await markStatsBackfilled(redis, keys, now);
  return report;
}

/** Records that a backfill has completed, at `now` (ms). */
export async function markStatsBackfilled(redis: RedisClient, keys: Keys, now: number): Promise<void> {
  await redis.set(keys.statsBackfilled, new Date(now).toISOString());
}

/**
 * Drops the counters of the hours wholly older than `retentionMs` from a shard's stats hash, at
 * most once per hour (the hash's `prunedUpTo` field remembers the hour). One HSCAN of the hash,
 * so that counters a long-lived notice adds to an hour already dropped go too.
 */
export async function pruneStats(redis: RedisClient, keys: Keys, shard: number, now: number, retentionMs: number): Promise<number> {
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
      const hour = hourOfField(flat[i]!);
      if (flat[i] !== PRUNED_FIELD && hour < keepFrom) old.push(flat[i]!);
    }
    if (old.length > 0) dropped += await redis.hdel(key, ...old);
  } while (cursor !== '0');
  await redis.hset(key, PRUNED_FIELD, keepFrom);
  return dropped;
}

const PRUNED_FIELD = 'prunedUpTo';
