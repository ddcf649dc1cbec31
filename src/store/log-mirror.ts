import { execAll, type RedisClient } from './redis.js';
import { decodeEntry, type StoredEntry } from './notices.js';
import { EVENTS_GROUP } from './event-log.js';
import type { Keys } from './keys.js';
import { defineScripts, type HeraldScripts } from './scripts.js';
import type { ChainStart } from '../archive/anchor.js';
import { idTime, PARTITION_MS } from '../archive/names.js';
import type { ChainLink } from '../archive/seal.js';

/**
 * The consumer group on every shard's log that is the log mirror's cursor: its last-delivered
 * ID is the newest entry handed out. Batches are read from it without its pending list (NOACK);
 * a batch's record holds it until the archive confirms it.
 */
export const MIRROR_GROUP = 'mirror';

/** A batch handed to one consumer: `own` (its earlier batch), `claimed` (a dead consumer's), `new`. */
export interface MirrorBatch {
  shard: number;
  mode: 'own' | 'claimed' | 'new';
  entries: StoredEntry[];
  firstId: string;
  lastId: string;
  /**
   * The range (`firstId_lastId`) of the batch before it in the shard's archive chain, fixed when
   * it was first handed out; '-' when it is the first; '' when a version without the chain
   * handed it out after the chain began.
   */
  prev: string;
  /** The shard's chain tip when the batch was handed out: the newest acknowledged batch. */
  tip: ChainLink | undefined;
  /** False when this batch took every entry of the shard no consumer had read: asking again now would find none. */
  more: boolean;
}

/** The shard's archive chain as Redis holds it (`<prefix>:{s<N>}:archive-chain`). */
export interface ChainState extends ChainStart {
  /** The newest batch the archive confirmed storing. */
  tip: ChainLink | undefined;
}

/** How far the mirror is behind on one shard. */
export interface ShardBacklog {
  shard: number;
  /** Entries in the stream (archived ones still inside the hot window included). */
  length: number;
  /** Entries the archive does not hold yet. */
  unarchived: number;
  /** The oldest of those, or undefined when the shard is fully archived. */
  oldestUnarchivedId: string | undefined;
}

/** A chain link as the chain hash writes it: `<firstId>_<lastId> <digest>`. */
function parseTip(text: string | null | undefined): ChainLink | undefined {
  const [range, digest] = (text ?? '').split(' ');
  return range && digest ? { range, digest } : undefined;
}

/**
 * The Redis side of the log mirror: the cursor on each shard's log (a consumer group read
 * without its pending list), the batch records (`<prefix>:{s<N>}:mirror-batches`, each also the
 * lease of the consumer that holds the batch), acknowledgement and trimming. Every script touches the
 * keys of one shard only, passed through KEYS.
 */
export class LogMirrorStore {
  private readonly redis: RedisClient & HeraldScripts;

  constructor(
    redis: RedisClient,
    readonly keys: Keys,
  ) {
    this.redis = defineScripts(redis);
  }

  /**
   * Where the shard's chain began and its tip; null before the chain began. A chain an earlier
   * version began, before this version's first batch of it, lacks `v1through` and `v2since`.
   */
  async chain(shard: number): Promise<ChainState | null> {
    const [last, genesis, since, tip, v1through, v2since] = await this.redis.hmget(
      this.keys.archiveChain(shard),
      'last',
      'genesis',
      'since',
      'tip',
      'v1through',
      'v2since',
    );
    if (last === null) return null;
    return {
      genesisFirstId: genesis ?? undefined,
      sinceMs: Number(since),
      v1ThroughId: v1through === null ? undefined : v1through === '-' ? null : v1through,
      v2SinceMs: v2since === null ? undefined : Number(v2since),
      tip: parseTip(tip),
    };
  }

  /** The ranges (`firstId_lastId`) of the batches handed out and not yet acknowledged: not in the archive yet, or not confirmed. */
  async pendingBatches(shard: number): Promise<Set<string>> {
    const records = await this.redis.hgetall(this.keys.mirrorBatches(shard));
    return new Set(Object.entries(records).map(([firstId, record]) => `${firstId}_${record.split(' ')[0]}`));
  }

  /**
   * The consumer's next batch of the shard, or null when there is none: its own or a stale batch
   * (nextMirrorBatch-3.lua), else the entries after the cursor, read here and taken
   * (takeMirrorBatch-3.lua). `after` is the last entry of the new batch this consumer took just
   * before, in the same sweep: the entries after it are read at once, without asking for the
   * consumer's own or stale batches again.
   */
  async next(
    shard: number,
    consumer: string,
    most: number,
    reclaimAfterMs: number,
    now: number,
    after?: string,
  ): Promise<MirrorBatch | null> {
    let cursor = after;
    if (cursor === undefined) {
      const reply = await this.redis.nextMirrorBatch(
        this.keys.log(shard),
        this.keys.mirrorBatches(shard),
        this.keys.archiveChain(shard),
        MIRROR_GROUP,
        consumer,
        reclaimAfterMs,
        now,
      );
      if (reply[0] !== 'new') {
        const [mode, firstId, lastId, count, prev, tip] = reply;
        const entries = await this.read(shard, firstId, lastId, Number(count));
        if (entries.length === 0) return null;
        return { shard, mode, entries, firstId, lastId: entries.at(-1)!.id, prev, tip: parseTip(tip), more: true };
      }
      cursor = reply[1];
    }
    // Another consumer that takes the same entries first moves the cursor: read on from there.
    for (;;) {
      const read = await this.read(shard, `(${cursor}`, '+', most);
      if (read.length === 0) return null;
      // Never across a partition boundary, so that each object lies in one partition.
      const partition = Math.floor(idTime(read[0]!.id) / PARTITION_MS);
      const entries = read.filter((entry) => Math.floor(idTime(entry.id) / PARTITION_MS) === partition);
      const firstId = entries[0]!.id;
      const lastId = entries.at(-1)!.id;
      const reply = await this.redis.takeMirrorBatch(
        this.keys.log(shard),
        this.keys.mirrorBatches(shard),
        this.keys.archiveChain(shard),
        MIRROR_GROUP,
        consumer,
        cursor,
        firstId,
        lastId,
        entries.length,
        now,
      );
      if (reply[0] === 'moved') {
        // The stream was deleted under us (a test cleaning up, an operator): nothing to hand out.
        if (reply[1] === '') return null;
        cursor = reply[1];
        continue;
      }
      const [, prev, tip] = reply;
      const more = entries.length < read.length || read.length >= most;
      return { shard, mode: 'new', entries, firstId, lastId, prev, tip: parseTip(tip), more };
    }
  }

  /** The shard's entries from `start` to `end` (XRANGE, so `(id` excludes id), at most `count`. */
  private async read(shard: number, start: string, end: string, count: number): Promise<StoredEntry[]> {
    const rows = (await this.redis.xrange(this.keys.log(shard), start, end, 'COUNT', count)) as [string, string[]][];
    return rows.map(([id, fields]) => decodeEntry(id, fields));
  }

  /** Acknowledges a batch the archive confirmed, `digest` its content's SHA-256 (ackMirrorBatch-2.lua). */
  async ack(batch: MirrorBatch, digest: string): Promise<number> {
    return this.redis.ackMirrorBatch(
      this.keys.mirrorBatches(batch.shard),
      this.keys.archiveChain(batch.shard),
      batch.firstId,
      batch.lastId,
      batch.entries.length,
      digest,
    );
  }

  /** A stored batch's entries while the stream still holds all of them (none trimmed), else null. */
  async batchEntries(shard: number, firstId: string, lastId: string): Promise<StoredEntry[] | null> {
    const rows = (await this.redis.xrange(this.keys.log(shard), firstId, lastId)) as [string, string[]][];
    if (rows.length === 0 || rows[0]![0] !== firstId || rows.at(-1)![0] !== lastId) return null;
    return rows.map(([id, fields]) => decodeEntry(id, fields));
  }

  /**
   * Trims the shard's log below what the archive confirmed and below `keepFromMs` (the hot
   * window), and forgets consumers idle and empty for `forgetAfterMs` (trimMirroredLog-2.lua).
   */
  async trim(shard: number, keepFromMs: number, forgetAfterMs: number): Promise<{ removed: number; trimPoint: string }> {
    const [removed, trimPoint] = await this.redis.trimMirroredLog(
      this.keys.log(shard),
      this.keys.mirrorBatches(shard),
      MIRROR_GROUP,
      `${Math.max(0, Math.floor(keepFromMs))}-0`,
      forgetAfterMs,
      // The callers' events' group (src/store/event-log.ts), where it exists, must be done with an entry too.
      EVENTS_GROUP,
    );
    return { removed: Number(removed), trimPoint: String(trimPoint) };
  }

  /** The backlog of every given shard, in one round trip. */
  async backlog(shards: readonly number[]): Promise<ShardBacklog[]> {
    const replies = await execAll(
      this.redis,
      shards.map((shard) => ['mirrorBacklog', this.keys.log(shard), this.keys.mirrorBatches(shard), MIRROR_GROUP]),
    );
    return replies.map(([error, reply], i) => {
      if (error) throw error;
      const [length, unarchived, oldest] = reply as [number, number, string];
      return { shard: shards[i]!, length: Number(length), unarchived: Number(unarchived), oldestUnarchivedId: oldest || undefined };
    });
  }
}
