/**
 * SendGrid's Event Webhook, signed: SendGrid signs the timestamp header followed by the
 * raw body with its ECDSA P-256 key (SHA-256, a DER signature in base64 in
 * `X-Twilio-Email-Event-Webhook-Signature`), and the account shows the public key, base64 DER, as
 * the verification key (SENDGRID_WEBHOOK_PUBLIC_KEY). The check is the one SendGrid's own library
 * makes (`@sendgrid/eventwebhook`: `Ecdsa.verify(timestamp + payload, signature, publicKey)`),
 * done with node:crypto.
 *
 * No time window: SendGrid's docs recommend none, and a replayed request changes nothing (each
 * event is recorded once, by its `sg_event_id`).
 *
 * The body is a JSON array of events. Each names the message by its `sg_message_id` (the send's
 * X-Message-Id, a dot, a suffix), carries the custom args at its top level (Herald's
 * `herald_key`, `<noticeId>-email`), and is mapped as the Email Logs read maps the same event.
 */
import { createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import { ConfigError } from '../config.js';
import { sendgridEventObservation, type SendgridLogEvent } from '../providers/normalize.js';
import { SENDGRID_IDEMPOTENCY_ARG } from '../providers/sendgrid.js';
import { noticeOfEmailKey } from './notice-key.js';
import { WebhookPayloadError, type WebhookEvent, type WebhookReceiver, type WebhookRequest } from './types.js';

export const SENDGRID_SIGNATURE_HEADER = 'x-twilio-email-event-webhook-signature';
export const SENDGRID_TIMESTAMP_HEADER = 'x-twilio-email-event-webhook-timestamp';

/**
 * The events that tell Herald something about a message: `processed` says only that SendGrid took
 * it (the send's answer said so), and account events name no message.
 */
const RECORDED_EVENTS = new Set([
  'delivered',
  'deferred',
  'bounce',
  'dropped',
  'open',
  'click',
  'spamreport',
  'unsubscribe',
  'group_unsubscribe',
]);

/** SendGrid's Event Webhook, checked by its ECDSA signature. */
export function sendgridReceiver(publicKey: string): WebhookReceiver {
  const key = sendgridVerificationKey(publicKey);
  return {
    provider: 'sendgrid',
    verify: (request) => verifySendgridRequest(key, request),
    events: (request) => sendgridEvents(request.rawBody),
  };
}

/**
 * The verification key as SendGrid shows it (base64 of the DER public key), or as PEM; an EC
 * key on P-256, else the configuration is refused at start.
 */
export function sendgridVerificationKey(publicKey: string): KeyObject {
  const body = publicKey
    .split('\n')
    .filter((line) => !line.startsWith('-----'))
    .join('')
    .replace(/\s+/g, '');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.from(body, 'base64'), format: 'der', type: 'spki' });
  } catch {
    throw new ConfigError([
      'SENDGRID_WEBHOOK_PUBLIC_KEY must be the Event Webhook verification key SendGrid shows (base64 DER of an EC public key)',
    ]);
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new ConfigError([
      'SENDGRID_WEBHOOK_PUBLIC_KEY must be an ECDSA P-256 public key, as SendGrid generates for the Signed Event Webhook',
    ]);
  }
  return key;
}

/** True when the signature header is the key's signature of the timestamp header followed by the raw body. */
export function verifySendgridRequest(key: KeyObject, request: WebhookRequest): boolean {
  const signature = header(request, SENDGRID_SIGNATURE_HEADER);
  const timestamp = header(request, SENDGRID_TIMESTAMP_HEADER);
  if (signature === undefined || timestamp === undefined || signature === '' || timestamp === '') return false;
  const der = Buffer.from(signature, 'base64');
  if (der.length === 0) return false;
  try {
    return verifySignature('sha256', Buffer.concat([Buffer.from(timestamp, 'utf8'), request.rawBody]), { key, dsaEncoding: 'der' }, der);
  } catch {
    // A signature that is not DER at all.
    return false;
  }
}

/** The events of a verified body that Herald records; throws WebhookPayloadError when it is not SendGrid's array of events. */
export function sendgridEvents(rawBody: Buffer): WebhookEvent[] {
  let body: unknown;
  try {
    body = JSON.parse(rawBody.toString('utf8'));
  } catch {
    throw new WebhookPayloadError('not JSON');
  }
  if (!Array.isArray(body)) throw new WebhookPayloadError('not an array of events');
  const events: WebhookEvent[] = [];
  body.forEach((item: unknown, index) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new WebhookPayloadError(`event ${index} is not an object`);
    const event = item as Record<string, unknown>;
    if (typeof event['event'] !== 'string') throw new WebhookPayloadError(`event ${index} has no event name`);
    if (!RECORDED_EVENTS.has(event['event'])) return;
    const sgMessageId = event['sg_message_id'];
    const sgEventId = event['sg_event_id'];
    // Without them the event cannot be matched to a send, nor recorded once: it says nothing Herald can use.
    if (typeof sgMessageId !== 'string' || sgMessageId === '' || typeof sgEventId !== 'string' || sgEventId === '') return;
    const mapped: SendgridLogEvent = { event: event['event'] };
    if (typeof event['type'] === 'string') mapped.type = event['type'];
    if (typeof event['reason'] === 'string') mapped.reason = event['reason'];
    const xMessageId = sgMessageId.split('.')[0]!;
    const webhookEvent: WebhookEvent = {
      channel: 'email',
      providerMessageId: xMessageId,
      noticeId: noticeOfEmailKey(event[SENDGRID_IDEMPOTENCY_ARG]),
      eventId: sgEventId,
      observation: sendgridEventObservation(mapped),
    };
    if (xMessageId !== sgMessageId) webhookEvent.providerMessageAlias = sgMessageId;
    events.push(webhookEvent);
  });
  return events;
}

function header(request: WebhookRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
