import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { StoredEntry } from '../store/notices.js';
import { noticeCreatedAt, SHARD_COUNT, shardOfNoticeId } from '../notice/ids.js';
import {
  compareIds,
  idTime,
  objectKey,
  parseObjectKey,
  partitionDir,
  partitionStart,
  rangeOf,
  shardDir,
  shardOfObjectKey,
  STREAM_ID,
  type ObjectRef,
} from './names.js';
import { checkRecord, encodeRecord, parseRecordKey, recordKey, recordsDir, type NoticeRecord } from './records.js';
import { gzipStable, sha256Hex } from '../digest.js';
import {
  ArchiveKeyring,
  formatSeal,
  LEGACY_SEAL_VERSION,
  parseSeal,
  SEAL_VERSION,
  type ChainLink,
  type SealedKind,
  type Seal,
} from './seal.js';
import { DELETE_BATCH, type ObjectStorage, type StoredObject } from './object-storage.js';
import {
  anchorKey,
  decodeAnchor,
  encodeAnchor,
  MAX_ANCHOR_BYTES,
  objectAdmission,
  recordAdmission,
  sameStart,
  type AnchoredStart,
  type ChainStart,
} from './anchor.js';
import { DEV_ARCHIVE_KEY } from '../config.js';

/**
 * An object or record fails a check: its bytes do not match the SHA-256 stored with it, its seal
 * does not hold, it is too large once decompressed, or what it holds is not what its name says.
 */
export class ArchiveIntegrityError extends Error {
  constructor(
    readonly key: string,
    readonly problem: string,
  ) {
    super(`${key}: ${problem}`);
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

/** The archive's object storage could not be read or written (network, permissions, disk). */
export class ArchiveUnavailableError extends Error {
  constructor(
    readonly location: string,
    cause: unknown,
  ) {
    super(`the archive at ${location} cannot be reached: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ArchiveUnavailableError';
  }
}

export interface ArchiveOptions {
  /** HERALD_ARCHIVE_KEY as a keyring; the published dev key when not given (tests, benchmarks). */
  keys?: ArchiveKeyring;
  /**
   * Where each shard's chain began as Redis knows it (null: not yet), for a shard whose anchor is
   * not in the archive (yet). Without either, unsigned and v1-sealed objects and records are refused.
   */
  chainStart?: (shard: number) => Promise<ChainStart | null>;
  /** Most bytes a sealed object may decompress to; one read unauthenticated (legacy) gets at most MAX_LEGACY_OBJECT_BYTES. */
  maxObjectBytes?: number;
  /** Most bytes a sealed notice record may decompress to; a legacy one at most MAX_LEGACY_RECORD_BYTES. */
  maxRecordBytes?: number;
}

/** A batch object once checked: its entries, the digest of its content, its seal (none: legacy). */
export interface OpenedObject {
  ref: ObjectRef;
  entries: StoredEntry[];
  digest: string;
  seal: Seal | undefined;
}

/**
 * The largest batch is 5000 entries (HERALD_MIRROR_BATCH_SIZE); an entry is at most a few KiB
 * (a poll plan of 1000 checks is ~27 KiB), so a real object stays far below this. A sealed
 * object is authenticated before it is decompressed: only what Herald wrote reaches this cap.
 */
export const MAX_OBJECT_BYTES = 128 * 1024 * 1024;
/**
 * An unsigned or v1-sealed object (earlier versions) can only be checked once decompressed, and
 * is read only where its shard's chain start admits it; its cap is smaller: a batch of the
 * default 1000 entries stays below it even with 1000-check poll plans throughout.
 */
export const MAX_LEGACY_OBJECT_BYTES = 32 * 1024 * 1024;
/** A record holds a view and its entry IDs: a few KiB, a few hundred KiB for the longest trail. */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;
/** The cap of a record read unauthenticated (unsigned or v1): tens of thousands of entry IDs. */
export const MAX_LEGACY_RECORD_BYTES = 4 * 1024 * 1024;

const gunzipAsync = promisify(gunzip);

/** Entry types are dotted lower-case names (`notice.accepted`, `sms.observed`). */
const ENTRY_TYPE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

const ndjsonOf = (entries: readonly StoredEntry[]) => entries.map((entry) => `${JSON.stringify(entry)}\n`).join('');

/**
 * A batch as an archive object: gzip NDJSON, one entry per line exactly as the events API
 * shows it (`id` first). The same entries always give the same bytes: entries are immutable,
 * their field order is the stream's, gzip writes no time, and the OS byte is fixed. `digest` is
 * of the uncompressed content, which no zlib build changes (src/archive/seal.ts).
 */
export function encodeObject(entries: readonly StoredEntry[]): { body: Buffer; sha256: string; digest: string } {
  const ndjson = ndjsonOf(entries);
  const body = gzipStable(ndjson);
  return { body, sha256: sha256Hex(body), digest: sha256Hex(ndjson) };
}

/** The content digest a batch's object has, computed from its entries (a chain link to it). */
export function batchDigest(entries: readonly StoredEntry[]): string {
  return sha256Hex(ndjsonOf(entries));
}

/** An object's bytes, once checked against the SHA-256 stored with it. */
function verified(key: string, stored: StoredObject): Buffer {
  if (!stored.sha256) throw new ArchiveIntegrityError(key, 'no SHA-256 is stored with it');
  const actual = sha256Hex(stored.body);
  if (actual !== stored.sha256) throw new ArchiveIntegrityError(key, `SHA-256 is ${actual}, ${stored.sha256} was stored`);
  return stored.body;
}

/**
 * Decompresses at most `max` bytes, on zlib's thread pool rather than the event loop: anything
 * larger stops there instead of filling memory.
 */
async function inflate(key: string, body: Buffer, max: number): Promise<Buffer> {
  try {
    return await gunzipAsync(body, { maxOutputLength: max });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE')
      throw new ArchiveIntegrityError(key, `it decompresses to more than ${max} bytes; refused`);
    throw new ArchiveIntegrityError(key, `it is not valid gzip (${(error as Error).message})`);
  }
}

/** Why the entries of an object are not what its name says, or undefined when they are. */
function entriesProblem(entries: readonly StoredEntry[], ref: ObjectRef, shard: number | undefined): string | undefined {
  if (entries.length === 0) return 'it holds no entries';
  let previous: string | undefined;
  for (const [i, entry] of entries.entries()) {
    const line = `line ${i + 1}`;
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return `${line} is not an entry`;
    const { id, type, noticeId, seq, at } = entry;
    if (typeof id !== 'string' || !STREAM_ID.test(id)) return `${line} has no stream ID`;
    if (compareIds(id, ref.firstId) < 0 || compareIds(id, ref.lastId) > 0)
      return `entry ${id} lies outside the range ${rangeOf(ref)} its name gives`;
    if (previous !== undefined && compareIds(id, previous) <= 0) return `entry ${id} comes after ${previous}`;
    if (typeof type !== 'string' || !ENTRY_TYPE.test(type)) return `entry ${id} has no entry type`;
    if (typeof noticeId !== 'string' || shardOfNoticeId(noticeId) === undefined) return `entry ${id} names no notice`;
    if (shard !== undefined && shardOfNoticeId(noticeId) !== shard) return `entry ${id} is of ${noticeId}, not of shard ${shard}`;
    if (!Number.isSafeInteger(seq) || (seq as number) < 1) return `entry ${id} has no seq`;
    if (typeof at !== 'string') return `entry ${id} has no time`;
    previous = id;
  }
  if (entries[0]!.id !== ref.firstId || previous !== ref.lastId)
    return `its entries run from ${entries[0]!.id} to ${previous}, not over the range ${rangeOf(ref)} its name gives`;
  return undefined;
}

const sameLink = (a: ChainLink | null, b: ChainLink | null) => a?.range === b?.range && a?.digest === b?.digest;

/**
 * Decides, before anything is decompressed, whether an unsigned or v1-sealed object or record
 * may be read where it lies: the problem that refuses it, or undefined.
 */
export type Admission = (seal: Seal | undefined) => Promise<string | undefined> | string | undefined;

/** Reads whatever it is given (the mirror reading back its own objects). */
const ADMIT_ALL: Admission = () => undefined;

/**
 * What a read takes unsigned and v1-sealed objects and records by: a shard's chain start, or
 * `'lenient'`, anything (`herald audit --verify --allow-unanchored` on a shard without a start).
 */
export type LegacyRule = ChainStart | 'lenient';

/** A shard's anchor and the key that sealed it: always sealed with v2, never read unauthenticated. */
async function openAnchor(
  key: string,
  stored: StoredObject,
  keys: ArchiveKeyring,
  shard: number,
): Promise<{ start: AnchoredStart; keyId: string }> {
  const admit = () => 'it has no v2 seal, which every anchor has';
  const { content, seal } = await authenticated('anchor', key, stored, keys, admit, { sealed: MAX_ANCHOR_BYTES, legacy: 0 });
  const start = decodeAnchor(content, shard);
  if (typeof start === 'string') throw new ArchiveIntegrityError(key, start);
  return { start, keyId: seal!.keyId };
}

/** Most bytes a read decompresses: of what a seal authenticated, and of what it could not. */
interface Caps {
  sealed: number;
  legacy: number;
}

/**
 * The decompressed content of a stored object or record and its seal (none: legacy), checked in
 * this order: its bytes against the SHA-256 stored with it; a v2 seal against those bytes, or,
 * for an unsigned or v1-sealed one, `admit`; only then the gzip, capped; a v1 seal against the
 * content. So nothing that fails its seal, or may not be unsigned where it lies, reaches zlib.
 */
async function authenticated(
  kind: SealedKind,
  key: string,
  stored: StoredObject,
  keys: ArchiveKeyring,
  admit: Admission,
  caps: Caps,
): Promise<{ content: Buffer; digest: string; seal: Seal | undefined }> {
  const body = verified(key, stored);
  let seal: Seal | undefined;
  if (stored.seal !== undefined) {
    seal = parseSeal(stored.seal);
    if (!seal) throw new ArchiveIntegrityError(key, 'its seal cannot be read');
  }
  const problem = seal?.version === SEAL_VERSION ? keys.checkStored(kind, key, stored.sha256!, seal) : await admit(seal);
  if (problem) throw new ArchiveIntegrityError(key, problem);
  const content = await inflate(key, body, seal?.version === SEAL_VERSION ? caps.sealed : caps.legacy);
  const digest = sha256Hex(content);
  if (seal?.version === LEGACY_SEAL_VERSION) {
    const legacyProblem = keys.checkContent(kind, key, digest, seal);
    if (legacyProblem) throw new ArchiveIntegrityError(key, legacyProblem);
  }
  return { content, digest, seal };
}

const objectCaps = (max: number): Caps => ({ sealed: max, legacy: Math.min(max, MAX_LEGACY_OBJECT_BYTES) });

/**
 * Checks an object against its stored SHA-256 and its seal (authenticated, as `authenticated`
 * says, before it is decompressed), then decodes its entries and checks them against its name.
 */
export async function openObject(
  key: string,
  stored: StoredObject,
  keys: ArchiveKeyring,
  admit: Admission = ADMIT_ALL,
  maxBytes = MAX_OBJECT_BYTES,
): Promise<OpenedObject> {
  const ref = parseObjectKey(key);
  if (!ref) throw new ArchiveIntegrityError(key, 'it is not named as a batch object');
  const { content: ndjson, digest, seal } = await authenticated('object', key, stored, keys, admit, objectCaps(maxBytes));
  let entries: StoredEntry[];
  try {
    entries = ndjson
      .toString('utf8')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as StoredEntry);
  } catch {
    throw new ArchiveIntegrityError(key, 'a line is not JSON');
  }
  const problem = entriesProblem(entries, ref, shardOfObjectKey(key));
  if (problem) throw new ArchiveIntegrityError(key, problem);
  return { ref, entries, digest, seal };
}

let devKeyring: ArchiveKeyring | undefined;
const defaultKeyring = () => (devKeyring ??= new ArchiveKeyring([DEV_ARCHIVE_KEY]));

export type PutOutcome = 'written' | 'existed';

/**
 * Herald's decision-log archive: immutable batch objects of each shard's log under
 * `<herald prefix>/s<NN>/<day>/<hour>/`, and retired notices' records, on any ObjectStorage. Every
 * object and record is sealed with HERALD_ARCHIVE_KEY and checked on every read (seal.ts).
 */
export class Archive {
  readonly keys: ArchiveKeyring;
  private readonly maxObjectBytes: number;
  private readonly maxRecordBytes: number;
  /** The shards' anchors once read: written once, never changed. */
  private readonly anchors = new Map<number, AnchoredStart>();

  constructor(
    readonly storage: ObjectStorage,
    readonly heraldPrefix: string,
    private readonly options: ArchiveOptions = {},
  ) {
    this.keys = options.keys ?? defaultKeyring();
    this.maxObjectBytes = options.maxObjectBytes ?? MAX_OBJECT_BYTES;
    this.maxRecordBytes = options.maxRecordBytes ?? MAX_RECORD_BYTES;
  }

  /**
   * Stores one batch, sealed with its link to the shard's previous batch (`prev`; null for the
   * first). A batch uploaded before (a crash between upload and acknowledgement) finds its object
   * already there with the same entries and a seal naming the same predecessor, and that counts
   * as stored; a damaged or unsigned object under the name is rewritten; a valid one with other
   * entries is refused. `firstAttempt` (a batch of entries never handed out before, so no object
   * can have its name) skips the check.
   */
  async putBatch(
    shard: number,
    entries: readonly StoredEntry[],
    opts: { firstAttempt?: boolean; prev?: ChainLink | null } = {},
  ): Promise<{ key: string; outcome: PutOutcome; bytes: number; digest: string }> {
    const key = objectKey(this.heraldPrefix, shard, entries[0]!.id, entries.at(-1)!.id);
    const prev = opts.prev ?? null;
    const { body, sha256: checksum, digest } = encodeObject(entries);
    const seal = formatSeal(this.keys.sealObject(key, checksum, prev));
    const existing = opts.firstAttempt ? null : await this.io(() => this.storage.get(key));
    if (existing) {
      if (existing.sha256 === checksum && existing.seal === seal && existing.body.equals(body))
        return { key, outcome: 'existed', bytes: body.length, digest };
      let held: OpenedObject | undefined;
      try {
        held = await openObject(key, existing, this.keys, ADMIT_ALL, this.maxObjectBytes);
      } catch (error) {
        if (!(error instanceof ArchiveIntegrityError)) throw error;
      }
      if (held) {
        // Another zlib build compresses differently, a rotated key signs differently: the entries and the link are what must match.
        if (held.digest !== digest) throw new ArchiveConflictError(key);
        if (held.seal && sameLink(held.seal.prev, prev)) return { key, outcome: 'existed', bytes: existing.body.length, digest };
      }
    }
    await this.io(() => this.storage.put(key, body, checksum, seal));
    return { key, outcome: 'written', bytes: body.length, digest };
  }

  /** The verified entries of one object, or null when it is gone. */
  async read(key: string): Promise<StoredEntry[] | null> {
    return (await this.inspect(key))?.entries ?? null;
  }

  /**
   * One object checked: its SHA-256, its seal, its entries against its name; unsigned (or
   * v1-sealed) only where its shard's chain start admits it: `rule`, or by default the shard's
   * anchor in the archive, else Redis's chain. Null when it is gone.
   */
  async inspect(key: string, rule?: LegacyRule): Promise<OpenedObject | null> {
    const stored = await this.io(() => this.storage.get(key));
    if (!stored) return null;
    // openObject asks only once the key has been parsed as an object's.
    const admit: Admission = async (seal) =>
      rule === 'lenient' ? undefined : objectAdmission(parseObjectKey(key)!, seal, rule ?? (await this.chainStart(shardOfObjectKey(key))));
    return openObject(key, stored, this.keys, admit, this.maxObjectBytes);
  }

  /**
   * The link a successor of this object carries: read back and checked, or null when the object
   * is gone. One an older worker stored unsigned after the chain began is linked to all the
   * same, so that the mirror goes on; `herald audit --verify` names it.
   */
  async linkTo(shard: number, firstId: string, lastId: string): Promise<ChainLink | null> {
    const key = objectKey(this.heraldPrefix, shard, firstId, lastId);
    const stored = await this.io(() => this.storage.get(key));
    if (!stored) return null;
    const opened = await openObject(key, stored, this.keys, ADMIT_ALL, this.maxObjectBytes);
    return { range: rangeOf(opened.ref), digest: opened.digest };
  }

  /** Stores a retired notice's record, sealed; storing it again (a retry after a crash) writes the same bytes. */
  async putRecord(record: NoticeRecord): Promise<void> {
    const key = recordKey(this.heraldPrefix, record.id);
    const { body, sha256: checksum } = encodeRecord(record);
    const seal = formatSeal(this.keys.sealRecord(key, checksum));
    await this.io(() => this.storage.put(key, body, checksum, seal));
  }

  /** A retired notice's verified record, or null when the notice was never retired (or is past retention). */
  async readRecord(noticeId: string): Promise<NoticeRecord | null> {
    return (await this.inspectRecord(recordKey(this.heraldPrefix, noticeId)))?.record ?? null;
  }

  /**
   * One record checked: its SHA-256, its seal (unsigned, or v1-sealed, only for a notice created
   * before its shard's chain start says so, as for objects), and that it is the record of the
   * notice its key names.
   */
  async inspectRecord(key: string, rule?: LegacyRule): Promise<{ record: NoticeRecord; sealed: boolean } | null> {
    const noticeId = parseRecordKey(key);
    if (noticeId === undefined) throw new ArchiveIntegrityError(key, 'it is not named as a notice record');
    const stored = await this.io(() => this.storage.get(key));
    if (!stored) return null;
    const admit: Admission = async (seal) =>
      rule === 'lenient' ? undefined : recordAdmission(noticeId, seal, rule ?? (await this.chainStart(shardOfNoticeId(noticeId))));
    const caps = { sealed: this.maxRecordBytes, legacy: Math.min(this.maxRecordBytes, MAX_LEGACY_RECORD_BYTES) };
    const { content: json, seal } = await authenticated('record', key, stored, this.keys, admit, caps);
    let record: unknown;
    try {
      record = JSON.parse(json.toString('utf8'));
    } catch {
      throw new ArchiveIntegrityError(key, 'it is not JSON');
    }
    const problem = checkRecord(record, noticeId);
    if (problem) throw new ArchiveIntegrityError(key, problem);
    return { record: record as NoticeRecord, sealed: seal !== undefined };
  }

  /** The record keys of one shard, in key order (= by the notices' creation time). */
  async *recordKeys(shard: number): AsyncGenerator<string> {
    const keys = this.storage.list(recordsDir(this.heraldPrefix, shard))[Symbol.asyncIterator]();
    for (;;) {
      const next = await this.io(() => keys.next());
      if (next.done) return;
      if (parseRecordKey(next.value) !== undefined) yield next.value;
    }
  }

  /** The objects of one shard's partition (the hour holding `timeMs`), in entry order. */
  async objectsIn(shard: number, timeMs: number): Promise<ObjectRef[]> {
    const refs: ObjectRef[] = [];
    for await (const ref of this.objects(partitionDir(this.heraldPrefix, shard, timeMs))) refs.push(ref);
    return refs.sort((a, b) => compareIds(a.firstId, b.firstId));
  }

  /**
   * Finds entries of one shard by ID: one listing per hour they fall in, then the objects holding
   * them. With `noticeId`, an entry found under a wanted ID that belongs to another notice is an
   * integrity fault, never served.
   */
  async findEntries(shard: number, ids: readonly string[], opts: { noticeId?: string } = {}): Promise<Map<string, StoredEntry>> {
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
        for (const entry of (await this.read(key)) ?? []) {
          if (!wanted.has(entry.id)) continue;
          if (opts.noticeId !== undefined && entry.noticeId !== opts.noticeId)
            throw new ArchiveIntegrityError(key, `entry ${entry.id} belongs to ${entry.noticeId}, not to ${opts.noticeId}`);
          found.set(entry.id, entry);
        }
      }
    }
    return found;
  }

  /**
   * The objects of one shard in entry order, from the hour holding `fromMs` on: one listing
   * (keys sort by hour), each hour's objects ordered as IDs before they are handed out.
   */
  async *shardObjects(shard: number, fromMs = 0): AsyncGenerator<ObjectRef> {
    // Within an hour keys sort as text, where `5-10` comes before `5-9`: order them as IDs.
    const sorted = (refs: ObjectRef[]) => refs.sort((a, b) => compareIds(a.firstId, b.firstId));
    let hour: ObjectRef[] = [];
    let hourStart = Number.NaN;
    const first = partitionDir(this.heraldPrefix, shard, Math.max(0, fromMs));
    for await (const ref of this.objects(shardDir(this.heraldPrefix, shard), first.slice(0, -1))) {
      const start = partitionStart(idTime(ref.firstId));
      if (start !== hourStart) {
        yield* sorted(hour);
        hour = [];
        hourStart = start;
      }
      hour.push(ref);
    }
    yield* sorted(hour);
  }

  /** The archived entries of one shard whose IDs' times are in [fromMs, toMs), in order, object by object. */
  async *entries(shard: number, fromMs: number, toMs: number, onObject?: (ref: ObjectRef) => void): AsyncGenerator<StoredEntry> {
    for await (const ref of this.shardObjects(shard, fromMs)) {
      if (partitionStart(idTime(ref.firstId)) >= toMs) return;
      if (idTime(ref.lastId) < fromMs || idTime(ref.firstId) >= toMs) continue;
      const entries = (await this.read(ref.key)) ?? [];
      onObject?.(ref);
      for (const entry of entries) {
        const time = idTime(entry.id);
        if (time >= fromMs && time < toMs) yield entry;
      }
    }
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
      if (!opts.dryRun) await this.io(() => this.storage.delete(keys));
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
      const keys = this.storage.list(recordsDir(this.heraldPrefix, shard))[Symbol.asyncIterator]();
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
    await this.storage.close();
  }

  /** The batch objects under a key prefix, in key order; listing failures mean the archive is out of reach. */
  private async *objects(prefix: string, startAfter?: string): AsyncGenerator<ObjectRef> {
    const keys = this.storage.list(prefix, startAfter)[Symbol.asyncIterator]();
    for (;;) {
      const next = await this.io(() => keys.next());
      if (next.done) return;
      const ref = parseObjectKey(next.value);
      if (ref) yield ref;
    }
  }

  /**
   * The shard's anchor (src/archive/anchor.ts) once checked, or null when the archive holds none;
   * an anchor that fails its checks is an ArchiveIntegrityError. Read once per process.
   */
  async readAnchor(shard: number): Promise<AnchoredStart | null> {
    const known = this.anchors.get(shard) ?? (await this.fetchAnchor(shard))?.start;
    if (known) this.anchors.set(shard, known);
    return known ?? null;
  }

  /**
   * Writes the shard's anchor unless the archive holds one. One held is never overwritten with
   * other facts: `differs` (Redis lost its chain state and began a new chain) leaves it as it is.
   * One sealed with a key other than the signing key is sealed again (`resealed`), the same
   * facts, so that the key that sealed it may be dropped after a rotation like any other. Reads
   * the archive every time (a lifecycle rule may have expired the anchor).
   */
  async putAnchor(
    shard: number,
    start: AnchoredStart,
  ): Promise<{ outcome: 'written' | 'resealed' | 'existed' | 'differs'; held: AnchoredStart }> {
    const held = await this.fetchAnchor(shard);
    if (held && !sameStart(held.start, start)) return { outcome: 'differs', held: held.start };
    if (held?.keyId === this.keys.signingKeyId) return { outcome: 'existed', held: held.start };
    const key = anchorKey(this.heraldPrefix, shard);
    const { body, sha256 } = encodeAnchor(shard, start);
    await this.io(() => this.storage.put(key, body, sha256, formatSeal(this.keys.sealAnchor(key, sha256))));
    this.anchors.set(shard, start);
    return { outcome: held ? 'resealed' : 'written', held: start };
  }

  private async fetchAnchor(shard: number): Promise<{ start: AnchoredStart; keyId: string } | null> {
    const key = anchorKey(this.heraldPrefix, shard);
    const stored = await this.io(() => this.storage.get(key));
    return stored ? openAnchor(key, stored, this.keys, shard) : null;
  }

  /** Where the shard's chain began: its anchor in the archive, else Redis's chain, else null (none found). */
  private async chainStart(shard: number | undefined): Promise<ChainStart | null> {
    if (shard === undefined) return null;
    return (await this.readAnchor(shard)) ?? (this.options.chainStart ? await this.options.chainStart(shard) : null);
  }

  /** Runs one store call; anything it throws means the archive is out of reach. */
  private async io<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new ArchiveUnavailableError(this.storage.location, error);
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
