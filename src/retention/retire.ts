import type { RedisClient } from '../store/redis.js';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { shardOfNoticeId } from '../notice/ids.js';
import { isTerminal, type NoticeState } from '../notice/states.js';
import { noticeView } from '../notice/view.js';
import type { Keys } from '../store/keys.js';
import { NoticeStore } from '../store/notices.js';
import { readNotice, type Notice } from '../notice/notice.js';
import { RetireIndex } from '../store/retention-indexes.js';
import { CreatedIndex, pruneStats } from '../store/stats.js';
import { ArchiveUnavailableError, type Archive } from '../archive/archive.js';
import { purgeContent } from './content-purge.js';
import { LogMirrorStore } from '../store/log-mirror.js';
import { compareIds } from '../archive/names.js';
import { statsMember, type NoticeRecord, type RetiredStats } from '../archive/records.js';
import { putAddressPointers, putRecipientPointer } from '../archive/recipient-index.js';
import { allAddressMembers, type AddressLookup } from '../notice/address-lookup.js';

export interface RetireDeps {
  redis: RedisClient;
  store: NoticeStore;
  archive: Archive;
  clock: Clock;
  log: Logger;
  /** How long after a waiting notice is looked at again (its last entries not yet archived). */
  retryMs: number;
  /** Stats counters of hours older than this, and such members of the `created` indexes, are dropped (HERALD_STATS_RETENTION). */
  statsRetentionMs: number;
  batchSize?: number;
  /** The address lookup's HMAC: a retiring notice's addresses are indexed in the archive under it. */
  addressLookup: AddressLookup;
}

export interface RetireReport {
  retired: number;
  /** Notices whose last entries the archive does not hold yet: looked at again after retryMs. */
  waiting: number;
  /** The archive could not be reached: the sweep stopped, and everything stays in Redis. */
  archiveUnreachable?: boolean;
}

/**
 * Indexes for retirement the finished notices that no `retire` entry names: those an earlier
 * Herald version finished (or whose SMS checks ran out) before it retired notices. Walks each
 * shard's `created` index (plain notice IDs only: a retired notice's member holds spaces) and
 * reads states in pipelines. Returns how many it indexed (or, with dryRun, would index).
 */
export async function indexUnretired(redis: RedisClient, keys: Keys, now: number, opts: { dryRun?: boolean } = {}): Promise<number> {
  const store = new NoticeStore(redis, keys.prefix);
  const created = new CreatedIndex(redis, keys);
  const retirement = new RetireIndex(redis, keys);
  let indexed = 0;
  for (const shard of keys.allShards()) {
    const ids = (await created.members(shard)).filter((member) => !member.includes(' '));
    for (let i = 0; i < ids.length; i += 500) {
      const slice = ids.slice(i, i + 500);
      const states = await store.statesOf(slice);
      const finished: string[] = [];
      for (const [j, id] of slice.entries()) {
        const state = states[j];
        if (state !== undefined && (await isSettled(store, { id, state }))) finished.push(id);
      }
      if (finished.length === 0) continue;
      if (!opts.dryRun)
        await retirement.add(
          shard,
          finished.map((id) => ({ noticeId: id, at: now })),
        );
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
 *    its pointers in the archive's recipient index (recipient-index.ts), for the notices list:
 *    by recipient ID and by the HMAC of each of its addresses;
 * 4. lets Redis go of the hash and the events list (retireNotice-8.lua, which checks that no
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
  const mirror = new LogMirrorStore(redis, store.keys);
  const created = new CreatedIndex(redis, store.keys);
  const retirement = new RetireIndex(redis, store.keys);
  const report: RetireReport = { retired: 0, waiting: 0 };
  for (const shard of store.keys.allShards()) {
    const now = clock.now();
    await created.dropBefore(shard, now - deps.statsRetentionMs);
    await pruneStats(redis, store.keys, shard, now, deps.statsRetentionMs);
    const due = await retirement.due(shard, now, deps.batchSize ?? 200);
    if (due.length === 0) continue;
    const later = async (noticeId: string) => {
      await retirement.reschedule(shard, noticeId, now + deps.retryMs);
      report.waiting += 1;
    };
    const [backlog] = await mirror.backlog([shard]);
    for (const { noticeId } of due) {
      const notice = shardOfNoticeId(noticeId) === shard ? await readNotice(store, noticeId) : null;
      if (!notice || !(await isSettled(store, notice))) {
        if (notice) log.warn({ noticeId, state: notice.state }, 'a notice indexed for retirement is not finished; left in Redis');
        await retirement.remove(shard, noticeId);
        continue;
      }
      // A finished notice sends nothing more: its content goes now rather than at its TTL.
      if (notice.contentPurgedAt === undefined) {
        await purgeContent(store, noticeId, now, now);
        await later(noticeId);
        continue;
      }
      const entryIds = await store.eventIds(noticeId);
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
        await putAddressPointers(archive, addressHashes(deps.addressLookup, notice), noticeId);
      } catch (error) {
        if (!(error instanceof ArchiveUnavailableError)) throw error;
        // The log mirror warns of the outage; nothing leaves Redis until the archive is back.
        await later(noticeId);
        report.archiveUnreachable = true;
        return report;
      }
      const members = allAddressMembers(deps.addressLookup, noticeId, notice);
      const outcome = await store.retire(noticeId, entryIds.length, statsMember(noticeId, record.stats), members);
      if (outcome === 'retired') report.retired += 1;
      else if (outcome === 'changed') await later(noticeId);
    }
  }
  if (report.retired > 0) log.debug(report, 'finished notices retired to the archive');
  return report;
}

/** The HMACs its addresses are indexed under in the archive (the key that indexes new notices). */
function addressHashes(lookup: AddressLookup, notice: { email: string | undefined; phone: string | undefined }): string[] {
  const hashes: string[] = [];
  if (notice.email) hashes.push(lookup.hashOf('email', notice.email));
  if (notice.phone) hashes.push(lookup.hashOf('phone', notice.phone));
  return hashes;
}

/**
 * The states a notice ends in with `sms.unconfirmed`: `sms_sent` once its SMS checks ran out
 * without a final status, `sms_sending` once the search for its SMS in doubt ended unanswered.
 */
const UNCONFIRMED_STATES: readonly NoticeState[] = ['sms_sent', 'sms_sending'];

/**
 * Herald has nothing more to do for the notice: it is in a terminal state, or it ended with
 * `sms.unconfirmed` (`sms_sent` or `sms_sending`, out of the due index, so that no job or repair
 * moves it on; a live notice in these states is always due).
 */
async function isSettled(store: NoticeStore, notice: { id: string; state: NoticeState }): Promise<boolean> {
  if (isTerminal(notice.state)) return true;
  return UNCONFIRMED_STATES.includes(notice.state) && !(await store.isDue(notice.id));
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
