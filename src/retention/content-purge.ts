import type { RedisClient } from '../store/redis.js';
import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import { shardOfNoticeId } from '../notice/ids.js';
import { CONTENT_PURGED_FIELD, type NoticeStore } from '../store/notices.js';
import { ContentExpiryIndex } from '../store/retention-indexes.js';

export interface ContentPurgeDeps {
  redis: RedisClient;
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
    for (const { noticeId, at: expiresAt } of await index.due(shard, now, deps.batchSize ?? 500)) {
      if (shardOfNoticeId(noticeId) !== shard) {
        await index.remove(shard, noticeId);
        continue;
      }
      const ttl = await store.contentTtlMs(noticeId);
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
