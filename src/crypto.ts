import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** One key of `HERALD_ENCRYPTION_KEY`: the ID stored with every ciphertext, and 32 bytes in base64. */
export interface EncryptionKey {
  readonly id: string;
  readonly key: string;
}

/** AES-256-GCM output as stored: the ID of the key that sealed it, the nonce, ciphertext + tag. */
export interface Sealed {
  kid: string;
  iv: string;
  ct: string;
}

/** A key's ID in HERALD_ENCRYPTION_KEY and HERALD_ARCHIVE_KEY (`keyId:base64`). */
export const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Parses `keyId:base64[,keyId:base64...]`. The first key seals new data; every key opens, so a
 * key can be rotated by putting the new one first and dropping the old one once nothing it
 * sealed is left (content lives only for the content TTL). Problems never quote key material.
 */
export function parseEncryptionKeys(text: string): { keys: EncryptionKey[]; problems: string[] } {
  const keys: EncryptionKey[] = [];
  const problems: string[] = [];
  text
    .split(',')
    .map((part) => part.trim())
    .forEach((part, index) => {
      const colon = part.indexOf(':');
      const id = colon < 0 ? '' : part.slice(0, colon);
      const secret = colon < 0 ? '' : part.slice(colon + 1);
      const name = `key ${index + 1}${id ? ` ("${id}")` : ''}`;
      if (!KEY_ID.test(id)) {
        problems.push(`${name} must be written keyId:base64, the key ID 1 to 32 letters, digits, "_" or "-"`);
        return;
      }
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(secret) || Buffer.from(secret, 'base64').length !== 32) {
        problems.push(`${name} must be 32 bytes in base64 (e.g. \`openssl rand -base64 32\`)`);
        return;
      }
      if (keys.some((k) => k.id === id)) {
        problems.push(`${name}: the key ID is used twice`);
        return;
      }
      keys.push({ id, key: secret });
    });
  return { keys, problems };
}

/**
 * Keys of their own for one use, derived from `keys` by HKDF-SHA256 with `info` naming the use:
 * the same IDs, and 32 bytes that tell nothing of the keys they came from.
 */
export function deriveKeys(keys: readonly EncryptionKey[], info: string): EncryptionKey[] {
  return keys.map((k) => ({
    id: k.id,
    key: Buffer.from(hkdfSync('sha256', Buffer.from(k.key, 'base64'), Buffer.alloc(0), info, 32)).toString('base64'),
  }));
}

/** Seals and opens small payloads with AES-256-GCM; the associated data binds a ciphertext to its owner. */
export class Keyring {
  private readonly keys: Map<string, Buffer>;
  private readonly current: string;

  constructor(keys: readonly EncryptionKey[]) {
    if (keys.length === 0) throw new Error('a keyring needs at least one key');
    this.keys = new Map(keys.map((k) => [k.id, Buffer.from(k.key, 'base64')]));
    this.current = keys[0]!.id;
  }

  /** The ID of the key that seals new data. */
  get keyId(): string {
    return this.current;
  }

  seal(plaintext: string, associatedData: string): Sealed {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.current)!, iv);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return { kid: this.current, iv: iv.toString('base64'), ct: ct.toString('base64') };
  }

  /** Throws when the key is unknown, or the data was altered or belongs to someone else. */
  open(sealed: Sealed, associatedData: string): string {
    const key = this.keys.get(sealed.kid);
    if (!key) throw new Error(`sealed with key "${sealed.kid}", which HERALD_ENCRYPTION_KEY does not hold`);
    const data = Buffer.from(sealed.ct, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    return Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}

const keyrings = new WeakMap<readonly EncryptionKey[], Keyring>();

/** The keyring of a configuration's keys (built once per key list), or undefined when there are none. */
export function keyringOf(keys: readonly EncryptionKey[]): Keyring | undefined {
  if (keys.length === 0) return undefined;
  let keyring = keyrings.get(keys);
  if (!keyring) keyrings.set(keys, (keyring = new Keyring(keys)));
  return keyring;
}
