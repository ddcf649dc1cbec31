/**
 * Provider webhooks: the fast signal beside the planned status checks, which stay the
 * guarantee. Each provider has a receiver that verifies a request and turns it into events; the
 * web records each event through the same transition a check uses (src/notice/steps/webhook.ts).
 */
import type { Channel, StatusObservation } from '../providers/types.js';

/** The providers whose webhooks Herald takes, and the route each one has (`POST /webhooks/<provider>`). */
export const WEBHOOK_PROVIDERS = ['postmark', 'twilio', 'sendgrid', 'mailgun'] as const;
export type WebhookProvider = (typeof WEBHOOK_PROVIDERS)[number];

/**
 * The most bytes a provider's webhook request may carry, checked before anything is verified:
 * Twilio's status callbacks are small forms; the others post one event (Postmark, Mailgun) or a
 * batch of them (SendGrid).
 */
export const WEBHOOK_BODY_LIMITS: Readonly<Record<WebhookProvider, number>> = {
  postmark: 256 * 1024,
  twilio: 64 * 1024,
  sendgrid: 256 * 1024,
  mailgun: 256 * 1024,
};

/** The most fields a form-encoded webhook (Twilio's) may have; a status callback has some twenty. */
export const WEBHOOK_MAX_FORM_FIELDS = 100;

/** One provider event, verified and normalized. */
export interface WebhookEvent {
  channel: Channel;
  /** The provider's ID of the message the event is about (what a send returned). */
  providerMessageId: string;
  /**
   * Another form of the same message's ID that a notice may have recorded instead (SendGrid: the
   * full `sg_message_id`, which a send in doubt found in the Email Logs records, where a send's
   * answer records its X-Message-Id).
   */
  providerMessageAlias?: string;
  /**
   * The notice the message belongs to, where the event carries it: Herald's idempotency key in
   * the message's metadata (`<noticeId>-email`), or the notice in the status callback's URL.
   */
  noticeId: string | undefined;
  /**
   * The provider's identity of the event, stable across the provider's retries of it (an event
   * ID where the provider has one; else message, type and time). The notice records each once.
   */
  eventId: string;
  /** What the event says, mapped as a status read of the same provider would be. */
  observation: StatusObservation;
}

/** A request as a receiver sees it: the raw body (signatures are over bytes), headers and the URL called. */
export interface WebhookRequest {
  rawBody: Buffer;
  headers: Record<string, string | string[] | undefined>;
  /** The path and query string as received (`/webhooks/twilio?notice=…`). */
  url: string;
}

export interface WebhookReceiver {
  provider: WebhookProvider;
  /** The provider posts forms (Twilio): the body's fields are counted before anything is verified. */
  readsForm?: boolean;
  /** True when the request proves it comes from the provider (signature, shared credentials). */
  verify(request: WebhookRequest): boolean;
  /**
   * For a signature that does not cover the event (Mailgun's): what of a verified request may be
   * accepted only once, and for how long it is remembered (at least as long as verify honours it).
   */
  once?(request: WebhookRequest): { identity: string; forMs: number };
  /**
   * The events of a verified request; events Herald has no use for (a processed/queued notice
   * from the provider that says nothing new) may be left out. Throws WebhookPayloadError on a
   * body that is not the provider's shape.
   */
  events(request: WebhookRequest): WebhookEvent[];
}

/** A verified request whose body is not what the provider sends: 400 `webhook_payload_invalid`. */
export class WebhookPayloadError extends Error {}
