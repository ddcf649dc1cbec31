import type { RedisClient } from '../store/redis.js';
import type { Config } from '../config.js';
import { formatDuration } from '../durations.js';
import type { Keys } from '../store/keys.js';
import { memoryUse } from '../store/redis.js';
import { LogMirrorStore, type ShardBacklog } from '../store/log-mirror.js';
import { idTime } from '../archive/names.js';

/** What the log mirror has not archived yet, over every shard. */
export interface BacklogSummary {
  /** Entries the archive does not hold yet. */
  unarchivedEntries: number;
  /** Age of the oldest of them; 0 when everything is archived. */
  oldestUnarchivedSeconds: number;
  /** Entries in Redis's log streams (archived ones inside the hot window included). */
  streamEntries: number;
  shards: ShardBacklog[];
}

export interface ReadinessWarning {
  code: 'log_mirror_behind' | 'redis_memory_high';
  message: string;
}

/** Share of Redis `maxmemory` in use at which readiness warns. */
const MEMORY_WARN_RATIO = 0.8;

export async function readBacklog(redis: RedisClient, keys: Keys, now: number): Promise<BacklogSummary> {
  const shards = await new LogMirrorStore(redis, keys).backlog(keys.allShards());
  const oldest = Math.min(...shards.map((s) => (s.oldestUnarchivedId ? idTime(s.oldestUnarchivedId) : Number.POSITIVE_INFINITY)));
  return {
    unarchivedEntries: shards.reduce((sum, s) => sum + s.unarchived, 0),
    oldestUnarchivedSeconds: Number.isFinite(oldest) ? Math.max(0, Math.round((now - oldest) / 1000)) : 0,
    streamEntries: shards.reduce((sum, s) => sum + s.length, 0),
    shards,
  };
}

/**
 * Readiness warnings that come before Redis runs out of memory: the archive has fallen behind
 * (unreachable, or too slow), so the log streams grow; or Redis is close to `maxmemory`.
 * Herald never drops log entries to make room, so an operator must act.
 */
export async function readinessWarnings(
  redis: RedisClient,
  keys: Keys,
  now: number,
  thresholds: Pick<Config['mirror'], 'warnLagMs' | 'warnBacklog'>,
): Promise<{ backlog: BacklogSummary; warnings: ReadinessWarning[] }> {
  const backlog = await readBacklog(redis, keys, now);
  const warnings: ReadinessWarning[] = [];
  if (backlog.oldestUnarchivedSeconds * 1000 > thresholds.warnLagMs || backlog.unarchivedEntries > thresholds.warnBacklog) {
    warnings.push({
      code: 'log_mirror_behind',
      message:
        `${backlog.unarchivedEntries} decision-log entries wait for the archive, the oldest for ` +
        `${formatDuration(backlog.oldestUnarchivedSeconds * 1000)} (warn at ${thresholds.warnBacklog} or ` +
        `${formatDuration(thresholds.warnLagMs)}): check the archive and the worker's log mirror before Redis memory runs out.`,
    });
  }
  const { used, max } = await memoryUse(redis);
  if (max > 0 && used >= MEMORY_WARN_RATIO * max) {
    warnings.push({
      code: 'redis_memory_high',
      message: `Redis uses ${Math.round((100 * used) / max)}% of its maxmemory; ${backlog.streamEntries} log entries are in Redis.`,
    });
  }
  return { backlog, warnings };
}
