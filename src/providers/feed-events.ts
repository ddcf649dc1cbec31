/**
 * Pure reading of the feed providers' events (SPEC §10): an SQS message body, usually an SNS
 * envelope `{"Type":"Notification","Message":"<event JSON>"}` (raw delivery and EventBridge's
 * `{"detail": …}` are read too), holding an SES event record or an AWS End User Messaging SMS
 * event. Each becomes a FeedEvent for the observation store, with the idempotency tag the
 * event carried and any address the provider now refuses.
 *
 * The ranks order a message's life, so that a feed read out of order cannot move an
 * observation back: sent (1) < delayed (2) < carrier accepted (3) < unknown (4) < final (5).
 */
import { sha256Hex } from '../digest.js';
import type { FeedEvent } from '../store/provider-feed.js';

/** The SES message tag / SMS context field that carries Herald's idempotency key. */
export const IDEMPOTENCY_TAG = 'herald_key';

/** What one SQS message says. */
export type FeedMessage =
  | {
      kind: 'event';
      event: FeedEvent;
      /** Herald's idempotency key the message was sent with, and when it was sent (ms). */
      tag?: { value: string; sentAt: number };
      /** An address the provider now refuses, for Herald's suppression list. */
      suppress?: { address: string; reason: string; source: 'ses_hard_bounce' | 'ses_complaint'; noticeId?: string };
    }
  /** Nothing to record (an SNS subscription confirmation, an event type with no bearing). */
  | { kind: 'ignored'; reason: string }
  /** Not a message of this feed at all. */
  | { kind: 'unreadable'; reason: string };

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/** A time given as ISO text or epoch milliseconds; `fallback` when neither. */
function timeOf(value: unknown, fallback: number): number {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  const parsed = typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isNaN(parsed) ? fallback : parsed;
}

/**
 * SES tag values allow only letters, digits, `_` and `-` (≤ 256): a key that fits is used as
 * it is, any other as `sha256_<hex>` of it. The same encoding is searched for.
 */
export function idempotencyTagValue(idempotencyKey: string): string {
  return /^[A-Za-z0-9_-]{1,256}$/.test(idempotencyKey) ? idempotencyKey : `sha256_${sha256Hex(idempotencyKey)}`;
}

/** The provider's event inside an SQS body: an SNS envelope's Message, EventBridge's detail, or the body itself. */
export function unwrapEnvelope(body: string): Json | { unreadable: string } | { ignored: string } {
  let outer: unknown;
  try {
    outer = JSON.parse(body);
  } catch {
    return { unreadable: 'the body is not JSON' };
  }
  if (!isObject(outer)) return { unreadable: 'the body is not a JSON object' };
  if (typeof outer['Type'] === 'string' && typeof outer['TopicArn'] === 'string') {
    if (outer['Type'] !== 'Notification') return { ignored: `SNS ${outer['Type']}` };
    const message = outer['Message'];
    if (typeof message !== 'string') return { unreadable: 'an SNS notification without a Message' };
    try {
      const inner: unknown = JSON.parse(message);
      return isObject(inner) ? inner : { unreadable: 'the SNS Message is not a JSON object' };
    } catch {
      return { unreadable: 'the SNS Message is not JSON' };
    }
  }
  if (isObject(outer['detail']) && typeof outer['detail-type'] === 'string') return outer['detail'];
  return outer;
}

/** Reads one SQS body of the SES events queue. `now` dates events that carry no time. */
export function readSesMessage(body: string, now: number): FeedMessage {
  const record = unwrapEnvelope(body);
  if ('unreadable' in record) return { kind: 'unreadable', reason: String(record.unreadable) };
  if ('ignored' in record) return { kind: 'ignored', reason: String(record.ignored) };
  // Event publishing says `eventType`; the older identity notifications say `notificationType`.
  const type = text(record['eventType']) ?? text(record['notificationType']);
  const mail = record['mail'];
  if (type === undefined || !isObject(mail)) return { kind: 'unreadable', reason: 'not an SES event record' };
  const messageId = text(mail['messageId']);
  if (messageId === undefined) return { kind: 'unreadable', reason: 'an SES event without mail.messageId' };
  const sentAt = timeOf(mail['timestamp'], now);
  const detail = (name: string): Json => (isObject(record[name]) ? (record[name] as Json) : {});
  const base = { messageId };
  let event: FeedEvent;
  let suppress: Extract<FeedMessage, { kind: 'event' }>['suppress'];
  const firstAddress = (list: unknown, field = 'emailAddress'): string | undefined => {
    const first = Array.isArray(list) ? list[0] : undefined;
    return isObject(first) ? text(first[field]) : undefined;
  };
  switch (type) {
    case 'Send':
      event = { ...base, at: sentAt, rank: 1, status: 'pending', providerStatus: 'Send' };
      break;
    case 'DeliveryDelay': {
      const delay = detail('deliveryDelay');
      const delayType = text(delay['delayType']) ?? 'Unknown';
      event = { ...base, at: timeOf(delay['timestamp'], now), rank: 2, status: 'deferred', providerStatus: `DeliveryDelay(${delayType})` };
      break;
    }
    case 'Delivery':
      event = { ...base, at: timeOf(detail('delivery')['timestamp'], now), rank: 5, status: 'delivered', providerStatus: 'Delivery' };
      break;
    case 'Bounce': {
      const bounce = detail('bounce');
      const bounceType = text(bounce['bounceType']) ?? 'Undetermined';
      const subType = text(bounce['bounceSubType']) ?? 'Undetermined';
      const at = timeOf(bounce['timestamp'], now);
      const providerStatus = `Bounce(${bounceType}/${subType})`;
      const label = `${bounceType}/${subType}`;
      if (subType === 'OnAccountSuppressionList' || subType === 'Suppressed') {
        // SES accepted the message but never tried it: the address is on a suppression list.
        event = { ...base, at, rank: 5, status: 'failed', providerStatus, bounceType: label, suppressed: true };
      } else if (bounceType === 'Permanent') {
        event = { ...base, at, rank: 5, status: 'bounced', providerStatus, bounceType: label, suppressed: true };
        const address = firstAddress(bounce['bouncedRecipients']) ?? text((mail['destination'] as unknown[] | undefined)?.[0]);
        if (address) suppress = { address, reason: `SES bounce ${label}`, source: 'ses_hard_bounce' };
      } else if (bounceType === 'Transient') {
        // SES has given up on this message for now; the address may work later: not a failure.
        event = { ...base, at, rank: 2, status: 'deferred', providerStatus, bounceType: label };
      } else {
        event = { ...base, at, rank: 4, status: 'unknown', providerStatus, bounceType: label };
      }
      break;
    }
    case 'Complaint': {
      const complaint = detail('complaint');
      // A complaint says the recipient refuses mail, not that this one was delivered.
      event = {
        ...base,
        at: timeOf(complaint['timestamp'], now),
        rank: 0,
        status: 'pending',
        providerStatus: 'Complaint',
        engagement: 'complained',
        suppressed: true,
      };
      const address = firstAddress(complaint['complainedRecipients']) ?? text((mail['destination'] as unknown[] | undefined)?.[0]);
      const feedback = text(complaint['complaintFeedbackType']);
      if (address) suppress = { address, reason: `SES complaint${feedback ? ` (${feedback})` : ''}`, source: 'ses_complaint' };
      break;
    }
    case 'Reject':
      event = {
        ...base,
        at: sentAt,
        rank: 5,
        status: 'failed',
        providerStatus: `Reject(${text(detail('reject')['reason']) ?? 'unknown'})`,
      };
      break;
    case 'Rendering Failure':
    case 'RenderingFailure':
      event = { ...base, at: sentAt, rank: 5, status: 'failed', providerStatus: 'RenderingFailure' };
      break;
    case 'Open':
      event = {
        ...base,
        at: timeOf(detail('open')['timestamp'], now),
        rank: 0,
        status: 'pending',
        providerStatus: 'Open',
        engagement: 'opened',
      };
      break;
    case 'Click':
      event = {
        ...base,
        at: timeOf(detail('click')['timestamp'], now),
        rank: 0,
        status: 'pending',
        providerStatus: 'Click',
        engagement: 'clicked',
      };
      break;
    default:
      // Subscription (list preferences) and types SES may add later say nothing of delivery.
      return { kind: 'ignored', reason: `SES event ${type}` };
  }
  const tags = isObject(mail['tags']) ? mail['tags'] : {};
  const tagValues = tags[IDEMPOTENCY_TAG];
  const tag = Array.isArray(tagValues) ? text(tagValues[0]) : text(tagValues);
  const message: FeedMessage = { kind: 'event', event };
  if (tag !== undefined) message.tag = { value: tag, sentAt };
  if (suppress) {
    // The notice the message was sent for, when its send carried Herald's `notice_id` tag.
    const noticeTag = tags['notice_id'];
    const noticeId = Array.isArray(noticeTag) ? text(noticeTag[0]) : text(noticeTag);
    message.suppress = noticeId ? { ...suppress, noticeId } : suppress;
  }
  return message;
}

/** AWS End User Messaging SMS event types, by rank and normalized status. */
const SMS_EVENTS: Record<string, Pick<FeedEvent, 'rank' | 'status'>> = {
  TEXT_QUEUED: { rank: 1, status: 'pending' },
  TEXT_PENDING: { rank: 2, status: 'pending' },
  // Temporary: the carrier may still take it.
  TEXT_CARRIER_UNREACHABLE: { rank: 2, status: 'pending' },
  // Accepted by the carrier: like Twilio's `sent`, not proof that the handset has it.
  TEXT_SUCCESSFUL: { rank: 3, status: 'pending' },
  TEXT_UNKNOWN: { rank: 4, status: 'unknown' },
  TEXT_DELIVERED: { rank: 5, status: 'delivered' },
  TEXT_BLOCKED: { rank: 5, status: 'failed' },
  TEXT_CARRIER_BLOCKED: { rank: 5, status: 'failed' },
  TEXT_SPAM: { rank: 5, status: 'failed' },
  TEXT_INVALID: { rank: 5, status: 'failed' },
  TEXT_INVALID_MESSAGE: { rank: 5, status: 'failed' },
  TEXT_UNREACHABLE: { rank: 5, status: 'failed' },
  TEXT_TTL_EXPIRED: { rank: 5, status: 'failed' },
  TEXT_PROTECT_BLOCKED: { rank: 5, status: 'failed' },
};

/** Reads one SQS body of the AWS SMS events queue. */
export function readSmsMessage(body: string, now: number): FeedMessage {
  const record = unwrapEnvelope(body);
  if ('unreadable' in record) return { kind: 'unreadable', reason: String(record.unreadable) };
  if ('ignored' in record) return { kind: 'ignored', reason: String(record.ignored) };
  const type = text(record['eventType']);
  const messageId = text(record['messageId']);
  if (type === undefined || messageId === undefined) return { kind: 'unreadable', reason: 'not an SMS event record' };
  const known = SMS_EVENTS[type];
  if (!known) return { kind: 'ignored', reason: `SMS event ${type}` };
  const event: FeedEvent = {
    messageId,
    at: timeOf(record['eventTimestamp'], now),
    ...known,
    providerStatus: type,
  };
  const message: FeedMessage = { kind: 'event', event };
  const context = isObject(record['context']) ? record['context'] : {};
  const tag = text(context[IDEMPOTENCY_TAG]);
  if (tag !== undefined) message.tag = { value: tag, sentAt: timeOf(record['messageRequestTimestamp'], event.at) };
  return message;
}
