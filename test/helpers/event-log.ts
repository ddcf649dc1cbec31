import type { Keys } from '../../src/store/keys.js';
import { EVENTS_GROUP } from '../../src/store/event-log.js';
import type { RedisClient } from '../../src/store/redis.js';

/** A flat Redis reply [k1, v1, k2, v2, …] as an object. */
function record(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

/**
 * Whether the events' consumer group has read and acknowledged every shard's log to its end:
 * until it has, a trim keeps the entries it has not read (the dispatch sweeps every 500 ms).
 */
export async function eventsGroupCaughtUp(redis: RedisClient, keys: Keys): Promise<boolean> {
  for (const shard of keys.allShards()) {
    const key = keys.log(shard);
    if ((await redis.exists(key)) === 0) continue;
    const groups = ((await redis.xinfo('GROUPS', key)) as unknown[][]).map(record);
    const group = groups.find((g) => g.name === EVENTS_GROUP);
    // No group yet: nothing holds the trim back.
    if (!group) continue;
    if (Number(group.pending) > 0) return false;
    const [newest] = (await redis.xrevrange(key, '+', '-', 'COUNT', 1)) as [string, string[]][];
    if (newest && group['last-delivered-id'] !== newest[0]) return false;
  }
  return true;
}
