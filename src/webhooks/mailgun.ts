/**
 * Mailgun's webhooks. The current webhooks post JSON, one event per request:
 * `{ "signature": { "timestamp", "token", "signature" }, "event-data": { … } }`, where `signature`
 * is the hex HMAC-SHA256 of `timestamp` followed by `token`, keyed with the domain's HTTP webhook
 * signing key (MAILGUN_WEBHOOK_SIGNING_KEY); an event of a subaccount's domain also carries
 * `parent-signature`, the same HMAC with the primary account's key, and either one verifies.
 * (Mailgun's legacy webhooks posted forms; they are not taken: configure the webhooks API.)
 *
 * That HMAC covers the timestamp and the token, not the event: whoever saw one signed request
 * could put any event under its signature. So a signature is honoured only while its timestamp is
 * near now (up to ten minutes old, or five minutes ahead: a window of fifteen), and each
 * `(timestamp, token)` only once (the web remembers it in Redis for the window,
 * `WebhookReceiver.once`). What remains: a request caught in flight and replayed before the
 * original arrives, inside the window; TLS to Herald's public URL is what closes that. A refused
 * late event costs nothing: the planned checks read the same status.
 *
 * The event names its message by `message.headers.message-id` (without the angle brackets of the
 * send's answer, as the adapter records it), carries Herald's key in `user-variables.herald_key`,
 * is recorded once by its `id`, and is mapped as the adapter's status read maps the same event.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { bareMessageId, MAILGUN_KEY_VARIABLE } from '../providers/mailgun.js';
import { mailgunObservation, type MailgunEvent } from '../providers/normalize.js';
import { noticeOfEmailKey } from './notice-key.js';
import { WebhookPayloadError, type WebhookEvent, type WebhookReceiver, type WebhookRequest } from './types.js';

/** How old a signature's timestamp may be. */
export const MAILGUN_SIGNATURE_MAX_AGE_MS = 10 * 60_000;
/** How far ahead of Herald's clock a signature's timestamp may be (clocks differ). */
export const MAILGUN_SIGNATURE_MAX_AHEAD_MS = 5 * 60_000;

/**
 * The events that say something of a message's delivery, as the status read maps them;
 * `accepted` says only what the send's answer said, and `unsubscribed`, `complained` and
 * `stored` change nothing there.
 */
const RECORDED_EVENTS = new Set(['delivered', 'failed', 'rejected', 'opened', 'clicked']);

export interface MailgunReceiverOptions {
  /** Herald's clock, epoch ms (the signature's age is measured against it). */
  now?: () => number;
}

/** Mailgun's webhooks, checked by the HMAC in each event's `signature`. */
export function mailgunReceiver(signingKey: string, opts: MailgunReceiverOptions = {}): WebhookReceiver {
  const now = opts.now ?? Date.now;
  return {
    provider: 'mailgun',
    verify: (request) => verifyMailgunRequest(signingKey, request, now()),
    once: (request) => {
      const signature = (parsed(request) as { signature: { timestamp: string | number; token: string } }).signature;
      return {
        identity: `${signature.timestamp}\n${signature.token}`,
        forMs: MAILGUN_SIGNATURE_MAX_AGE_MS + MAILGUN_SIGNATURE_MAX_AHEAD_MS,
      };
    },
    events: (request) => mailgunEvents(request),
  };
}

/** True when the body's `signature` is the key's HMAC of its timestamp and token, made near `now`. */
export function verifyMailgunRequest(signingKey: string, request: WebhookRequest, now: number): boolean {
  const body = parsed(request);
  const signature = isObject(body) ? body['signature'] : undefined;
  if (!isObject(signature)) return false;
  const { timestamp, token } = signature;
  if ((typeof timestamp !== 'string' && typeof timestamp !== 'number') || typeof token !== 'string' || token === '') return false;
  const seconds = Number(timestamp);
  if (!Number.isFinite(seconds)) return false;
  const age = now - seconds * 1000;
  if (age > MAILGUN_SIGNATURE_MAX_AGE_MS || age < -MAILGUN_SIGNATURE_MAX_AHEAD_MS) return false;
  const expected = createHmac('sha256', signingKey).update(`${timestamp}${token}`).digest();
  return [signature['signature'], signature['parent-signature']].some((given) => sameHex(expected, given));
}

/** The events of a verified body Herald records; throws WebhookPayloadError when the body is not Mailgun's. */
export function mailgunEvents(request: WebhookRequest): WebhookEvent[] {
  const body = parsed(request);
  const data = isObject(body) ? body['event-data'] : undefined;
  if (!isObject(data)) throw new WebhookPayloadError('no event-data object');
  const name = data['event'];
  const id = data['id'];
  if (typeof name !== 'string' || typeof id !== 'string' || id === '') throw new WebhookPayloadError('event-data has no event or id');
  if (!RECORDED_EVENTS.has(name)) return [];
  const message = isObject(data['message']) ? data['message'] : undefined;
  const headers = message && isObject(message['headers']) ? message['headers'] : undefined;
  const messageId = headers?.['message-id'];
  // A rejected send never got a message ID: nothing to match it with (the send's answer said so).
  if (typeof messageId !== 'string' || bareMessageId(messageId) === '') return [];
  const variables = isObject(data['user-variables']) ? data['user-variables'] : {};
  const event: MailgunEvent = { event: name };
  if (typeof data['timestamp'] === 'number') event.timestamp = data['timestamp'];
  if (typeof data['severity'] === 'string') event.severity = data['severity'];
  if (typeof data['reason'] === 'string') event.reason = data['reason'];
  if (isObject(data['delivery-status'])) event['delivery-status'] = data['delivery-status'] as MailgunEvent['delivery-status'];
  return [
    {
      channel: 'email',
      providerMessageId: bareMessageId(messageId),
      noticeId: noticeOfEmailKey(variables[MAILGUN_KEY_VARIABLE]),
      eventId: id,
      observation: mailgunObservation([event]),
    },
  ];
}

/** The JSON body, parsed once per request (verify and events both read it); undefined when it is not JSON. */
const bodies = new WeakMap<Buffer, unknown>();
function parsed(request: WebhookRequest): unknown {
  if (bodies.has(request.rawBody)) return bodies.get(request.rawBody);
  let body: unknown;
  try {
    body = JSON.parse(request.rawBody.toString('utf8'));
  } catch {
    body = undefined;
  }
  bodies.set(request.rawBody, body);
  return body;
}

/** Constant-time comparison of an HMAC with a hex string given in a request. */
function sameHex(expected: Buffer, given: unknown): boolean {
  if (typeof given !== 'string' || !/^[0-9a-fA-F]+$/.test(given) || given.length !== expected.length * 2) return false;
  return timingSafeEqual(expected, Buffer.from(given, 'hex'));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
