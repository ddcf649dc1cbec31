import type { Clock } from '../clock.js';
import { shardOfNoticeId } from '../notice/ids.js';
import type { NoticeStore, StoredEntry } from '../store/notices.js';
import { readNotice } from '../notice/notice.js';
import { noticeView, type NoticeView } from '../notice/view.js';
import type { Archive } from './archive.js';
import { idTime } from './names.js';
import type { NoticeRecord } from './records.js';
import { RetiredRecords } from './retired-records.js';

/** Entries of a notice's trail that neither Redis nor the archive holds, though both should. */
export class TrailGapError extends Error {
  constructor(
    readonly noticeId: string,
    readonly missing: string[],
  ) {
    super(`the trail of ${noticeId} lacks ${missing.length} entries that are neither in Redis nor in the archive (first: ${missing[0]})`);
    this.name = 'TrailGapError';
  }
}

export interface TrailSources {
  store: NoticeStore;
  /** Opened only when an entry is no longer in Redis. */
  archive: () => Archive;
  /** Entries older than this (ms) may have left the archive too (HERALD_AUDIT_RETENTION). */
  retainedSince: number;
  /** How a retired notice's record is looked up; by default it is read from the archive, whatever the ID. */
  readRecord?: (noticeId: string) => Promise<NoticeRecord | null>;
}

export interface Trail {
  entries: StoredEntry[];
  fromRedis: number;
  fromArchive: number;
  /** Entries past the audit retention, gone from both. */
  expired: number;
}

/**
 * A notice's complete decision log, in order and without duplicates: the notice's events list
 * (or, once the notice is retired, its archive record) names every entry; those Redis still
 * holds are read there, the rest from the archive objects whose ID ranges hold them. The mirror trims only what the archive confirmed, so an entry
 * missing from Redis is in the archive — unless it is older than the audit retention.
 */
export async function readTrail(sources: TrailSources, noticeId: string): Promise<Trail> {
  const shard = shardOfNoticeId(noticeId);
  if (shard === undefined) throw new Error(`not a notice ID: ${noticeId}`);
  const readRecord = sources.readRecord ?? ((id: string) => sources.archive().readRecord(id));
  let ids = [...new Set(await sources.store.eventIds(noticeId))];
  // Redis let go of a retired notice (src/retention/retire.ts): its record names its entries.
  if (ids.length === 0) ids = (await readRecord(noticeId))?.entryIds ?? [];
  const trail: Trail = { entries: [], fromRedis: 0, fromArchive: 0, expired: 0 };
  if (ids.length === 0) return trail;

  const found = await sources.store.logEntries(shard, ids);
  trail.fromRedis = found.size;

  const missing = ids.filter((id) => !found.has(id));
  if (missing.length > 0) {
    const archived = await sources.archive().findEntries(shard, missing, { noticeId });
    const gaps: string[] = [];
    for (const id of missing) {
      const entry = archived.get(id);
      if (entry) {
        found.set(id, entry);
        trail.fromArchive += 1;
      } else if (idTime(id) < sources.retainedSince) trail.expired += 1;
      else gaps.push(id);
    }
    if (gaps.length > 0) throw new TrailGapError(noticeId, gaps);
  }
  trail.entries = ids.map((id) => found.get(id)).filter((entry): entry is StoredEntry => entry !== undefined);
  return trail;
}

/**
 * A notice's view (`GET /v1/notices/:id`): from Redis while it holds the notice, from the
 * notice's archive record once it is retired; null when neither has it.
 */
export async function readView(
  store: NoticeStore,
  readRecord: (noticeId: string) => Promise<NoticeRecord | null>,
  noticeId: string,
): Promise<NoticeView | null> {
  const notice = await readNotice(store, noticeId);
  if (notice) return noticeView(notice);
  return (await readRecord(noticeId))?.view ?? null;
}

/** Reads trails and views for a process that serves them. */
export interface TrailReader {
  read(noticeId: string): Promise<Trail>;
  view(noticeId: string): Promise<NoticeView | null>;
}

/**
 * A TrailReader over the process's archive, which `archive` opens on first need (its owner
 * closes it). A notice Redis does not hold is looked for in the archive only once it may have
 * retired, and not again for a few seconds when it is not there (src/archive/retired-records.ts).
 */
export function trailReader(opts: {
  store: NoticeStore;
  archive: () => Archive;
  auditRetentionMs: number;
  /** HERALD_NOTICE_KEEP_HOT: how long a finished notice stays in Redis. */
  noticeKeepHotMs: number;
  clock: Clock;
}): TrailReader {
  const records = new RetiredRecords({ archive: opts.archive, clock: opts.clock, noticeKeepHotMs: opts.noticeKeepHotMs });
  const readRecord = (noticeId: string) => records.read(noticeId);
  return {
    read: (noticeId) =>
      readTrail(
        {
          store: opts.store,
          archive: opts.archive,
          retainedSince: opts.clock.now() - opts.auditRetentionMs,
          readRecord,
        },
        noticeId,
      ),
    view: (noticeId) => (shardOfNoticeId(noticeId) === undefined ? Promise.resolve(null) : readView(opts.store, readRecord, noticeId)),
  };
}
