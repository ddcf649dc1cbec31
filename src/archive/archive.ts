import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import type { StoredEntry } from '../store/notices.js';
import { noticeCreatedAt, SHARD_COUNT } from '../notice/ids.js';
import { compareIds, idTime, objectKey, parseObjectKey, partitionDir, partitionStart, shardDir, type ObjectRef } from './names.js';
import { decodeRecord, encodeRecord, parseRecordKey, recordKey, recordsDir, type NoticeRecord } from './records.js';
import type { ArchiveStore, StoredObject } from './store.js';

/** An object's bytes do not match the SHA-256 stored with it, or it has none. */
export class ArchiveIntegrityError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(`${key}: ${message}`);
    this.name = 'ArchiveIntegrityError';
  }
}

/** A valid object with other entries already has this batch's name: never overwritten. */
export class ArchiveConflictError extends Error {
  constructor(readonly key: string) {
    super(`${key} exists with other entries than this batch; it is left as it is`);
    this.name = 'ArchiveConflictError';
  }
}

/** The archive store could not be read or written (network, permissions, disk). */
export class ArchiveUnavailableError extends Error {
  constructor(
    readonly location: string,
    cause: unknown,
  ) {
    super(`the archive at ${location} cannot be reached: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ArchiveUnavailableError';
  }
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const GZIP_OS_BYTE = 9;
const GZIP_OS_UNKNOWN = 0xff;
const DELETE_BATCH = 1000;

/**
 * A batch as an archive object: gzip NDJSON, one entry per line exactly as the events API
 * shows it (`id` first). The same entries always give the same bytes: entries are immutable,
 * their field order is the stream's, gzip writes no time, and the OS byte is fixed.
 */
export function encodeObject(entries: readonly StoredEntry[]): { body: Buffer; sha256: string } {
  const ndjson = entries.map((entry) => `${JSON.stringify(entry)}\n`).join('');
  const body = gzipSync(ndjson, { level: 6 });
  body[GZIP_OS_BYTE] = GZIP_OS_UNKNOWN;
  return { body, sha256: sha256(body) };
}

/** An object's bytes, once checked against the SHA-256 stored with them. */
function verified(key: string, stored: StoredObject): Buffer {
  if (!stored.sha256) throw new ArchiveIntegrityError(key, 'no SHA-256 is stored with it');
  const actual = sha256(stored.body);
  if (actual !== stored.sha256) throw new ArchiveIntegrityError(key, `SHA-256 is ${actual}, ${stored.sha256} was stored`);
  return stored.body;
}

/** Checks an object against its stored SHA-256, then decodes its entries. */
export function decodeObject(key: string, stored: StoredObject): StoredEntry[] {
  return gunzipSync(verified(key, stored))
    .toString('utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as StoredEntry);
}

export type PutOutcome = 'written' | 'existed';

/**
 * Herald's decision-log archive: immutable batch objects of each shard's log under
 * `<herald prefix>/s<NN>/<day>/<hour>/`, on any ArchiveStore.
 */
export class Archive {
  constructor(
    readonly store: ArchiveStore,
    readonly heraldPrefix: string,
  ) {}

  /**
   * Stores one batch. A batch uploaded before (a crash between upload and acknowledgement) finds
   * its object already there with the same entries, and that counts as stored; a damaged object
   * under the name is rewritten; a valid one with other entries is refused. `firstAttempt` (a
   * batch of entries never handed out before, so no object can have its name) skips the check.
   */
  async putBatch(
    shard: number,
    entries: readonly StoredEntry[],
    opts: { firstAttempt?: boolean } = {},
  ): Promise<{ key: string; outcome: PutOutcome; bytes: number }> {
    const key = objectKey(this.heraldPrefix, shard, entries[0]!.id, entries.at(-1)!.id);
    const { body, sha256: checksum } = encodeObject(entries);
    const existing = opts.firstAttempt ? null : await this.io(() => this.store.get(key));
    if (existing) {
      if (existing.sha256 === checksum && existing.body.equals(body)) return { key, outcome: 'existed', bytes: body.length };
      let held: StoredEntry[] | undefined;
      try {
        held = decodeObject(key, existing);
      } catch (error) {
        if (!(error instanceof ArchiveIntegrityError)) throw error;
      }
      if (held) {
        // Another zlib build compresses differently; the entries are what must match.
        const same = held.length === entries.length && held.every((e, i) => JSON.stringify(e) === JSON.stringify(entries[i]));
        if (same) return { key, outcome: 'existed', bytes: existing.body.length };
        throw new ArchiveConflictError(key);
      }
    }
    await this.io(() => this.store.put(key, body, checksum));
    return { key, outcome: 'written', bytes: body.length };
  }

  /** The verified entries of one object, or null when it is gone. */
  async read(key: string): Promise<StoredEntry[] | null> {
    const stored = await this.io(() => this.store.get(key));
    return stored ? decodeObject(key, stored) : null;
  }

  /** Stores a retired notice's record; storing it again (a retry after a crash) writes the same bytes. */
  async putRecord(record: NoticeRecord): Promise<void> {
    const { body, sha256: checksum } = encodeRecord(record);
    await this.io(() => this.store.put(recordKey(this.heraldPrefix, record.id), body, checksum));
  }

  /** A retired notice's verified record, or null when the notice was never retired (or is past retention). */
  async readRecord(noticeId: string): Promise<NoticeRecord | null> {
    const key = recordKey(this.heraldPrefix, noticeId);
    const stored = await this.io(() => this.store.get(key));
    return stored ? decodeRecord(verified(key, stored)) : null;
  }

  /** The objects of one shard's partition (the hour holding `timeMs`), in entry order. */
  async objectsIn(shard: number, timeMs: number): Promise<ObjectRef[]> {
    const refs: ObjectRef[] = [];
    for await (const ref of this.objects(partitionDir(this.heraldPrefix, shard, timeMs))) refs.push(ref);
    return refs.sort((a, b) => compareIds(a.firstId, b.firstId));
  }

  /** Finds entries of one shard by ID: one listing per hour they fall in, then the objects holding them. */
  async findEntries(shard: number, ids: readonly string[]): Promise<Map<string, StoredEntry>> {
    const found = new Map<string, StoredEntry>();
    const byPartition = new Map<number, string[]>();
    for (const id of ids) {
      const start = partitionStart(idTime(id));
      byPartition.set(start, [...(byPartition.get(start) ?? []), id]);
    }
    const wanted = new Set(ids);
    for (const [start, partitionIds] of byPartition) {
      const objects = await this.objectsIn(shard, start);
      const needed = new Set<string>();
      for (const id of partitionIds) {
        const holder = objectHolding(objects, id);
        if (holder) needed.add(holder.key);
      }
      for (const key of needed) {
        for (const entry of (await this.read(key)) ?? []) if (wanted.has(entry.id)) found.set(entry.id, entry);
      }
    }
    return found;
  }

  /**
   * The archived entries of one shard whose IDs' times are in [fromMs, toMs), in order: one
   * listing from the first hour on (keys sort by hour), then each object in turn.
   */
  async *entries(shard: number, fromMs: number, toMs: number, onObject?: (ref: ObjectRef) => void): AsyncGenerator<StoredEntry> {
    const readHour = async function* (this: Archive, refs: ObjectRef[]): AsyncGenerator<StoredEntry> {
      // Within an hour keys sort as text, where `5-10` comes before `5-9`: order them as IDs.
      for (const ref of refs.sort((a, b) => compareIds(a.firstId, b.firstId))) {
        if (idTime(ref.lastId) < fromMs || idTime(ref.firstId) >= toMs) continue;
        const entries = (await this.read(ref.key)) ?? [];
        onObject?.(ref);
        for (const entry of entries) {
          const time = idTime(entry.id);
          if (time >= fromMs && time < toMs) yield entry;
        }
      }
    }.bind(this);
    let hour: ObjectRef[] = [];
    let hourStart = Number.NaN;
    const first = partitionDir(this.heraldPrefix, shard, Math.max(0, fromMs));
    for await (const ref of this.objects(shardDir(this.heraldPrefix, shard), first.slice(0, -1))) {
      const start = partitionStart(idTime(ref.firstId));
      if (start >= toMs) break;
      if (start !== hourStart) {
        yield* readHour(hour);
        hour = [];
        hourStart = start;
      }
      hour.push(ref);
    }
    yield* readHour(hour);
  }

  /**
   * Deletes every object whose entries are all older than `cutoffMs` (by entry ID time), in
   * every shard: walks each shard from its oldest hour and stops at the hour of the cutoff.
   * Retired notices' records go when their notice was created before the cutoff (record keys
   * sort by creation time, so each shard's walk stops at the first younger one). The file
   * store removes the directories left empty.
   */
  async deleteOlderThan(
    cutoffMs: number,
    opts: { dryRun?: boolean; onDelete?: (keys: string[]) => void } = {},
  ): Promise<{ objects: number }> {
    let objects = 0;
    const drop = async (keys: string[]) => {
      if (keys.length === 0) return;
      if (!opts.dryRun) await this.io(() => this.store.delete(keys));
      objects += keys.length;
      opts.onDelete?.(keys);
    };
    for (let shard = 0; shard < SHARD_COUNT; shard += 1) {
      let batch: string[] = [];
      for await (const ref of this.objects(shardDir(this.heraldPrefix, shard))) {
        if (partitionStart(idTime(ref.firstId)) >= cutoffMs) break;
        if (idTime(ref.lastId) >= cutoffMs) continue;
        batch.push(ref.key);
        if (batch.length === DELETE_BATCH) {
          await drop(batch);
          batch = [];
        }
      }
      await drop(batch);
      batch = [];
      const keys = this.store.list(recordsDir(this.heraldPrefix, shard))[Symbol.asyncIterator]();
      for (;;) {
        const next = await this.io(() => keys.next());
        if (next.done) break;
        const id = parseRecordKey(next.value);
        if (id === undefined) continue;
        if ((noticeCreatedAt(id) ?? Infinity) >= cutoffMs) break;
        batch.push(next.value);
        if (batch.length === DELETE_BATCH) {
          await drop(batch);
          batch = [];
        }
      }
      await drop(batch);
    }
    return { objects };
  }

  async close(): Promise<void> {
    await this.store.close();
  }

  /** The batch objects under a key prefix, in key order; listing failures mean the archive is out of reach. */
  private async *objects(prefix: string, startAfter?: string): AsyncGenerator<ObjectRef> {
    const keys = this.store.list(prefix, startAfter)[Symbol.asyncIterator]();
    for (;;) {
      const next = await this.io(() => keys.next());
      if (next.done) return;
      const ref = parseObjectKey(next.value);
      if (ref) yield ref;
    }
  }

  /** Runs one store call; anything it throws means the archive is out of reach. */
  private async io<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new ArchiveUnavailableError(this.store.location, error);
    }
  }
}

/** The object whose ID range holds `id` (objects sorted by first ID, ranges disjoint). */
function objectHolding(objects: readonly ObjectRef[], id: string): ObjectRef | undefined {
  let low = 0;
  let high = objects.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const ref = objects[mid]!;
    if (compareIds(id, ref.firstId) < 0) high = mid - 1;
    else if (compareIds(id, ref.lastId) > 0) low = mid + 1;
    else return ref;
  }
  return undefined;
}
