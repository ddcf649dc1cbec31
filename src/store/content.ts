import type { Keyring, Sealed } from '../crypto.js';
import type { NoticeContent } from './notices.js';

/**
 * Message content at rest, one JSON string per notice. Without `HERALD_ENCRYPTION_KEY` it holds
 * the fields (subject, text, html, sms); with it, only `kid`, `iv` and `ct`: the whole
 * content as one AES-256-GCM ciphertext, bound to its notice ID so that a ciphertext copied
 * onto another notice does not open.
 */
export type StoredContent = NoticeContent | Sealed;

const associatedData = (noticeId: string) => `herald:content:v1:${noticeId}`;

/** The content as the store keeps it: sealed when a keyring is given. */
export function sealContent(keyring: Keyring | undefined, noticeId: string, content: NoticeContent): StoredContent {
  if (!keyring) return content;
  const plain: NoticeContent = { subject: content.subject, text: content.text, html: content.html, sms: content.sms };
  return keyring.seal(JSON.stringify(plain), associatedData(noticeId));
}

/** Reads stored content back; throws when it is sealed and no key here opens it. */
export function openContent(
  keyring: Keyring | undefined,
  noticeId: string,
  hash: Record<string, string | undefined>,
): NoticeContent | null {
  if (hash.ct !== undefined) {
    const sealed: Sealed = { kid: hash.kid ?? '', iv: hash.iv ?? '', ct: hash.ct };
    if (!keyring) throw new Error(`content of ${noticeId} is encrypted (key "${sealed.kid}") but HERALD_ENCRYPTION_KEY is not set`);
    return JSON.parse(keyring.open(sealed, associatedData(noticeId))) as NoticeContent;
  }
  return hash.subject !== undefined ? (hash as unknown as NoticeContent) : null;
}
