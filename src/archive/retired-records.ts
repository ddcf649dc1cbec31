import { MINUTE, SECOND, type Clock } from '../clock.js';
import { noticeCreatedAt } from '../notice/ids.js';
import type { Archive } from './archive.js';
import type { NoticeRecord } from './records.js';

/**
 * The clock skew allowed between the web process, whose clock the notice ID carries, and those
 * that time a retirement: Redis, which stamps the `notice.completed` entry the retire index
 * counts from, and the worker's retire sweep. `herald doctor` fails a machine a second off.
 */
const RETIREMENT_SKEW_MS = 5 * MINUTE;

/** How long an ID the archive holds no record of is answered as unknown without asking it again. */
export const MISS_TTL_MS = 5 * SECOND;
/** Most such IDs remembered at once; the oldest go first. */
export const MISSES_KEPT = 10_000;

/**
 * Whether the notice an ID names may have left Redis by `now`: a notice retires no sooner than
 * HERALD_NOTICE_KEEP_HOT after it finished, and it finishes no sooner than it was created, which
 * its ID says. (Two retire sooner: a notice that finished under a shorter HERALD_NOTICE_KEEP_HOT
 * than today's, and one a version before retirement left in Redis, which `herald retention apply`
 * retires at once. Either reads as unknown until it is as old as today's setting.)
 */
export function mayHaveRetired(noticeId: string, now: number, noticeKeepHotMs: number): boolean {
  const createdAt = noticeCreatedAt(noticeId);
  return createdAt !== undefined && now >= createdAt + noticeKeepHotMs - RETIREMENT_SKEW_MS;
}

/**
 * Retired notices' records as the API reads them, for an ID Redis does not hold: the archive is
 * asked only when the notice is old enough to have retired, and an ID it holds no record of is
 * answered as unknown for MISS_TTL_MS without asking again, so that well-formed unknown IDs do
 * not cost an archive read each. Concurrent reads of one ID share one archive read.
 */
export class RetiredRecords {
  /** IDs the archive held no record of, each with when to ask again; in insertion order, which is expiry order. */
  private readonly misses = new Map<string, number>();
  private readonly reading = new Map<string, Promise<NoticeRecord | null>>();

  constructor(
    private readonly opts: {
      /** Opened on first need. */
      archive: () => Archive;
      clock: Clock;
      /** HERALD_NOTICE_KEEP_HOT. */
      noticeKeepHotMs: number;
    },
  ) {}

  /** The notice's record, or null when it is not (yet) retired, or past retention. */
  async read(noticeId: string): Promise<NoticeRecord | null> {
    const now = this.opts.clock.now();
    if (!mayHaveRetired(noticeId, now, this.opts.noticeKeepHotMs)) return null;
    if ((this.misses.get(noticeId) ?? -Infinity) > now) return null;
    let reading = this.reading.get(noticeId);
    if (!reading) {
      reading = this.opts
        .archive()
        .readRecord(noticeId)
        .finally(() => this.reading.delete(noticeId));
      this.reading.set(noticeId, reading);
    }
    const record = await reading;
    if (!record) this.missed(noticeId);
    return record;
  }

  private missed(noticeId: string): void {
    const now = this.opts.clock.now();
    this.misses.delete(noticeId);
    for (const [id, until] of this.misses) {
      if (until > now && this.misses.size < MISSES_KEPT) break;
      this.misses.delete(id);
    }
    this.misses.set(noticeId, now + MISS_TTL_MS);
  }
}
