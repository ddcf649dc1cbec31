/**
 * The provider contract the domain depends on. Adapters (postmark.ts, twilio.ts) implement it
 * with the official SDKs; the domain imports only these types.
 */
import type { SuppressionSource } from '../store/suppressions.js';

/** Normalized delivery status, as `*.observed` entries record it. */
export type NormalizedStatus = 'pending' | 'deferred' | 'delivered' | 'bounced' | 'failed' | 'unknown';

/** How a failed provider call is classified (the `kind` of a `provider.error` entry). */
export type ProviderErrorKind = 'timeout' | 'rate_limited' | 'server_error' | 'rejected';

export type Channel = 'email' | 'sms';

/**
 * A provider call that did not produce an answer Herald can use. `retryable` is false only for
 * `rejected`. `retryAfterMs` is set when the provider said when to come back (HTTP Retry-After).
 * `suppressed` marks a rejection because the address is on the provider's suppression list
 * (Postmark 406 inactive recipient, Twilio 21610 opt-out).
 */
export class ProviderError extends Error {
  readonly kind: ProviderErrorKind;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  /** What the provider asked for, when `retryAfterMs` was clamped to HERALD_MAX_RETRY_AFTER. */
  readonly retryAfterClampedFromMs: number | undefined;
  readonly httpStatus: number | undefined;
  readonly providerCode: number | undefined;
  readonly suppressed: boolean;
  constructor(
    message: string,
    opts: {
      kind: ProviderErrorKind;
      retryAfterMs?: number;
      retryAfterClampedFromMs?: number;
      httpStatus?: number;
      providerCode?: number;
      suppressed?: boolean;
      cause?: unknown;
    },
  ) {
    super(message, { cause: opts.cause });
    this.name = 'ProviderError';
    this.kind = opts.kind;
    this.retryable = opts.kind !== 'rejected';
    this.retryAfterMs = opts.retryAfterMs;
    this.retryAfterClampedFromMs = opts.retryAfterClampedFromMs;
    this.httpStatus = opts.httpStatus;
    this.providerCode = opts.providerCode;
    this.suppressed = opts.suppressed ?? false;
  }

  /**
   * This error with its Retry-After bounded by `maxMs` (HERALD_MAX_RETRY_AFTER): an answer
   * asking for a week, or for more than a date can hold, must not park a notice or a queue past
   * every deadline. The copy keeps what the provider asked for, for the log entry.
   */
  withRetryAfterAtMost(maxMs: number): ProviderError {
    const asked = this.retryAfterMs;
    if (asked === undefined || asked <= maxMs) return this;
    return new ProviderError(this.message, {
      kind: this.kind,
      retryAfterMs: maxMs,
      retryAfterClampedFromMs: Number.isFinite(asked) ? asked : Number.MAX_SAFE_INTEGER,
      httpStatus: this.httpStatus,
      providerCode: this.providerCode,
      suppressed: this.suppressed,
      cause: this.cause,
    });
  }
}

export interface EmailMessage {
  to: string;
  subject: string;
  text?: string;
  html?: string;
  /** Herald's idempotency key for this send; carried in provider metadata so an in-doubt send can be found. */
  idempotencyKey: string;
  /** Extra provider metadata (≤ 9 more fields for Postmark; names ≤ 20 chars, values ≤ 80). */
  metadata?: Record<string, string>;
}

export interface SendResult {
  providerMessageId: string;
  /** Raw provider status at acceptance, when the provider gives one (Twilio: `queued`). */
  providerStatus?: string;
}

export interface StatusObservation {
  /** Raw provider status, as the provider spelled it (Postmark: event types joined, e.g. `Sent+Opened`). */
  providerStatus: string;
  status: NormalizedStatus;
  /** Engagement signals seen (`opened`, `clicked`); never proof of delivery. */
  engagement: string[];
  /** Provider error code for failures (Twilio `error_code`), when there is one. */
  errorCode?: number;
  /** Bounce type for Postmark bounces (HardBounce, SoftBounce, ...). */
  bounceType?: string;
  /** True when the provider says the address is now suppressed (hard bounce, spam complaint, STOP). */
  suppressed?: boolean;
  /** The `source` Herald's suppression list records for `suppressed`, when the provider names its own; Postmark's bounce / unsubscribe when unset. */
  suppressionSource?: SuppressionSource;
}

export interface EmailProvider {
  readonly name: string;
  /**
   * Set by a provider that has no message search but whose event feed shows every message it
   * took (SES): an attempt whose key the feed has not shown this long after the attempt started,
   * the feed read to its end since, never arrived, and `findByIdempotencyKey` then answers null.
   * The engine records such an attempt `email.not_arrived` and sends again under a new attempt;
   * before, it keeps the attempt in doubt and looks again no later than then.
   */
  readonly feedAbsenceMs?: number;
  /** Closes the adapter's connections (its keep-alive sockets); the worker calls it at shutdown. */
  close?(): void;
  /** An authenticated call that sends nothing (`herald doctor`); resolves with what the provider said of the account. Throws ProviderError. */
  verify(): Promise<string>;
  /** Hand one email to the provider. Throws ProviderError. */
  send(message: EmailMessage): Promise<SendResult>;
  /**
   * Read the delivery status of an accepted message. `scope` says to whom and since when it was
   * sent, for providers whose reads go through a search (SendGrid's Email Logs know a message by
   * an ID that only starts with the one the send answered). Throws ProviderError.
   */
  status(providerMessageId: string, scope?: MessageScope): Promise<StatusObservation>;
  /**
   * Find a message sent earlier with this idempotency key (a send in doubt). `window` bounds the
   * search for providers searched by recipient and time, and says how long ago the last attempt
   * started, for providers whose search may not list a message yet. `message` is that send as it
   * was made, for a provider whose send is idempotent by key (Infrai): it finds by replaying the
   * send, which returns the original message instead of a second one. Null only when the
   * provider can say no such message exists; when it cannot tell yet, it throws. Throws ProviderError.
   */
  findByIdempotencyKey(idempotencyKey: string, to: string, window?: SearchWindow, message?: EmailMessage): Promise<SendResult | null>;
}

/** Where a send in doubt may be: no attempt started before `since` (ms); the last one started `lastAttemptAgeMs` ago. */
export interface SearchWindow {
  since: number;
  lastAttemptAgeMs: number;
}

/** Where to look for a message: its recipient, and a time (ms, Herald's clock) it was not sent before. */
export interface MessageScope {
  to: string;
  since: number;
}

export interface SmsMessage {
  to: string;
  body: string;
  /** Sender number; the adapter's configured default when absent. */
  from?: string;
  /** Herald's idempotency key of this SMS: carried as metadata where the provider has some (AWS SMS `Context`), or as the send's own key (Infrai). */
  idempotencyKey?: string;
}

export interface SmsProvider {
  readonly name: string;
  /** Closes the adapter's connections (its keep-alive sockets); the worker calls it at shutdown. */
  close?(): void;
  /** An authenticated call that sends nothing (`herald doctor`); resolves with what the provider said of the account. Throws ProviderError. */
  verify(): Promise<string>;
  /** Hand one SMS to the provider. Throws ProviderError. */
  send(message: SmsMessage): Promise<SendResult>;
  /** Read the status of an accepted SMS. Throws ProviderError. */
  status(providerMessageId: string): Promise<StatusObservation>;
  /**
   * Messages to `to` created at or after `since` (ms) whose body equals `body`: how a send in
   * doubt is found. Follows pages. `message` is the send in doubt as it was made: a provider that
   * carries Herald's key (AWS SMS) looks for `message.idempotencyKey` instead, and one whose send
   * is idempotent by key (Infrai) finds by replaying it. Throws ProviderError, also when it
   * cannot tell (never an empty answer then).
   */
  findSince(to: string, since: number, body: string, message?: SmsMessage): Promise<SendResult[]>;
  /** Cancel a scheduled message. Throws ProviderError. */
  cancel(providerMessageId: string): Promise<void>;
}
