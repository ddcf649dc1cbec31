import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import { shardOfNoticeId } from '../notice/ids.js';
import type { Keys } from '../store/keys.js';
import { CONTENT_PURGED_FIELD, type NoticeStore } from '../store/notices.js';

/**
 * When each notice's content expires: a zset per shard (`<prefix>:{s<N>}:content-expiry`,
 * scored in ms). The log mirror adds a notice when it reads its `notice.accepted` entry; the
 * purge sweep records `content.purged` when the time comes. Redis's own PEXPIRE on the content
 * stays the safety net that deletes the bodies even if no sweep ever runs.
 */
export class ContentExpiryIndex {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  key(shard: number): string {
    return this.keys.contentExpiry(shard);
  }

  /** Remembers when notices' content expires; a notice already indexed keeps its time. */
  async add(shard: number, items: readonly { noticeId: string; expiresAt: number }[]): Promise<void> {
    if (items.length === 0) return;
    await this.redis.zadd(this.key(shard), 'NX', ...items.flatMap((item) => [item.expiresAt, item.noticeId]));
  }

  /** Notices whose content is due to expire at or before `upTo`, oldest first. */
  async due(shard: number, upTo: number, limit: number): Promise<{ noticeId: string; expiresAt: number }[]> {
    const flat = await this.redis.zrangebyscore(this.key(shard), '-inf', upTo, 'WITHSCORES', 'LIMIT', 0, limit);
    const due = [];
    for (let i = 0; i + 1 < flat.length; i += 2) due.push({ noticeId: flat[i]!, expiresAt: Number(flat[i + 1]) });
    return due;
  }

  async reschedule(shard: number, noticeId: string, expiresAt: number): Promise<void> {
    await this.redis.zadd(this.key(shard), 'XX', expiresAt, noticeId);
  }

  async remove(shard: number, noticeId: string): Promise<void> {
    await this.redis.zrem(this.key(shard), noticeId);
  }
}

export interface ContentPurgeDeps {
  redis: Redis;
  store: NoticeStore;
  clock: Clock;
  log: Logger;
  batchSize?: number;
}

export interface ContentPurgeReport {
  purged: number;
  /** Content found still alive at its indexed time (a longer TTL when it was stored): looked at again later. */
  rescheduled: number;
}

/**
 * Makes sure a notice's content is gone and records `content.purged` through the guarded
 * transition, once per notice. True when this call recorded it.
 */
export async function purgeContent(store: NoticeStore, noticeId: string, purgedAt: number, now: number): Promise<boolean> {
  await store.deleteContent(noticeId);
  const result = await store.transition(noticeId, now, iso(now), {
    name: 'annotate',
    eq: { [CONTENT_PURGED_FIELD]: '' },
    set: { [CONTENT_PURGED_FIELD]: purgedAt },
    entries: [{ type: 'content.purged', purgedAt: iso(purgedAt) }],
  });
  return result.ok;
}

/**
 * One sweep: for every notice whose content has reached its expiry time, make sure the content
 * is gone and record `content.purged` through the guarded transition, once per notice. Any
 * step may be repeated after a crash: the DEL, the guard and the ZREM are all idempotent.
 */
export async function purgeContentOnce(deps: ContentPurgeDeps): Promise<ContentPurgeReport> {
  const { redis, store, clock, log } = deps;
  const index = new ContentExpiryIndex(redis, store.keys);
  const report: ContentPurgeReport = { purged: 0, rescheduled: 0 };
  for (const shard of store.keys.allShards()) {
    const now = clock.now();
    for (const { noticeId, expiresAt } of await index.due(shard, now, deps.batchSize ?? 500)) {
      if (shardOfNoticeId(noticeId) !== shard) {
        await index.remove(shard, noticeId);
        continue;
      }
      const ttl = await redis.pttl(store.keys.content(noticeId));
      if (ttl > 0) {
        await index.reschedule(shard, noticeId, now + ttl);
        report.rescheduled += 1;
        continue;
      }
      // -1: the content has no expiry (set by hand); the content TTL still decides.
      if (await purgeContent(store, noticeId, ttl === -1 ? now : Math.min(expiresAt, now), now)) {
        report.purged += 1;
        log.debug({ noticeId }, 'content purged');
      }
      await index.remove(shard, noticeId);
    }
  }
  return report;
}
