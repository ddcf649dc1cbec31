import { createHmac, timingSafeEqual } from 'node:crypto';
import { KEY_ID, type EncryptionKey } from '../crypto.js';

/**
 * How archive objects, notice records and chain anchors are authenticated (HERALD_ARCHIVE_KEY).
 *
 * Each stored object carries a seal beside its SHA-256 (S3 metadata `x-amz-meta-seal`, the
 * second line of the `.sha256` file on disk): `v2 <keyId> <prev> <mac>`. The MAC is
 * HMAC-SHA256 over the object's key (its name: shard, hour and entry range), the SHA-256 of its
 * *stored* bytes (the gzip, exactly as kept) and `prev`. `prev` is `-` (a record, an anchor, or
 * the first object of a shard's chain) or `<firstId>_<lastId>@<digest>`: the previous batch
 * object of the same shard and the SHA-256 of its uncompressed content. Whoever can write the
 * archive but does not hold the key can neither alter an object, nor move it to another name,
 * nor drop one from the middle of a chain without the next object's link naming what is missing.
 *
 * The MAC covers the stored bytes so that it is checked before anything is decompressed: a
 * planted gzip bomb is refused by its seal and never reaches zlib. The link names the
 * predecessor's *content* digest, which no zlib build changes, so that a batch uploaded again by
 * another build (other gzip bytes, so another MAC) still links to the same predecessor.
 *
 * Versions before wrote `v1` seals, whose MAC covers the SHA-256 of the uncompressed content
 * instead: they are still read, decompressed first and checked after, but only where the
 * shard's chain anchor says v1 seals were still written (src/archive/anchor.ts).
 */

export const SEAL_VERSION = 'v2';
/** The seal of earlier versions: a MAC over the uncompressed content. */
export const LEGACY_SEAL_VERSION = 'v1';
const HEX64 = /^[0-9a-f]{64}$/;
const RANGE = /^(\d+-\d+)_(\d+-\d+)$/;

/** What a seal authenticates: a batch object of the log, a retired notice's record (or a recipient pointer), a shard's chain anchor. */
export type SealedKind = 'object' | 'record' | 'anchor';

const DOMAINS: Record<Seal['version'], Partial<Record<SealedKind, string>>> = {
  v1: { object: 'herald-archive-object v1', record: 'herald-archive-record v1' },
  v2: { object: 'herald-archive-object v2', record: 'herald-archive-record v2', anchor: 'herald-archive-anchor v2' },
};

/** The batch object before another in its shard's chain: its entry range and content digest. */
export interface ChainLink {
  /** `<firstId>_<lastId>`, as in the object's name. */
  range: string;
  /** SHA-256 (hex) of its uncompressed content. */
  digest: string;
}

export interface Seal {
  /** `v2`: the MAC covers the stored bytes; `v1` (earlier versions): the uncompressed content. */
  version: 'v1' | 'v2';
  keyId: string;
  /** null for a record, an anchor or the first object of a chain. */
  prev: ChainLink | null;
  mac: string;
}

/** Parses a stored seal; undefined when it is not one (a damaged or forged seal is treated as none). */
export function parseSeal(text: string | undefined): Seal | undefined {
  const parts = text?.trim().split(' ');
  if (!parts || parts.length !== 4 || (parts[0] !== SEAL_VERSION && parts[0] !== LEGACY_SEAL_VERSION)) return undefined;
  const [version, keyId, prev, mac] = parts as [Seal['version'], string, string, string];
  if (!KEY_ID.test(keyId) || !HEX64.test(mac)) return undefined;
  if (prev === '-') return { version, keyId, prev: null, mac };
  const at = prev.indexOf('@');
  const link = { range: prev.slice(0, at), digest: prev.slice(at + 1) };
  if (at < 0 || !RANGE.test(link.range) || !HEX64.test(link.digest)) return undefined;
  return { version, keyId, prev: link, mac };
}

export function formatSeal(seal: Seal): string {
  const prev = seal.prev ? `${seal.prev.range}@${seal.prev.digest}` : '-';
  return `${seal.version} ${seal.keyId} ${prev} ${seal.mac}`;
}

/** The first and last entry IDs of a link's range. */
export function linkIds(link: ChainLink): { firstId: string; lastId: string } {
  const match = RANGE.exec(link.range)!;
  return { firstId: match[1]!, lastId: match[2]! };
}

/** Signs with the first of HERALD_ARCHIVE_KEY's keys and verifies with any of them (rotation). */
export class ArchiveKeyring {
  private readonly keys: Map<string, Buffer>;
  readonly signingKeyId: string;

  constructor(keys: readonly EncryptionKey[]) {
    if (keys.length === 0) throw new Error('the archive keyring needs at least one key');
    this.keys = new Map(keys.map((k) => [k.id, Buffer.from(k.key, 'base64')]));
    this.signingKeyId = keys[0]!.id;
  }

  /** The seal of a batch object, `storedSha256` the SHA-256 of its gzip bytes. */
  sealObject(key: string, storedSha256: string, prev: ChainLink | null): Seal {
    return this.seal('object', key, storedSha256, prev);
  }

  /** The seal of a notice record (or a recipient pointer). */
  sealRecord(key: string, storedSha256: string): Seal {
    return this.seal('record', key, storedSha256, null);
  }

  /** The seal of a shard's chain anchor. */
  sealAnchor(key: string, storedSha256: string): Seal {
    return this.seal('anchor', key, storedSha256, null);
  }

  /**
   * Why a v2 seal does not hold for the stored bytes whose SHA-256 is `storedSha256`, or
   * undefined when it does. Needs nothing decompressed.
   */
  checkStored(kind: SealedKind, key: string, storedSha256: string, seal: Seal): string | undefined {
    if (seal.version !== SEAL_VERSION) throw new Error(`checkStored takes a ${SEAL_VERSION} seal`);
    return this.check(kind, key, storedSha256, seal);
  }

  /** Why a v1 seal (earlier versions) does not hold for the decompressed content whose SHA-256 is `contentDigest`. */
  checkContent(kind: SealedKind, key: string, contentDigest: string, seal: Seal): string | undefined {
    if (seal.version !== LEGACY_SEAL_VERSION) throw new Error(`checkContent takes a ${LEGACY_SEAL_VERSION} seal`);
    return this.check(kind, key, contentDigest, seal);
  }

  private seal(kind: SealedKind, key: string, storedSha256: string, prev: ChainLink | null): Seal {
    const message = sealMessage(DOMAINS[SEAL_VERSION][kind]!, key, storedSha256, prev);
    return { version: SEAL_VERSION, keyId: this.signingKeyId, prev, mac: mac(this.keys.get(this.signingKeyId)!, message) };
  }

  private check(kind: SealedKind, key: string, digest: string, seal: Seal): string | undefined {
    const domain = DOMAINS[seal.version][kind];
    if (domain === undefined) return `its seal is ${seal.version}, which no version of Herald wrote on such an object`;
    if (kind !== 'object' && seal.prev !== null) return 'its seal names a predecessor, which only a batch object has';
    const secret = this.keys.get(seal.keyId);
    if (!secret) return `it is signed with key "${seal.keyId}", which HERALD_ARCHIVE_KEY does not hold`;
    const message =
      seal.version === LEGACY_SEAL_VERSION && kind === 'record'
        ? [domain, key, digest].join('\n')
        : sealMessage(domain, key, digest, seal.prev);
    const expected = Buffer.from(mac(secret, message), 'hex');
    const given = Buffer.from(seal.mac, 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'its MAC does not match its name and content';
    return undefined;
  }
}

const mac = (key: Buffer, message: string) => createHmac('sha256', key).update(message, 'utf8').digest('hex');

/** What a MAC covers (v1 records, of earlier versions, left out `prev`). */
function sealMessage(domain: string, key: string, digest: string, prev: ChainLink | null): string {
  return [domain, key, digest, prev ? `${prev.range}@${prev.digest}` : '-'].join('\n');
}
