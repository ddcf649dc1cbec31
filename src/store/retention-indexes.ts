import type { RedisClient } from './redis.js';
import type { Keys } from './keys.js';

/**
 * A zset per shard of notices scored by a time (ms): the index a retention sweep walks. A
 * notice already indexed keeps its time when added again.
 */
class ShardTimeIndex {
  constructor(
    private readonly redis: RedisClient,
    private readonly key: (shard: number) => string,
  ) {}

  /** Indexes notices at their times; one already indexed keeps its own. */
  async add(shard: number, items: readonly { noticeId: string; at: number }[]): Promise<void> {
    if (items.length === 0) return;
    await this.redis.zadd(this.key(shard), 'NX', ...items.flatMap((item) => [item.at, item.noticeId]));
  }

  /** Notices whose time is at or before `upTo`, oldest first, with their times. */
  async due(shard: number, upTo: number, limit: number): Promise<{ noticeId: string; at: number }[]> {
    const flat = await this.redis.zrangebyscore(this.key(shard), '-inf', upTo, 'WITHSCORES', 'LIMIT', 0, limit);
    const due = [];
    for (let i = 0; i + 1 < flat.length; i += 2) due.push({ noticeId: flat[i]!, at: Number(flat[i + 1]) });
    return due;
  }

  /** Moves an indexed notice to a new time (a notice no longer indexed stays out). */
  async reschedule(shard: number, noticeId: string, at: number): Promise<void> {
    await this.redis.zadd(this.key(shard), 'XX', at, noticeId);
  }

  async remove(shard: number, noticeId: string): Promise<void> {
    await this.redis.zrem(this.key(shard), noticeId);
  }
}

/**
 * When each notice's content expires (`<prefix>:{s<N>}:content-expiry`). The log mirror adds a
 * notice when it reads its `notice.accepted` entry; the content purge walks it.
 */
export class ContentExpiryIndex extends ShardTimeIndex {
  constructor(redis: RedisClient, keys: Keys) {
    super(redis, (shard) => keys.contentExpiry(shard));
  }
}

/**
 * When each finished notice may leave Redis (`<prefix>:{s<N>}:retire`). The log mirror adds a
 * notice when it reads its `notice.completed` (or `sms.unconfirmed`) entry; retirement walks it.
 */
export class RetireIndex extends ShardTimeIndex {
  constructor(redis: RedisClient, keys: Keys) {
    super(redis, (shard) => keys.retire(shard));
  }
}
