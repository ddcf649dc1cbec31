/**
 * Pure reading of the feed providers' events: an SQS message body, an SNS envelope
 * `{"Type":"Notification","TopicArn":…,"Message":"<event JSON>"}` holding an SES event record or
 * an AWS End User Messaging SMS event. Each becomes a FeedEvent for the observation store, with
 * the idempotency tag the event carried and any address the provider now refuses.
 *
 * A feed is pinned to one SNS topic (SES_EVENTS_TOPIC_ARN, AWS_SMS_EVENTS_TOPIC_ARN): an
 * envelope of any other topic is foreign, and so is a body that is no SNS envelope at all. SNS
 * wraps every notification it delivers to an SQS subscription in an envelope naming its topic,
 * unless the subscription sets `RawMessageDelivery`; a raw body (or EventBridge's `{"detail": …}`)
 * names no topic, so nothing could tell whose it is: Herald takes none (the subscription must
 * leave raw delivery off). Identifiers and addresses are bounded before anything is stored (a
 * message ID or tag of at most 256 characters, an email address of at most 254, a phone number
 * in E.164); an event that breaks a bound is refused whole.
 *
 * The ranks order a message's life, so that a feed read out of order cannot move an
 * observation back: sent (1) < delayed (2) < carrier accepted (3) < unknown (4) < final (5).
 */
import { sha256Hex } from '../digest.js';
import { shardOfNoticeId } from '../notice/ids.js';
import { emailIdempotencyKey } from '../notice/notice.js';
import type { FeedEvent } from '../store/provider-feed.js';

/** The SES message tag / SMS context field that carries Herald's idempotency key. */
export const IDEMPOTENCY_TAG = 'herald_key';

/** The longest email address Herald takes from a feed (RFC 5321's path limit, less its brackets). */
export const MAX_EMAIL_LENGTH = 254;
/** The longest message ID, tag or label Herald takes from a feed. */
const MAX_ID_LENGTH = 256;
/** Labels taken from an event into the observation (bounce types, a reject's reason) are cut to this. */
const MAX_LABEL_LENGTH = 64;
const E164 = /^\+[1-9]\d{1,14}$/;

/** How a message that records nothing is counted: `herald_feed_messages_total{outcome}`. */
export type FeedOutcome =
  'recorded' | 'ignored' | 'foreign_topic' | 'not_sns' | 'refused' | 'address_mismatch' | 'unreadable' | 'poison_deleted';

/** What one SQS message says. */
export type FeedMessage =
  | {
      kind: 'event';
      event: FeedEvent;
      /** Herald's idempotency key the message was sent with, and when it was sent (ms). */
      tag?: { value: string; sentAt: number };
      /**
       * The provider now refuses the address the event names (a permanent bounce, a complaint):
       * the sweep suppresses it only when it is the address Herald recorded for the message's
       * notice (`noticeId`, from Herald's key), never an address the event alone names.
       */
      suppress?: { address: string; reason: string; source: 'ses_hard_bounce' | 'ses_complaint'; noticeId: string | undefined };
    }
  /** Nothing to record (an SNS subscription confirmation, an event type with no bearing). */
  | { kind: 'ignored'; reason: string }
  /** Not from the feed's pinned topic: another topic's envelope, or no SNS envelope at all. */
  | { kind: 'foreign'; outcome: 'foreign_topic' | 'not_sns'; reason: string; topicArn?: string }
  /** From the pinned topic, but past a bound (an over-long address or ID): nothing of it is stored. */
  | { kind: 'refused'; reason: string }
  /** Not a message of this feed at all: no JSON, or not an event record. */
  | { kind: 'unreadable'; reason: string };

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
/** A label from the event, cut to a bounded length. */
const label = (value: unknown): string | undefined => text(value)?.slice(0, MAX_LABEL_LENGTH);
/** An identifier the store keys on: printable, no spaces, bounded. */
const isIdentifier = (value: string): boolean => value.length <= MAX_ID_LENGTH && /^[\x21-\x7e]+$/.test(value);

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

const EMAIL_KEY_SUFFIX = emailIdempotencyKey('');

/** The notice whose email carried this key (`<noticeId>-email`); undefined for any other key. */
export function noticeOfEmailTag(tag: string | undefined): string | undefined {
  if (tag === undefined || !tag.endsWith(EMAIL_KEY_SUFFIX)) return undefined;
  const id = tag.slice(0, -EMAIL_KEY_SUFFIX.length);
  return shardOfNoticeId(id) === undefined ? undefined : id;
}

/**
 * The provider's event inside an SQS body: the Message of an SNS notification of `topicArn`.
 * An envelope of another topic, or a body that is no envelope, is foreign; the pinned topic's
 * subscription confirmations are ignored.
 */
export function openEnvelope(
  body: string,
  topicArn: string,
): { kind: 'record'; record: Json } | Extract<FeedMessage, { kind: 'foreign' | 'ignored' | 'unreadable' }> {
  let outer: unknown;
  try {
    outer = JSON.parse(body);
  } catch {
    return { kind: 'unreadable', reason: 'the body is not JSON' };
  }
  if (!isObject(outer) || typeof outer['Type'] !== 'string' || typeof outer['TopicArn'] !== 'string') {
    return {
      kind: 'foreign',
      outcome: 'not_sns',
      reason: 'not an SNS envelope (raw message delivery or another sender): no topic to check',
    };
  }
  const topic = outer['TopicArn'];
  if (topic !== topicArn) {
    return {
      kind: 'foreign',
      outcome: 'foreign_topic',
      reason: 'an SNS envelope of another topic',
      topicArn: topic.slice(0, MAX_ID_LENGTH),
    };
  }
  if (outer['Type'] !== 'Notification') return { kind: 'ignored', reason: `SNS ${label(outer['Type'])}` };
  const message = outer['Message'];
  if (typeof message !== 'string') return { kind: 'unreadable', reason: 'an SNS notification without a Message' };
  try {
    const inner: unknown = JSON.parse(message);
    return isObject(inner) ? { kind: 'record', record: inner } : { kind: 'unreadable', reason: 'the SNS Message is not a JSON object' };
  } catch {
    return { kind: 'unreadable', reason: 'the SNS Message is not JSON' };
  }
}

/** The first address an email address field or list names, and whether every one fits the bound. */
function emailAddresses(values: unknown[], field?: string): { first: string | undefined; fits: boolean } {
  const addresses = values
    .map((value) => (field && isObject(value) ? value[field] : value))
    .filter((a): a is string => typeof a === 'string');
  return { first: addresses[0], fits: addresses.every((a) => a.length <= MAX_EMAIL_LENGTH) };
}

/** Reads one SQS body of the SES events queue, pinned to `topicArn`. `now` dates events that carry no time. */
export function readSesMessage(body: string, now: number, topicArn: string): FeedMessage {
  const opened = openEnvelope(body, topicArn);
  if (opened.kind !== 'record') return opened;
  const { record } = opened;
  // Event publishing says `eventType`; the older identity notifications say `notificationType`.
  const type = text(record['eventType']) ?? text(record['notificationType']);
  const mail = record['mail'];
  if (type === undefined || !isObject(mail)) return { kind: 'unreadable', reason: 'not an SES event record' };
  const messageId = text(mail['messageId']);
  if (messageId === undefined) return { kind: 'unreadable', reason: 'an SES event without mail.messageId' };
  if (!isIdentifier(messageId)) return { kind: 'refused', reason: `mail.messageId is not an ID of at most ${MAX_ID_LENGTH} characters` };
  const sentAt = timeOf(mail['timestamp'], now);
  const detail = (name: string): Json => (isObject(record[name]) ? (record[name] as Json) : {});
  const destination = emailAddresses(Array.isArray(mail['destination']) ? mail['destination'] : []);
  if (!destination.fits) return { kind: 'refused', reason: `an address over ${MAX_EMAIL_LENGTH} characters in mail.destination` };
  const base = { messageId };
  let event: FeedEvent;
  let suppress: { address: string; reason: string; source: 'ses_hard_bounce' | 'ses_complaint' } | undefined;
  switch (type) {
    case 'Send':
      event = { ...base, at: sentAt, rank: 1, status: 'pending', providerStatus: 'Send' };
      break;
    case 'DeliveryDelay': {
      const delay = detail('deliveryDelay');
      const delayType = label(delay['delayType']) ?? 'Unknown';
      event = { ...base, at: timeOf(delay['timestamp'], now), rank: 2, status: 'deferred', providerStatus: `DeliveryDelay(${delayType})` };
      break;
    }
    case 'Delivery':
      event = { ...base, at: timeOf(detail('delivery')['timestamp'], now), rank: 5, status: 'delivered', providerStatus: 'Delivery' };
      break;
    case 'Bounce': {
      const bounce = detail('bounce');
      const bounceType = label(bounce['bounceType']) ?? 'Undetermined';
      const subType = label(bounce['bounceSubType']) ?? 'Undetermined';
      const at = timeOf(bounce['timestamp'], now);
      const providerStatus = `Bounce(${bounceType}/${subType})`;
      const kind = `${bounceType}/${subType}`;
      const bounced = emailAddresses(Array.isArray(bounce['bouncedRecipients']) ? bounce['bouncedRecipients'] : [], 'emailAddress');
      if (!bounced.fits) return { kind: 'refused', reason: `an address over ${MAX_EMAIL_LENGTH} characters in bounce.bouncedRecipients` };
      if (subType === 'OnAccountSuppressionList' || subType === 'Suppressed') {
        // SES accepted the message but never tried it: the address is on a suppression list.
        event = { ...base, at, rank: 5, status: 'failed', providerStatus, bounceType: kind, suppressed: true };
      } else if (bounceType === 'Permanent') {
        event = { ...base, at, rank: 5, status: 'bounced', providerStatus, bounceType: kind, suppressed: true };
        const address = bounced.first ?? destination.first;
        if (address) suppress = { address, reason: `SES bounce ${kind}`, source: 'ses_hard_bounce' };
      } else if (bounceType === 'Transient') {
        // SES has given up on this message for now; the address may work later: not a failure.
        event = { ...base, at, rank: 2, status: 'deferred', providerStatus, bounceType: kind };
      } else {
        event = { ...base, at, rank: 4, status: 'unknown', providerStatus, bounceType: kind };
      }
      break;
    }
    case 'Complaint': {
      const complaint = detail('complaint');
      const complained = emailAddresses(
        Array.isArray(complaint['complainedRecipients']) ? complaint['complainedRecipients'] : [],
        'emailAddress',
      );
      if (!complained.fits)
        return { kind: 'refused', reason: `an address over ${MAX_EMAIL_LENGTH} characters in complaint.complainedRecipients` };
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
      const address = complained.first ?? destination.first;
      const feedback = label(complaint['complaintFeedbackType']);
      if (address) suppress = { address, reason: `SES complaint${feedback ? ` (${feedback})` : ''}`, source: 'ses_complaint' };
      break;
    }
    case 'Reject':
      event = {
        ...base,
        at: sentAt,
        rank: 5,
        status: 'failed',
        providerStatus: `Reject(${label(detail('reject')['reason']) ?? 'unknown'})`,
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
      return { kind: 'ignored', reason: `SES event ${label(type)}` };
  }
  const tags = isObject(mail['tags']) ? mail['tags'] : {};
  const tagValues = tags[IDEMPOTENCY_TAG];
  const tag = Array.isArray(tagValues) ? text(tagValues[0]) : text(tagValues);
  if (tag !== undefined && !/^[A-Za-z0-9_-]{1,256}$/.test(tag))
    return { kind: 'refused', reason: 'a herald_key tag SES would not have sent' };
  const message: FeedMessage = { kind: 'event', event };
  if (tag !== undefined) message.tag = { value: tag, sentAt };
  if (suppress) message.suppress = { ...suppress, noticeId: noticeOfEmailTag(tag) };
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

/** Reads one SQS body of the AWS SMS events queue, pinned to `topicArn`. */
export function readSmsMessage(body: string, now: number, topicArn: string): FeedMessage {
  const opened = openEnvelope(body, topicArn);
  if (opened.kind !== 'record') return opened;
  const { record } = opened;
  const type = text(record['eventType']);
  const messageId = text(record['messageId']);
  if (type === undefined || messageId === undefined) return { kind: 'unreadable', reason: 'not an SMS event record' };
  if (!isIdentifier(messageId)) return { kind: 'refused', reason: `messageId is not an ID of at most ${MAX_ID_LENGTH} characters` };
  for (const field of ['destinationPhoneNumber', 'originationPhoneNumber']) {
    const number = record[field];
    // The origination may be a sender ID or a pool rather than a number; a destination is always one.
    if (typeof number === 'string' && !E164.test(number) && (field === 'destinationPhoneNumber' || number.length > MAX_ID_LENGTH)) {
      return { kind: 'refused', reason: `${field} is not an E.164 number` };
    }
  }
  const known = SMS_EVENTS[type];
  if (!known) return { kind: 'ignored', reason: `SMS event ${label(type)}` };
  const event: FeedEvent = {
    messageId,
    at: timeOf(record['eventTimestamp'], now),
    ...known,
    providerStatus: type,
  };
  const message: FeedMessage = { kind: 'event', event };
  const context = isObject(record['context']) ? record['context'] : {};
  const tag = text(context[IDEMPOTENCY_TAG]);
  if (tag !== undefined && tag.length > MAX_ID_LENGTH) return { kind: 'refused', reason: `a herald_key over ${MAX_ID_LENGTH} characters` };
  if (tag !== undefined) message.tag = { value: tag, sentAt: timeOf(record['messageRequestTimestamp'], event.at) };
  return message;
}
