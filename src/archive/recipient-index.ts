import { noticeCreatedAt, shardOfNoticeId } from '../notice/ids.js';
import { ArchiveUnavailableError, type Archive } from './archive.js';
import { gzipStable, sha256Hex } from '../digest.js';
import { formatSeal, parseSeal, SEAL_VERSION } from './seal.js';

/**
 * The archive's index of retired notices by recipient, so that the notices list finds a notice
 * Redis let go of by its recipient ID or its address (src/notice/search.ts). Small objects
 * written when a notice retires (src/retention/retire.ts):
 *
 * - `<herald prefix>/recipients/<YYYY-MM of creation>/<sha256 of recipient ID>/<noticeId>.json.gz`,
 *   gzip JSON `{ id, recipientId }`;
 * - `<herald prefix>/addresses/<YYYY-MM of creation>/<hmac of the address>/<noticeId>.json.gz`,
 *   gzip JSON `{ id }`, one for its email address and one for its phone: the HMAC of the address
 *   lookup (src/notice/address-lookup.ts), so that neither the name nor the body holds the
 *   address or a hash a dictionary reverses;
 *
 * each with its SHA-256 and a record seal like every object. The key is the index: a lookup
 * lists one prefix per month. A recipient lookup reads the notices' own sealed records, whose
 * recipient must match; an address pointer's name is what its seal authenticates. Pointers go
 * with their records, when the notice's creation is older than HERALD_AUDIT_RETENTION
 * (`herald retention apply`).
 */
const INDEX_DIR = 'recipients';
const ADDRESS_DIR = 'addresses';
const INDEX_DIRS = [INDEX_DIR, ADDRESS_DIR] as const;
const POINTER_NAME = /^(ntc_[0-9a-z]+)\.json\.gz$/;

const month = (ms: number) => new Date(ms).toISOString().slice(0, 7);
const recipientHash = (recipientId: string) => sha256Hex(recipientId);

/** The pointer key of one retired notice. */
export function pointerKey(heraldPrefix: string, recipientId: string, noticeId: string): string {
  const createdAt = noticeCreatedAt(noticeId);
  if (createdAt === undefined || shardOfNoticeId(noticeId) === undefined) throw new Error(`not a notice ID: ${noticeId}`);
  return `${heraldPrefix}/${INDEX_DIR}/${month(createdAt)}/${recipientHash(recipientId)}/${noticeId}.json.gz`;
}

/** The pointer key of one retired notice under the HMAC of one of its addresses. */
export function addressPointerKey(heraldPrefix: string, addressHash: string, noticeId: string): string {
  const createdAt = noticeCreatedAt(noticeId);
  if (createdAt === undefined || shardOfNoticeId(noticeId) === undefined) throw new Error(`not a notice ID: ${noticeId}`);
  if (!/^[0-9a-f]{16,64}$/.test(addressHash)) throw new Error('not an address hash');
  return `${heraldPrefix}/${ADDRESS_DIR}/${month(createdAt)}/${addressHash}/${noticeId}.json.gz`;
}

/** Writes the pointer of a retiring notice; writing it again gives the same bytes. */
export async function putRecipientPointer(archive: Archive, recipientId: string, noticeId: string): Promise<void> {
  await putPointer(archive, pointerKey(archive.heraldPrefix, recipientId, noticeId), { id: noticeId, recipientId });
}

/** Writes the pointers of a retiring notice under the HMACs of its addresses; again, the same bytes. */
export async function putAddressPointers(archive: Archive, addressHashes: readonly string[], noticeId: string): Promise<void> {
  for (const hash of addressHashes) await putPointer(archive, addressPointerKey(archive.heraldPrefix, hash, noticeId), { id: noticeId });
}

async function putPointer(archive: Archive, key: string, pointer: Record<string, string>): Promise<void> {
  const body = gzipStable(JSON.stringify(pointer));
  const seal = formatSeal(archive.keys.sealRecord(key, sha256Hex(body)));
  await io(archive, () => archive.storage.put(key, body, sha256Hex(body), seal));
}

/**
 * The IDs of the retired notices of one recipient created in [fromMs, toMs), by the pointers'
 * names: one listing per month of the period.
 */
export async function retiredNoticeIds(archive: Archive, recipientId: string, fromMs: number, toMs: number): Promise<string[]> {
  return listPointers(archive, INDEX_DIR, recipientHash(recipientId), fromMs, toMs);
}

/**
 * The IDs of the retired notices indexed under one address HMAC, created in [fromMs, toMs).
 * Each pointer's seal is checked: a name is the whole of what it says, so one that Herald did
 * not write (or that was copied under another hash) puts nothing on the list.
 */
export async function retiredNoticeIdsByAddress(archive: Archive, addressHash: string, fromMs: number, toMs: number): Promise<string[]> {
  const named = await listPointers(archive, ADDRESS_DIR, addressHash, fromMs, toMs);
  const sealed = await Promise.all(
    named.map(async (id) => {
      const key = addressPointerKey(archive.heraldPrefix, addressHash, id);
      const object = await io(archive, () => archive.storage.get(key));
      const seal = parseSeal(object?.seal);
      const holds =
        object !== null &&
        seal?.version === SEAL_VERSION &&
        archive.keys.checkStored('record', key, sha256Hex(object.body), seal) === undefined;
      return holds ? id : undefined;
    }),
  );
  return sealed.filter((id): id is string => id !== undefined);
}

async function listPointers(
  archive: Archive,
  dir: (typeof INDEX_DIRS)[number],
  hash: string,
  fromMs: number,
  toMs: number,
): Promise<string[]> {
  const ids: string[] = [];
  for (const m of monthsBetween(fromMs, toMs)) {
    const prefix = `${archive.heraldPrefix}/${dir}/${m}/${hash}/`;
    const keys = archive.storage.list(prefix)[Symbol.asyncIterator]();
    for (;;) {
      const next = await io(archive, () => keys.next());
      if (next.done) break;
      const id = POINTER_NAME.exec(next.value.slice(prefix.length))?.[1];
      const createdAt = id === undefined ? undefined : noticeCreatedAt(id);
      if (id !== undefined && createdAt !== undefined && createdAt >= fromMs && createdAt < toMs) ids.push(id);
    }
  }
  return ids;
}

/** Deletes the pointers of notices created before `cutoffMs`; months sort by name, so the walk stops at the cutoff's month. */
export async function deletePointersOlderThan(
  archive: Archive,
  cutoffMs: number,
  opts: { dryRun?: boolean; onDelete?: (keys: string[]) => void } = {},
): Promise<number> {
  const last = month(cutoffMs);
  let batch: string[] = [];
  let deleted = 0;
  const drop = async () => {
    if (batch.length === 0) return;
    const dropping = batch;
    batch = [];
    if (!opts.dryRun) await io(archive, () => archive.storage.delete(dropping));
    deleted += dropping.length;
    opts.onDelete?.(dropping);
  };
  for (const dir of INDEX_DIRS) {
    const root = `${archive.heraldPrefix}/${dir}/`;
    const keys = archive.storage.list(root)[Symbol.asyncIterator]();
    for (;;) {
      const next = await io(archive, () => keys.next());
      if (next.done) break;
      if (next.value.slice(root.length, root.length + 7) > last) break;
      const id = POINTER_NAME.exec(next.value.slice(next.value.lastIndexOf('/') + 1))?.[1];
      if (id === undefined || (noticeCreatedAt(id) ?? Infinity) >= cutoffMs) continue;
      batch.push(next.value);
      if (batch.length === 1000) await drop();
    }
  }
  await drop();
  return deleted;
}

/** `YYYY-MM` of every month that [fromMs, toMs) touches, newest first. */
function monthsBetween(fromMs: number, toMs: number): string[] {
  const months: string[] = [];
  if (toMs <= fromMs) return months;
  const end = new Date(toMs - 1);
  let y = end.getUTCFullYear();
  let m = end.getUTCMonth();
  const first = month(fromMs);
  for (;;) {
    const label = `${String(y).padStart(4, '0')}-${String(m + 1).padStart(2, '0')}`;
    if (label < first) break;
    months.push(label);
    m -= 1;
    if (m < 0) {
      m = 11;
      y -= 1;
    }
  }
  return months;
}

async function io<T>(archive: Archive, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw new ArchiveUnavailableError(archive.storage.location, error);
  }
}
