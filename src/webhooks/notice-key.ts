import { shardOfNoticeId } from '../notice/ids.js';
import { emailIdempotencyKey } from '../notice/notice.js';

const EMAIL_KEY_SUFFIX = emailIdempotencyKey('');

/**
 * The notice of Herald's email idempotency key (`<noticeId>-email`), as a provider's event carries
 * it back from the message's metadata; undefined for anything else (another sender's message, a
 * key that names no notice ID of Herald's).
 */
export function noticeOfEmailKey(key: unknown): string | undefined {
  if (typeof key !== 'string' || !key.endsWith(EMAIL_KEY_SUFFIX)) return undefined;
  const id = key.slice(0, -EMAIL_KEY_SUFFIX.length);
  return shardOfNoticeId(id) === undefined ? undefined : id;
}
