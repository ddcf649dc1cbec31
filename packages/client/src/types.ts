/**
 * What Herald's API takes and answers, written out by hand so that the package needs nothing of
 * the server to type-check: the root's tests hold these types equal to the API's own schemas.
 */

/** A notice's state, as the API and the decision log spell it. */
export type NoticeState =
  | 'accepted'
  | 'email_sending'
  | 'email_sent'
  | 'email_delivered'
  | 'sms_pending'
  | 'sms_sending'
  | 'sms_sent'
  | 'sms_delivered'
  | 'sms_failed'
  | 'blocked'
  | 'canceled'
  | 'failed';

/** Why the fallback to SMS was decided. */
export type FallbackReason = 'email_deadline_elapsed' | 'email_bounced' | 'email_rejected' | 'email_suppressed' | 'email_consent_missing';

/** A channel Herald sends on. */
export type Channel = 'email' | 'sms';

/** The body of `POST /v1/notices`. */
export interface CreateNoticeBody {
  recipient: {
    /** 1–128 characters of `[A-Za-z0-9._:@-]`. */
    id: string;
    email: string;
    /** E.164, e.g. `+819012345678`. */
    phone?: string;
    /** ISO 3166-1 alpha-2, or `*`. */
    region?: string;
  };
  /** 1–64 characters of `[A-Za-z0-9._-]`. */
  category: string;
  content: { subject: string; text?: string; html?: string; sms?: string };
  /** ISO 8601; or `deadlineInSeconds`. At most 366 days ahead. */
  deadline?: string;
  deadlineInSeconds?: number;
  /** The time by which the person must have been told, on any channel. */
  complianceDeadline?: string;
  policy?: { firstCheckAfterSeconds?: number; minCheckIntervalSeconds?: number };
  /** At most 20 string fields; names of 1–64 characters from `[A-Za-z0-9_.:-]`, values of at most 256. */
  metadata?: Record<string, string>;
}

/** The first answer to a create (202). */
export interface Accepted {
  id: string;
  state: 'accepted';
  deadline: string;
  /** Planned email status checks; the last is the deadline itself. */
  plannedChecks: string[];
}

/** A notice as `GET /v1/notices/:id` shows it. */
export interface NoticeView {
  id: string;
  /** The tenant of the key that created it. */
  tenant?: string;
  state: NoticeState;
  category: string;
  recipientId: string;
  createdAt: string;
  deadline: string;
  policyVersion: number;
  plannedChecks: string[];
  email: { status: string | null; providerMessageId: string | null; lastObservedAt: string | null; nextCheckAt: string | null };
  fallback: { reason: FallbackReason; decidedAt: string | null } | null;
  sms: { status: string | null; providerMessageId: string | null } | null;
}

/**
 * What `createNotice` resolves with. `replayed: false`: the notice was made now (202). `replayed:
 * true`: the idempotency key was already used with the same body (200, `Idempotent-Replayed`), and
 * `notice` is that notice as it is now; this is also what a create retried after a lost answer
 * gets. Either way `idempotencyKey` is the key the request carried (given, or generated).
 */
export type CreateNoticeResult =
  (Accepted & { replayed: false; idempotencyKey: string }) | { replayed: true; id: string; idempotencyKey: string; notice: NoticeView };

/** One notice of `createNotices`: a create's body and, optionally, its idempotency key. */
export type BatchNotice = CreateNoticeBody & { idempotencyKey?: string };

/** The error body of a refused request: a stable snake_case code, a message, and details (e.g. the fields at fault). */
export interface ApiErrorBody {
  code: string;
  message: string;
  details?: unknown;
}

/** What became of one notice of a batch, at its `index` in the input. */
export type BatchItemResult =
  | ({ index: number; outcome: 'accepted'; status: 202; idempotencyKey: string } & Accepted)
  | { index: number; outcome: 'replayed'; status: 200; id: string; state: NoticeState | undefined; idempotencyKey: string }
  | { index: number; outcome: 'refused'; status: number; error: ApiErrorBody; idempotencyKey: string };

/** The filters of `GET /v1/notices` (those of /admin/notices). */
export interface NoticeFilters {
  state?: NoticeState;
  /** The fallback reason. */
  reason?: FallbackReason;
  category?: string;
  recipientId?: string;
  /** The recipient's email address, any case: for support, found through its HMAC alone. */
  email?: string;
  /** The recipient's phone, E.164: for support, found through its HMAC alone. */
  phone?: string;
  id?: string;
  /** Created at or after (inclusive). */
  from?: Date | string;
  /** Created before (exclusive). */
  to?: Date | string;
  /** `late`: an action overdue; `in_doubt`: a send in doubt. */
  view?: 'late' | 'in_doubt';
}

/** One page of notices, newest first; `nextCursor` is null at the end. A page may hold fewer than `limit` while more follow. */
export interface NoticePage {
  notices: NoticeView[];
  nextCursor: string | null;
}

/** A manual suppression to add. */
export interface NewSuppression {
  channel: Channel;
  address: string;
  reason: string;
}

/** A suppressed address, as the list keeps it (email lower-case, phone E.164). */
export interface Suppression {
  channel: string;
  address: string;
  reason: string;
  /** `manual`, or what added it (e.g. `postmark_hard_bounce`, `twilio_opt_out`). */
  source: string;
  noticeId?: string;
  createdAt: string;
}

/** The body of `PUT /v1/recipients/:id/policy`. */
export interface RecipientPolicyBody {
  consent: { email: boolean; sms: boolean };
  region?: string;
}

/** A recipient's policy, at its version (0: none was ever set). */
export interface RecipientPolicy {
  version: number;
  consent: { email: boolean; sms: boolean };
  region?: string;
  updatedAt?: string;
}

/** `GET /v1/stats`: the notices created in the UTC hours overlapping a period. */
export interface Stats {
  from: string;
  to: string;
  /** The UTC hours counted. */
  window: { from: string; to: string };
  notices: number;
  byState: Record<string, number>;
  fallbackByReason: Record<string, number>;
  /** A fraction, 0–1. */
  fallbackRate: number;
  checksPerNotice: number;
  estimatedSpend: { currency: string; total: number; byChannel: { email: number; sms: number } };
}

/** An event Herald can POST to a caller's endpoint. */
export type CallerEventType = 'notice.completed' | 'fallback.decided' | 'notice.failed';

/** The body of `POST /v1/event-endpoints`. */
export interface NewEventEndpoint {
  /** `https://` in production. */
  url: string;
  events: CallerEventType[];
}

/** An event endpoint, without its secret. */
export interface EventEndpoint {
  id: string;
  url: string;
  events: CallerEventType[];
  createdAt: string;
  /** Set once the endpoint no longer receives events: why, and since when. */
  disabled: { reason: string; at: string } | null;
  lastDeliveredAt: string | null;
  failingSince: string | null;
}

/** An endpoint just made: with its `whsec_` secret, shown this once (verify deliveries with it, per Standard Webhooks). */
export type CreatedEventEndpoint = EventEndpoint & { secret: string };

/** One delivery attempt of an event to an endpoint. */
export interface EventDelivery {
  eventId: string;
  type: CallerEventType;
  noticeId: string;
  outcome: 'delivered' | 'failed' | 'gone' | 'given_up' | 'dropped';
  /** The endpoint's HTTP status; null when it did not answer. */
  status: number | null;
  attempts: number;
  error: string | null;
  at: string;
}
