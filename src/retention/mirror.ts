import { performance } from 'node:perf_hooks';
import type { RedisClient } from '../store/redis.js';
import type { Logger } from 'pino';
import { HOUR, type Clock } from '../clock.js';
import type { Keys } from '../store/keys.js';
import { ArchiveIntegrityError, batchDigest, type Archive, type PutOutcome } from '../archive/archive.js';
import { isAnchorable } from '../archive/anchor.js';
import { ContentExpiryIndex, RetireIndex } from '../store/retention-indexes.js';
import { LogMirrorStore, type MirrorBatch } from '../store/log-mirror.js';
import { endsSending } from '../store/notices.js';
import { idTime } from '../archive/names.js';
import { linkIds, type ChainLink } from '../archive/seal.js';

const FAILURE_WARN_EVERY_MS = 60_000;
/**
 * How often a mirror makes sure each shard's anchor is still in the archive: a lifecycle rule on
 * the archive's prefix expires it with the objects, and it is then written again from Redis.
 */
const ANCHOR_CHECK_EVERY_MS = HOUR;

export interface MirrorSettings {
  /** Most entries in one archive object. */
  batchSize: number;
  /** How long another consumer's batch stays untouched before it is claimed. */
  reclaimAfterMs: number;
  /** How long archived entries also stay in Redis, so recent trails read without the archive. */
  keepHotMs: number;
  /** Longest a sweep keeps reading new batches (it always finishes the batch in hand). */
  sweepBudgetMs: number;
}

/**
 * Crash points for tests: a hook that throws stops the mirror right there, as a killed process
 * would, leaving Redis and the archive exactly as they are at that point.
 */
export interface MirrorHooks {
  afterUpload?(batch: MirrorBatch): void | Promise<void>;
  afterAck?(batch: MirrorBatch): void | Promise<void>;
}

export interface MirrorDeps {
  redis: RedisClient;
  keys: Keys;
  archive: Archive;
  clock: Clock;
  log: Logger;
  /** This mirror's name, which holds the batches it takes: unique per process. */
  consumer: string;
  settings: MirrorSettings;
  /** The content TTL, to index when each accepted notice's content expires. */
  contentTtlMs: number;
  /** How long a finished notice stays in Redis (HERALD_NOTICE_KEEP_HOT), to index when it may leave. */
  noticeKeepHotMs: number;
  hooks?: MirrorHooks;
}

export interface MirrorReport {
  batches: number;
  entries: number;
  written: number;
  /** Batches whose object was already there (uploaded before a crash). */
  existed: number;
  failures: number;
  trimmed: number;
}

/**
 * The log mirror: copies each shard's decision log into the archive as batch objects, through
 * a cursor on each (the consumer group `mirror`, read without its pending list), and trims Redis
 * only below what the archive has confirmed.
 *
 * One batch goes: read (or reclaim) → index content expiry and retirement → upload →
 * acknowledge; then the shard is trimmed. Each batch handed out is recorded, with this consumer
 * as its holder, until acknowledged. A crash after the upload leaves the batch recorded: it is
 * uploaded again as the same object (by this consumer, or by another `reclaimAfterMs` after
 * this one took it). A crash after the acknowledgement only delays the trim, which any later
 * sweep does. When the archive cannot be reached the batch stays pending and the stream grows;
 * nothing is dropped.
 */
export class LogMirror {
  /** The Redis side: cursor, batch records, trimming. */
  readonly stream: LogMirrorStore;
  private readonly expiry: ContentExpiryIndex;
  private readonly retirement: RetireIndex;
  private stopping = false;
  /** When each shard last warned that the archive failed, so that an outage logs once a minute per shard. */
  private readonly warnedAt = new Map<number, number>();
  /** When each shard's anchor was last found or written in the archive (by the injected clock). */
  private readonly anchoredAt = new Map<number, number>();

  constructor(private readonly deps: MirrorDeps) {
    this.stream = new LogMirrorStore(deps.redis, deps.keys);
    this.expiry = new ContentExpiryIndex(deps.redis, deps.keys);
    this.retirement = new RetireIndex(deps.redis, deps.keys);
  }

  /** One sweep over the given shards (all by default), in parallel. */
  async mirrorOnce(shards: readonly number[] = this.deps.keys.allShards()): Promise<MirrorReport> {
    const report: MirrorReport = { batches: 0, entries: 0, written: 0, existed: 0, failures: 0, trimmed: 0 };
    const until = performance.now() + this.deps.settings.sweepBudgetMs;
    const results = await Promise.allSettled(shards.map((shard) => this.mirrorShard(shard, report, until)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return report;
  }

  /** Stops reading new batches; the batch in hand is finished (used on shutdown). */
  stop(): void {
    this.stopping = true;
  }

  private async mirrorShard(shard: number, report: MirrorReport, until: number): Promise<void> {
    const { settings, archive, hooks, log } = this.deps;
    // The last entry of the new batch just stored: the next one is read on from it.
    let after: string | undefined;
    while (!this.stopping) {
      // The first call begins the shard's chain in Redis if it has none, even when it hands out nothing.
      const batch = await this.stream.next(
        shard,
        this.deps.consumer,
        settings.batchSize,
        settings.reclaimAfterMs,
        this.deps.clock.now(),
        after,
      );
      if (!batch) {
        // A shard with nothing new is anchored all the same (the first run after an upgrade).
        await this.anchor(shard).catch((error: unknown) =>
          this.warn(shard, { err: error }, 'log mirror could not anchor a shard; it tries again'),
        );
        break;
      }
      await this.indexContentExpiry(batch);
      await this.indexRetirement(batch);
      let outcome: PutOutcome;
      let digest: string;
      try {
        await this.anchor(shard);
        const prev = await this.linkBefore(batch);
        ({ outcome, digest } = await archive.putBatch(shard, batch.entries, { firstAttempt: batch.mode === 'new', prev }));
      } catch (error) {
        // The batch stays recorded and is tried again on the next sweep; the stream keeps growing meanwhile.
        report.failures += 1;
        this.warn(
          shard,
          { err: error, firstId: batch.firstId, lastId: batch.lastId },
          'log mirror could not store a batch; it stays in Redis',
        );
        break;
      }
      await hooks?.afterUpload?.(batch);
      await this.stream.ack(batch, digest);
      await hooks?.afterAck?.(batch);
      report.batches += 1;
      report.entries += batch.entries.length;
      report[outcome] += 1;
      if (batch.mode !== 'new')
        log.info({ shard, mode: batch.mode, firstId: batch.firstId, lastId: batch.lastId, outcome }, 'log mirror stored a batch again');
      // A batch that took every unread entry ends the shard's sweep: asking again would find none
      // (another consumer's stale batch waits for the next sweep).
      if (!batch.more || performance.now() >= until) break;
      after = batch.mode === 'new' ? batch.lastId : undefined;
    }
    const now = this.deps.clock.now();
    const { removed } = await this.stream.trim(shard, now - settings.keepHotMs, settings.reclaimAfterMs);
    report.trimmed += removed;
  }

  /** Warns of an archive failure of the shard, once a minute at most. */
  private warn(shard: number, fields: Record<string, unknown>, message: string): void {
    const now = performance.now();
    if (now - (this.warnedAt.get(shard) ?? -Infinity) < FAILURE_WARN_EVERY_MS) return;
    this.warnedAt.set(shard, now);
    this.deps.log.warn({ ...fields, shard }, message);
  }

  /**
   * Makes sure the archive holds the shard's anchor (src/archive/anchor.ts), written from what
   * Redis's chain says when it is missing, before the shard's next sealed object; then again once
   * an hour (one sealed with a key rotated out of first place is sealed again). An anchor that
   * says otherwise, or fails its checks, stays as it is, for `herald audit --verify` to name: the
   * mirror goes on, so that Redis does not fill up.
   */
  private async anchor(shard: number): Promise<void> {
    const now = this.deps.clock.now();
    if (now - (this.anchoredAt.get(shard) ?? -Infinity) < ANCHOR_CHECK_EVERY_MS) return;
    const start = await this.stream.chain(shard);
    // The batch script has begun the chain before any call here.
    if (!start || !isAnchorable(start)) return;
    try {
      const { outcome, held } = await this.deps.archive.putAnchor(shard, start);
      if (outcome === 'differs')
        this.deps.log.error(
          { shard, anchor: held, redis: start },
          "the archive's anchor says this shard's chain began elsewhere than Redis says: Redis lost its chain state, and herald audit --verify names the objects of the chain it began again",
        );
    } catch (error) {
      if (!(error instanceof ArchiveIntegrityError)) throw error;
      this.deps.log.error(
        { err: error, shard },
        "the shard's anchor in the archive fails its checks; left for herald audit --verify to name",
      );
    }
    this.anchoredAt.set(shard, now);
  }

  /**
   * The link to the batch before this one in the shard's chain. Its digest is of its content,
   * which only its entries decide: the tip Redis keeps when that batch was the last acknowledged
   * (the usual case), else its entries while the stream still holds them (it is still recorded,
   * held by another consumer), else its object, read back and checked.
   */
  private async linkBefore(batch: MirrorBatch): Promise<ChainLink | null> {
    // '' : a version without the chain handed the batch out; it starts a chain of its own, which `herald audit --verify` reports.
    if (batch.prev === '-' || batch.prev === '') return null;
    if (batch.tip?.range === batch.prev) return batch.tip;
    const { firstId, lastId } = linkIds({ range: batch.prev, digest: '' });
    const entries = await this.stream.batchEntries(batch.shard, firstId, lastId);
    if (entries) return { range: batch.prev, digest: batchDigest(entries) };
    const link = await this.deps.archive.linkTo(batch.shard, firstId, lastId);
    if (!link)
      throw new Error(
        `the batch before ${batch.firstId} in shard ${batch.shard}'s chain (${batch.prev}) is neither in Redis nor in the archive`,
      );
    return link;
  }

  private async indexContentExpiry(batch: MirrorBatch): Promise<void> {
    const accepted = batch.entries
      .filter((entry) => entry.type === 'notice.accepted')
      // The content's PEXPIRE was set in the same script that wrote this entry, at the entry's Redis
      // time. A notice already indexed by the step that ended its sending (transition-8.lua) keeps
      // that step's time, which is not later.
      .map((entry) => ({ noticeId: entry.noticeId, at: idTime(entry.id) + this.deps.contentTtlMs }));
    await this.expiry.add(batch.shard, accepted);
  }

  private async indexRetirement(batch: MirrorBatch): Promise<void> {
    const completed = batch.entries
      // A notice Herald has nothing more to do for: finished, or its SMS checks ran out.
      .filter(endsSending)
      .map((entry) => ({ noticeId: entry.noticeId, at: idTime(entry.id) + this.deps.noticeKeepHotMs }));
    await this.retirement.add(batch.shard, completed);
  }
}
