/**
 * Postmark's webhooks: one JSON event per request, told apart by `RecordType`
 * (Delivery, Bounce, SpamComplaint, Open, Click, SubscriptionChange). Postmark signs nothing:
 * the webhook URL carries basic-auth credentials (`https://user:password@herald.example/webhooks/postmark`),
 * which Postmark sends as an `Authorization: Basic` header, compared here in constant time.
 *
 * Each event is mapped as a status read of the same message would map it (`postmarkObservation`
 * in src/providers/normalize.ts): the event is read as the one `MessageEvents` entry of the
 * message's details, so a delivery, a bounce, an open or an unsubscribe means the same thing
 * whether it was pushed or polled.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { shardOfNoticeId } from '../notice/ids.js';
import { IDEMPOTENCY_METADATA_FIELD } from '../providers/postmark.js';
import { postmarkObservation, type PostmarkBounce, type PostmarkEvent } from '../providers/normalize.js';
import { WebhookPayloadError, type WebhookEvent, type WebhookReceiver, type WebhookRequest } from './types.js';

/** The suffix of Herald's idempotency key of an email (`<noticeId>-email`). */
const EMAIL_KEY_SUFFIX = '-email';

type Json = Record<string, unknown>;

/** Postmark's webhooks, checked by the basic-auth credentials (`user:password`) put in the webhook URL. */
export function postmarkReceiver(auth: string): WebhookReceiver {
  if (!auth.includes(':')) throw new Error('the Postmark webhook credentials must be user:password');
  const expected = digest(Buffer.from(auth, 'utf8'));
  return {
    provider: 'postmark',
    verify(request: WebhookRequest): boolean {
      const presented = basicCredentials(request.headers['authorization']);
      // Digests of equal length, compared in constant time whatever was presented.
      return timingSafeEqual(digest(presented ?? Buffer.alloc(0)), expected) && presented !== undefined;
    },
    events(request: WebhookRequest): WebhookEvent[] {
      const event = postmarkEvent(parseBody(request.rawBody));
      return event ? [event] : [];
    },
  };
}

/**
 * One Postmark webhook body as an event, or undefined for a record Herald has no use for (an
 * inbound message, a resubscription). Throws WebhookPayloadError on a body that is not Postmark's.
 */
export function postmarkEvent(body: Json): WebhookEvent | undefined {
  const recordType = body['RecordType'];
  if (typeof recordType !== 'string' || recordType === '') throw new WebhookPayloadError('RecordType is missing');
  const messageId = body['MessageID'];
  if (typeof messageId !== 'string' || messageId === '') throw new WebhookPayloadError('MessageID is missing');
  const mapped = readEvent(recordType, body);
  if (!mapped) return undefined;
  return {
    channel: 'email',
    providerMessageId: messageId,
    noticeId: noticeIdOf(body['Metadata']),
    eventId: [recordType, messageId, ...mapped.identity].join('\n'),
    observation: postmarkObservation({ Status: 'Sent', MessageEvents: [mapped.event] }, mapped.bounces),
  };
}

interface ReadEvent {
  /** The event as the message's details would list it. */
  event: PostmarkEvent;
  /** The bounce the event names, as `GET /bounces/{id}` would answer. */
  bounces?: Map<string, PostmarkBounce>;
  /** Besides RecordType and MessageID, what tells this event from the message's others. */
  identity: string[];
}

function readEvent(recordType: string, body: Json): ReadEvent | undefined {
  switch (recordType) {
    case 'Delivery': {
      const at = requiredString(body, 'DeliveredAt');
      return { event: { Type: 'Delivered', ReceivedAt: at, Details: {} }, identity: [text(body['Recipient']), at] };
    }
    case 'Bounce':
    case 'SpamComplaint': {
      const id = body['ID'];
      if (typeof id !== 'number' && (typeof id !== 'string' || id === '')) throw new WebhookPayloadError('ID is missing');
      const type = requiredString(body, 'Type');
      const bounce: PostmarkBounce = { Type: type };
      if (typeof body['Inactive'] === 'boolean') bounce.Inactive = body['Inactive'];
      return {
        event: { Type: 'Bounced', ReceivedAt: text(body['BouncedAt']), Details: { BounceID: String(id) } },
        bounces: new Map([[String(id), bounce]]),
        identity: [String(id)],
      };
    }
    case 'Open':
      return {
        event: { Type: 'Opened', ReceivedAt: text(body['ReceivedAt']) },
        identity: [text(body['Recipient']), text(body['ReceivedAt'])],
      };
    case 'Click':
      return {
        event: { Type: 'LinkClicked', ReceivedAt: text(body['ReceivedAt']) },
        identity: [text(body['Recipient']), text(body['ReceivedAt']), text(body['OriginalLink'])],
      };
    case 'SubscriptionChange': {
      // A resubscription says nothing about this message or its address's ability to receive it.
      if (body['SuppressSending'] !== true) return undefined;
      const at = requiredString(body, 'ChangedAt');
      return {
        event: { Type: 'SubscriptionChanged', ReceivedAt: at, Details: { SuppressSending: true } },
        identity: [text(body['Recipient']), at],
      };
    }
    default:
      return undefined;
  }
}

/**
 * The notice of a message, from Herald's key in its Metadata (`<noticeId>-email`). A key too long
 * for Postmark's 80 characters is stored as its digest (`idempotencyMetadataValue`), which names
 * no notice: such an event counts as one for an unknown message. Herald's own keys always fit.
 */
function noticeIdOf(metadata: unknown): string | undefined {
  if (typeof metadata !== 'object' || metadata === null) return undefined;
  const key = (metadata as Json)[IDEMPOTENCY_METADATA_FIELD];
  if (typeof key !== 'string' || !key.endsWith(EMAIL_KEY_SUFFIX)) return undefined;
  const id = key.slice(0, -EMAIL_KEY_SUFFIX.length);
  return shardOfNoticeId(id) === undefined ? undefined : id;
}

function parseBody(raw: Buffer): Json {
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new WebhookPayloadError('the body is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new WebhookPayloadError('the body is not a JSON object');
  return body as Json;
}

function requiredString(body: Json, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value === '') throw new WebhookPayloadError(`${field} is missing`);
  return value;
}

function text(value: unknown): string {
  return typeof value === 'string' || typeof value === 'number' ? String(value) : '';
}

/** The `user:password` of an `Authorization: Basic` header, as bytes; undefined for any other header. */
function basicCredentials(header: string | string[] | undefined): Buffer | undefined {
  if (typeof header !== 'string') return undefined;
  const match = /^basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  return match ? Buffer.from(match[1]!, 'base64') : undefined;
}

function digest(value: Buffer): Buffer {
  return createHash('sha256').update(value).digest();
}
