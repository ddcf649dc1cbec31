import { createHmac } from 'node:crypto';
import type { EncryptionKey } from '../crypto.js';

/**
 * Finding a notice by its recipient's address, for support (`email=` / `phone=` on the notices
 * list). Herald never keeps an address in a form a dictionary reverses: what it indexes is an
 * HMAC-SHA256 of the channel and the normalized address under a key of its own, in Redis while
 * the notice is live (src/store/address-index.ts) and in the archive's recipient index once it
 * retired (src/archive/recipient-index.ts). A plain SHA-256 of an email address, or of a phone
 * number (there are few of them), is reversed by trying them all; an HMAC is not without its key.
 *
 * The keys are HERALD_ADDRESS_KEY's, or else derived from each HERALD_ARCHIVE_KEY by HKDF (a
 * key of its own for this one use). The first indexes new notices; a lookup tries every key, so
 * that rotating the key (putting a new one first) leaves older notices findable.
 */
export type AddressChannel = 'email' | 'phone';

/** Hex characters kept of each HMAC: 128 bits, beyond any collision among the addresses of one deployment. */
const HMAC_HEX = 32;

export class AddressLookup {
  private readonly secrets: readonly Buffer[];

  constructor(keys: readonly EncryptionKey[]) {
    if (keys.length === 0) throw new Error('address lookup needs at least one key');
    this.secrets = keys.map((k) => Buffer.from(k.key, 'base64'));
  }

  /** The hash new notices are indexed under (the first key's). */
  hashOf(channel: AddressChannel, normalized: string): string {
    return this.hmac(this.secrets[0]!, channel, normalized);
  }

  /** Every hash the address may be indexed under (one per key, first key's first, no repeats). */
  hashesOf(channel: AddressChannel, normalized: string): string[] {
    return [...new Set(this.secrets.map((secret) => this.hmac(secret, channel, normalized)))];
  }

  private hmac(secret: Buffer, channel: AddressChannel, normalized: string): string {
    return createHmac('sha256', secret).update(`${channel}:${normalized}`).digest('hex').slice(0, HMAC_HEX);
  }
}

/** The addresses of a notice, as stored (normalized). */
export interface NoticeAddresses {
  email?: string | undefined;
  phone?: string | undefined;
}

/** A notice's members of the live index (src/store/address-index.ts), `<hmac>:<id>`, under the key that indexes new notices. */
export function addressMembers(lookup: AddressLookup, id: string, addresses: NoticeAddresses): string[] {
  return channels(addresses).map(([channel, address]) => `${lookup.hashOf(channel, address)}:${id}`);
}

/** Every member the notice may have under any of the keys: what its retirement removes. */
export function allAddressMembers(lookup: AddressLookup, id: string, addresses: NoticeAddresses): string[] {
  return channels(addresses).flatMap(([channel, address]) => lookup.hashesOf(channel, address).map((hash) => `${hash}:${id}`));
}

function channels(addresses: NoticeAddresses): [AddressChannel, string][] {
  const found: [AddressChannel, string][] = [];
  if (addresses.email) found.push(['email', addresses.email]);
  if (addresses.phone) found.push(['phone', addresses.phone]);
  return found;
}
