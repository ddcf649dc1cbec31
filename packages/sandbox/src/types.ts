import type { WebhookDeliveryRecord, WebhookFaultRates, WebhookTarget } from './webhooks.js';

/** Public shapes of the sandbox: what it records, how it is controlled. */

/** One API operation of the emulated providers, as named in `requests()` and in faults. */
export type Operation =
  | 'postmark.send'
  | 'postmark.details'
  | 'postmark.search'
  | 'postmark.bounce'
  | 'twilio.create'
  | 'twilio.fetch'
  | 'twilio.list'
  | 'twilio.cancel'
  | 'postmark.server'
  | 'twilio.account'
  | 'sendgrid.send'
  | 'sendgrid.logs_search'
  | 'sendgrid.logs_message'
  | 'sendgrid.scopes'
  | 'ses.send'
  | 'ses.account'
  | 'aws-sms.send'
  | 'aws-sms.account'
  | 'sqs.receive'
  | 'sqs.delete'
  | 'sqs.attributes'
  | 'sqs.send'
  | 'sqs.create'
  | 'mailgun.send'
  | 'mailgun.events'
  | 'mailgun.logs'
  | 'mailgun.domain'
  | 'infrai.email.send'
  | 'infrai.email.get'
  | 'infrai.email.events'
  | 'infrai.sms.send'
  | 'infrai.sms.status';

export const OPERATIONS: readonly Operation[] = [
  'postmark.send',
  'postmark.details',
  'postmark.search',
  'postmark.bounce',
  'twilio.create',
  'twilio.fetch',
  'twilio.list',
  'twilio.cancel',
  'postmark.server',
  'twilio.account',
  'sendgrid.send',
  'sendgrid.logs_search',
  'sendgrid.logs_message',
  'sendgrid.scopes',
  'ses.send',
  'ses.account',
  'aws-sms.send',
  'aws-sms.account',
  'sqs.receive',
  'sqs.delete',
  'sqs.attributes',
  'sqs.send',
  'sqs.create',
  'mailgun.send',
  'mailgun.events',
  'mailgun.logs',
  'mailgun.domain',
  'infrai.email.send',
  'infrai.email.get',
  'infrai.email.events',
  'infrai.sms.send',
  'infrai.sms.status',
];

/**
 * A channel role a fault may name instead of one provider's operation: the send of whichever
 * emulator serves that channel. Scenarios written once (the provider comparison) inject faults
 * by role, so they apply to every provider.
 */
export type FaultRole = 'email.send' | 'sms.send';

export const FAULT_ROLES: readonly FaultRole[] = ['email.send', 'sms.send'];

/** The role of each emulator's send operation (a provider's emulator adds its own here). */
export const OPERATION_ROLES: Partial<Record<Operation, FaultRole>> = {
  'postmark.send': 'email.send',
  'twilio.create': 'sms.send',
  'infrai.email.send': 'email.send',
  'infrai.sms.send': 'sms.send',
  'sendgrid.send': 'email.send',
  'mailgun.send': 'email.send',
  'ses.send': 'email.send',
  'aws-sms.send': 'sms.send',
};

/**
 * How a faulted request goes wrong. `status_*` answer with the provider's error body and do
 * nothing; `hang` never answers and does nothing; `accept_then_hang` and `accept_then_drop` do
 * the operation (a message is really created) and then never answer / destroy the connection.
 */
export type FaultMode = 'status_500' | 'status_503' | 'status_429' | 'hang' | 'accept_then_hang' | 'accept_then_drop' | 'hang_then_accept';

export const FAULT_MODES: readonly FaultMode[] = [
  'status_500',
  'status_503',
  'status_429',
  'hang',
  'accept_then_hang',
  'accept_then_drop',
  'hang_then_accept',
];

/** A fault to inject: it applies to the next `count` requests of `operation` (matching `match`). */
export interface Fault {
  /** One provider's operation, or a channel role (any emulator's send). */
  operation: Operation | FaultRole;
  mode: FaultMode;
  /** How many requests it applies to (default 1). */
  count?: number;
  /** Retry-After of `status_429` answers, in seconds (default 1). */
  retryAfterSeconds?: number;
  /** `status_429` answers without a Retry-After header at all. */
  omitRetryAfter?: boolean;
  /** `hang_then_accept`: how long the request is held before the provider carries it out (default 3000 ms). */
  acceptAfterMs?: number;
  /** Only requests whose recipient (email To, SMS To) contains this text, case-insensitively. */
  match?: string;
}

/** An injected fault still waiting for requests. */
export interface ActiveFault {
  id: string;
  operation: Operation | FaultRole;
  mode: FaultMode;
  remaining: number;
  retryAfterSeconds: number;
  omitRetryAfter?: boolean;
  acceptAfterMs: number;
  match?: string;
}

/** An email the Postmark emulator accepted. Times are epoch milliseconds. */
export interface SandboxEmail {
  messageId: string;
  from: string;
  to: string;
  subject: string;
  textBody?: string;
  htmlBody?: string;
  tag?: string;
  messageStream: string;
  metadata: Record<string, string>;
  /** The behaviour chosen by the address (see docs/SANDBOX.md). */
  behaviour: string;
  createdAt: number;
  /** The latest event type visible now (`Delivered`, `Bounced`, ...), or `Sent` before any. */
  status: string;
  /** Events visible now, oldest first. */
  events: Array<{ type: string; at: number; bounceId?: number; bounceType?: string }>;
}

/** An SMS the Twilio emulator created. Times are epoch milliseconds. */
export interface SandboxSms {
  sid: string;
  accountSid: string;
  to: string;
  from: string | null;
  messagingServiceSid: string | null;
  body: string;
  behaviour: string;
  createdAt: number;
  /** Set for scheduled messages. */
  sendAt: number | null;
  /** Twilio status now (`queued`, `sent`, `delivered`, ...). */
  status: string;
  /** Since when (epoch ms) the message has had its status now: its delivery time once `delivered`. */
  statusSince: number;
  errorCode: number | null;
  dateSent: number | null;
}

/** One API request the sandbox received (control routes under `/__sandbox/` are not recorded). */
export interface SandboxRequest {
  provider: 'postmark' | 'twilio' | 'sendgrid' | 'mailgun' | 'ses' | 'aws-sms' | 'sqs' | 'infrai';
  operation: Operation;
  method: string;
  /** Path without the query string. */
  path: string;
  /** Path with the query string. */
  url: string;
  /** Email or phone number the request is about, when known. */
  recipient?: string;
  /** The JSON body of a search whose question is in its body (Mailgun's Logs API), as sent. */
  search?: unknown;
  /** HTTP status answered; null while pending or when the request was never answered. */
  status: number | null;
  outcome: 'pending' | 'answered' | 'hang' | 'dropped';
  /** The injected fault that applied, if any. */
  fault?: FaultMode;
  at: number;
}

export interface SandboxOptions {
  /** Port to listen on; 0 (the default) picks a free one. */
  port?: number;
  /** Interface to listen on (default `127.0.0.1`). */
  host?: string;
  /** Fastify logger option (default off). */
  logger?: boolean | object;
  /** How long after sending Postmark's details and search do not show a message yet (default 300 ms). */
  indexLagMs?: number;
  /** Delay of every answer for `slow` recipients (default 1500 ms). */
  slowMs?: number;
  /** Emails and SMS kept per provider; the oldest are dropped beyond it (default 100,000). */
  maxMessages?: number;
  /** Requests kept in the request log (default 100,000). */
  maxRequests?: number;
  /** Where the webhook outbox's fault rates draw from (default `Math.random`): a seeded run draws the same. */
  webhookRandom?: () => number;
}

/** A running sandbox serving both emulated APIs on one port. */
export interface Sandbox {
  /** Base URL for POSTMARK_API_URL and TWILIO_API_URL, e.g. `http://127.0.0.1:4010`. */
  readonly url: string;
  readonly port: number;
  /** Stops listening and drops open connections (including hanging ones); safe to call twice. */
  close(): Promise<void>;
  /** Every email accepted, oldest first. */
  emails(): SandboxEmail[];
  /** Every SMS created, oldest first. */
  sms(): SandboxSms[];
  /** Every API request seen, oldest first. */
  requests(): SandboxRequest[];
  /** The feed providers' events queues (SES, AWS SMS): messages still in each, and deleted so far. */
  feedQueues(): { name: string; messages: number; deleted: number; redriven: number }[];
  /** Adds a fault; returns it with its id. */
  injectFault(fault: Fault): ActiveFault;
  /** Faults still waiting for requests. */
  faults(): ActiveFault[];
  clearFaults(): void;
  /** Starts pushing webhooks to Herald (undefined: stops). */
  configureWebhooks(target: WebhookTarget | undefined): void;
  /** Faults for every message's webhooks, as probabilities. */
  setWebhookFaults(rates: WebhookFaultRates): void;
  /** Every webhook pushed or dropped so far, oldest first. */
  webhookDeliveries(): WebhookDeliveryRecord[];
  /** Where webhooks are pushed, with the secrets; undefined when they are not. */
  webhookTarget(): WebhookTarget | undefined;
  /** The fault rates set by `setWebhookFaults`. */
  webhookFaults(): WebhookFaultRates;
  /** Forgets messages, requests, faults, planned webhooks and flaky-attempt counters. */
  reset(): void;
}
