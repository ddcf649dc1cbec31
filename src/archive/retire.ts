import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { shardOfNoticeId } from '../notice/ids.js';
import { isTerminal, type NoticeState } from '../notice/states.js';
import { noticeView } from '../notice/view.js';
import type { Keys } from '../store/keys.js';
import type { Notice, NoticeStore } from '../store/notices.js';
import { ArchiveUnavailableError, type Archive } from './archive.js';
import { purgeContent } from './content-purge.js';
import { MirrorLog } from './mirror-log.js';
import { compareIds } from './names.js';
import { putRecipientPointer } from './recipient-index.js';
import { pruneStats } from '../notice/stats.js';
import { statsMember, type NoticeRecord, type RetiredStats } from './records.js';

export interface RetireDeps {
  redis: Redis;
  store: NoticeStore;
  archive: Archive;
  clock: Clock;
  log: Logger;
  /** How long after a waiting notice is looked at again (its last entries not yet archived). */
  retryMs: number;
  /** Stats counters of hours older than this, and such members of the `created` indexes, are dropped (HERALD_STATS_RETENTION). */
  statsRetentionMs: number;
  batchSize?: number;
}

export interface RetireReport {
  retired: number;
  /** Notices whose last entries the archive does not hold yet: looked at again after retryMs. */
  waiting: number;
  /** The archive could not be reached: the sweep stopped, and everything stays in Redis. */
  archiveUnreachable?: boolean;
}

/** Remembers when each finished notice may leave Redis; a notice already indexed keeps its time. */
export async function indexRetirement(
  redis: Redis,
  keys: Keys,
  shard: number,
  items: readonly { noticeId: string; retireAt: number }[],
): Promise<void> {
  if (items.length === 0) return;
  await redis.zadd(keys.retire(shard), 'NX', ...items.flatMap((item) => [item.retireAt, item.noticeId]));
}

/**
 * Indexes for retirement the finished notices that no `retire` entry names: those an earlier
 * Herald version finished (or whose SMS checks ran out) before it retired notices. Walks each
 * shard's `created` index (plain notice IDs only: a retired notice's member holds spaces) and
 * reads states in pipelines. Returns how many it indexed (or, with dryRun, would index).
 */
export async function indexUnretired(redis: Redis, keys: Keys, now: number, opts: { dryRun?: boolean } = {}): Promise<number> {
  let indexed = 0;
  for (const shard of keys.allShards()) {
    const ids = (await redis.zrange(keys.created(shard), 0, -1)).filter((member) => !member.includes(' '));
    for (let i = 0; i < ids.length; i += 500) {
      const slice = ids.slice(i, i + 500);
      const states = await redis.pipeline(slice.map((id) => ['hget', keys.notice(id), 'state'])).exec();
      const finished: string[] = [];
      for (const [j, id] of slice.entries()) {
        const state = states?.[j]?.[1];
        if (typeof state === 'string' && (await isSettled(redis, keys, { id, state: state as NoticeState }))) finished.push(id);
      }
      if (finished.length === 0) continue;
      if (!opts.dryRun) await redis.zadd(keys.retire(shard), 'NX', ...finished.flatMap((id) => [now, id]));
      indexed += finished.length;
    }
  }
  return indexed;
}

/**
 * Finished notices leave Redis. The log mirror indexes each notice's `notice.completed` entry in
 * its shard's `retire` zset, scored by the entry's time plus HERALD_NOTICE_KEEP_HOT; when that
 * time comes, the retire sweep:
 *
 * 1. purges the content if it is still there (a finished notice sends nothing more), recording
 *    `content.purged`, and waits for the mirror to archive that entry;
 * 2. waits until the archive holds every entry of the notice (all below the shard's oldest
 *    unarchived entry);
 * 3. stores the notice's record in the archive: its last view, its entry IDs, its counts; and
 *    its pointer in the archive's recipient index (recipient-index.ts), for the notices list;
 * 4. lets Redis go of the hash and the events list (retireNotice-7.lua, which checks that no
 *    entry came meanwhile); its /v1/stats counters stay.
 *
 * The same sweep drops the stats counters of hours older than HERALD_STATS_RETENTION, the reach
 * of /v1/stats (once an hour), and the members of the `created` indexes earlier versions wrote
 * that are as old.
 *
 * Each step can be repeated after a crash: the record is written again with the same bytes, and
 * the script does nothing for a notice already gone. Reads of a retired notice (`GET`,
 * `/events`, the timeline, `herald audit`) come from its record and the archived log.
 */
export async function retireNoticesOnce(deps: RetireDeps): Promise<RetireReport> {
  const { redis, store, archive, clock, log } = deps;
  const mirror = new MirrorLog(redis, store.keys);
  const report: RetireReport = { retired: 0, waiting: 0 };
  for (const shard of store.keys.allShards()) {
    const now = clock.now();
    await redis.zremrangebyscore(store.keys.created(shard), '-inf', `(${now - deps.statsRetentionMs}`);
    await pruneStats(redis, store.keys, shard, now, deps.statsRetentionMs);
    const retireKey = store.keys.retire(shard);
    const due = await redis.zrangebyscore(retireKey, '-inf', now, 'LIMIT', 0, deps.batchSize ?? 200);
    if (due.length === 0) continue;
    const later = async (noticeId: string) => {
      await redis.zadd(retireKey, 'XX', now + deps.retryMs, noticeId);
      report.waiting += 1;
    };
    const [backlog] = await mirror.backlog([shard]);
    for (const noticeId of due) {
      const notice = shardOfNoticeId(noticeId) === shard ? await store.get(noticeId) : null;
      if (!notice || !(await isSettled(redis, store.keys, notice))) {
        if (notice) log.warn({ noticeId, state: notice.state }, 'a notice indexed for retirement is not finished; left in Redis');
        await redis.zrem(retireKey, noticeId);
        continue;
      }
      // A finished notice sends nothing more: its content goes now rather than at its TTL.
      if (notice.contentPurgedAt === undefined) {
        await purgeContent(store, noticeId, now, now);
        await later(noticeId);
        continue;
      }
      const entryIds = await redis.lrange(store.keys.events(noticeId), 0, -1);
      const last = entryIds.at(-1);
      const oldestUnarchived = backlog?.oldestUnarchivedId;
      if (last === undefined || (oldestUnarchived !== undefined && compareIds(last, oldestUnarchived) >= 0)) {
        await later(noticeId);
        continue;
      }
      const record: NoticeRecord = { id: noticeId, view: noticeView(notice), entryIds, stats: retiredStats(notice) };
      try {
        await archive.putRecord(record);
        await putRecipientPointer(archive, notice.recipientId, noticeId);
      } catch (error) {
        if (!(error instanceof ArchiveUnavailableError)) throw error;
        // The log mirror warns of the outage; nothing leaves Redis until the archive is back.
        await later(noticeId);
        report.archiveUnreachable = true;
        return report;
      }
      const outcome = await store.retire(noticeId, entryIds.length, statsMember(noticeId, record.stats));
      if (outcome === 'retired') report.retired += 1;
      else if (outcome === 'changed') await later(noticeId);
    }
  }
  if (report.retired > 0) log.debug(report, 'finished notices retired to the archive');
  return report;
}

/**
 * Herald has nothing more to do for the notice: it is in a terminal state, or it is `sms_sent`
 * with its SMS checks run out (`sms.unconfirmed`): out of the due index, so that no job or
 * repair moves it on.
 */
async function isSettled(redis: Redis, keys: Keys, notice: { id: string; state: NoticeState }): Promise<boolean> {
  if (isTerminal(notice.state)) return true;
  return notice.state === 'sms_sent' && (await redis.zscore(keys.due(shardOfNoticeId(notice.id)!), notice.id)) === null;
}

function retiredStats(notice: Notice): RetiredStats {
  return {
    state: notice.state,
    fallbackReason: notice.fallbackReason ?? null,
    emailChecks: notice.emailChannel.checksDone,
    smsChecks: notice.smsChannel.checksDone,
    emailSent: notice.emailChannel.providerMessageId !== undefined,
    smsSegments: notice.smsSegments,
  };
}
