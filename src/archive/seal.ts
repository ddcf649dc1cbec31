import { createHmac, timingSafeEqual } from 'node:crypto';
import { KEY_ID, type EncryptionKey } from '../crypto.js';

/**
 * How archive objects and notice records are authenticated (HERALD_ARCHIVE_KEY).
 *
 * Each stored object carries a seal beside its SHA-256 (S3 metadata `x-amz-meta-seal`, the
 * second line of the `.sha256` file on disk): `v1 <keyId> <prev> <mac>`. The MAC is
 * HMAC-SHA256 over the object's key (its name: shard, hour and entry range), the SHA-256 of its
 * *uncompressed* content and `prev`. `prev` is `-` (a record, or the first object of a shard's
 * chain) or `<firstId>_<lastId>@<digest>`: the previous batch object of the same shard and the
 * SHA-256 of its uncompressed content. Whoever can write the archive but does not hold the key
 * can neither alter an object, nor move it to another name, nor drop one from the middle of a
 * chain without the next object's link naming what is missing.
 *
 * Digests are of the uncompressed content so that another zlib build (which compresses the same
 * entries to other bytes) gives the same digest, and a re-upload the same seal.
 */

export const SEAL_VERSION = 'v1';
const OBJECT_DOMAIN = 'herald-archive-object v1';
const RECORD_DOMAIN = 'herald-archive-record v1';
const HEX64 = /^[0-9a-f]{64}$/;
const RANGE = /^(\d+-\d+)_(\d+-\d+)$/;

/** The batch object before another in its shard's chain: its entry range and content digest. */
export interface ChainLink {
  /** `<firstId>_<lastId>`, as in the object's name. */
  range: string;
  /** SHA-256 (hex) of its uncompressed content. */
  digest: string;
}

export interface Seal {
  keyId: string;
  /** null for a record or the first object of a chain. */
  prev: ChainLink | null;
  mac: string;
}

/** Parses a stored seal; undefined when it is not one (a damaged or forged seal is treated as none). */
export function parseSeal(text: string | undefined): Seal | undefined {
  const parts = text?.trim().split(' ');
  if (!parts || parts.length !== 4 || parts[0] !== SEAL_VERSION) return undefined;
  const [, keyId, prev, mac] = parts as [string, string, string, string];
  if (!KEY_ID.test(keyId) || !HEX64.test(mac)) return undefined;
  if (prev === '-') return { keyId, prev: null, mac };
  const at = prev.indexOf('@');
  const link = { range: prev.slice(0, at), digest: prev.slice(at + 1) };
  if (at < 0 || !RANGE.test(link.range) || !HEX64.test(link.digest)) return undefined;
  return { keyId, prev: link, mac };
}

export function formatSeal(seal: Seal): string {
  const prev = seal.prev ? `${seal.prev.range}@${seal.prev.digest}` : '-';
  return `${SEAL_VERSION} ${seal.keyId} ${prev} ${seal.mac}`;
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

  /** The seal of a batch object. */
  sealObject(key: string, digest: string, prev: ChainLink | null): Seal {
    return this.seal(objectMessage(key, digest, prev), prev);
  }

  /** The seal of a notice record. */
  sealRecord(key: string, digest: string): Seal {
    return this.seal(recordMessage(key, digest), null);
  }

  /** Why a batch object's seal does not hold, or undefined when it does. */
  checkObject(key: string, digest: string, seal: Seal): string | undefined {
    return this.check(objectMessage(key, digest, seal.prev), seal);
  }

  /** Why a record's seal does not hold, or undefined when it does. */
  checkRecord(key: string, digest: string, seal: Seal): string | undefined {
    if (seal.prev !== null) return 'its seal names a predecessor, which a record never has';
    return this.check(recordMessage(key, digest), seal);
  }

  private seal(message: string, prev: ChainLink | null): Seal {
    return { keyId: this.signingKeyId, prev, mac: mac(this.keys.get(this.signingKeyId)!, message) };
  }

  private check(message: string, seal: Seal): string | undefined {
    const key = this.keys.get(seal.keyId);
    if (!key) return `it is signed with key "${seal.keyId}", which HERALD_ARCHIVE_KEY does not hold`;
    const expected = Buffer.from(mac(key, message), 'hex');
    const given = Buffer.from(seal.mac, 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'its MAC does not match its name and content';
    return undefined;
  }
}

const mac = (key: Buffer, message: string) => createHmac('sha256', key).update(message, 'utf8').digest('hex');

function objectMessage(key: string, digest: string, prev: ChainLink | null): string {
  return [OBJECT_DOMAIN, key, digest, prev ? `${prev.range}@${prev.digest}` : '-'].join('\n');
}

function recordMessage(key: string, digest: string): string {
  return [RECORD_DOMAIN, key, digest].join('\n');
}
