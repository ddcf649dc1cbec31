/**
 * The decision log of a notice (`GET /v1/notices/:id/events`): one member per entry type with the
 * fields that type carries, flat. Narrow on `type`.
 */
import type { Channel, FallbackReason, NoticeState } from './types.js';

type Cost = { currency: string; total: number; byChannel: { email: number; sms: number } };

/** Where an observation came from: Herald's own status read, or the provider's webhook. */
export type ObservationSource = 'poll' | 'webhook';

/** The notice stored: its plan, expected cost and idempotency key. */
export interface NoticeAcceptedEntry {
  type: 'notice.accepted';
  tenant?: string;
  category: string;
  recipientId: string;
  policyVersion: number;
  contentSha256: string;
  deadline: string;
  complianceDeadline?: string;
  contentExpiresAt: string;
  providerTimeoutMs: number;
  pollPlan: string[];
  firstCheckAfterMs: number;
  minCheckIntervalMs: number;
  pollFloorMs: number;
  expectedProviderCalls: { email: number };
  expectedCost: { email: Cost; smsIfFallback: Cost | null };
  idempotencyKey?: string;
  hasPhone: boolean;
  metadata?: Record<string, string>;
}

/** A channel checked against the recipient policy, suppressions and rules. */
export interface PolicyCheckedEntry {
  type: 'policy.checked';
  channel: Channel;
  outcome: 'allowed' | 'no_consent' | 'suppressed' | 'region_blocked' | 'no_address';
  policyVersion: number;
  rulesVersion?: string | null;
  region?: string | null;
  recipientId?: string;
  hasPhone?: boolean;
  complianceDeadline?: string;
}

/** A send attempt about to leave Herald. */
export interface RequestedEntry {
  type: 'email.requested' | 'sms.requested';
  attemptId: string;
  idempotencyKey: string | undefined;
  provider: string;
  attempt: number;
  retryOf?: string;
}

/** The provider took a send; its message ID. */
export interface ProviderAcceptedEntry {
  type: 'email.accepted' | 'sms.accepted';
  attemptId: string;
  providerMessageId: string;
  providerStatus?: string;
  resolvedBy?: 'provider_search';
  late?: true;
}

/** An email attempt in doubt that the provider's event feed shows never arrived: it is sent once more. */
export interface EmailNotArrivedEntry {
  type: 'email.not_arrived';
  attemptId: string;
  provider: string;
  attemptStartedAt: string;
  feedAbsenceMs: number;
}

/** An email status read (poll) or pushed (webhook). */
export interface EmailObservedEntry {
  type: 'email.observed';
  attemptId: string | undefined;
  providerStatus: string | null;
  status: string;
  observedAt: string;
  plannedAt?: string;
  nextCheckAt: string | null;
  deadline: string;
  engagement?: string[];
  bounceType?: string;
  late?: true;
  note?: 'email_not_sent' | 'email_send_unconfirmed';
  source: ObservationSource;
  checksSaved?: number;
  event?: string;
}

/** An SMS status read (poll) or pushed (webhook). */
export interface SmsObservedEntry {
  type: 'sms.observed';
  attemptId: string | undefined;
  providerStatus: string;
  status: string;
  observedAt: string;
  plannedAt?: string;
  nextCheckAt: string | null;
  errorCode?: number | string;
  source: ObservationSource;
  checksSaved?: number;
  event?: string;
}

/** A provider call that gave no usable answer. */
export interface ProviderErrorEntry {
  type: 'provider.error';
  channel: Channel;
  attemptId: string | undefined;
  operation: string;
  kind: 'timeout' | 'rate_limited' | 'server_error' | 'rejected';
  retryable: boolean;
  providerTimeoutMs: number;
  httpStatus?: number;
  providerCode?: number;
  retryAfterMs?: number;
  retryAfterClampedFromMs?: number;
}

/** The fallback to SMS, decided once, and why. */
export interface FallbackDecidedEntry {
  type: 'fallback.decided';
  deadline: string;
  decidedAt: string;
  lastEmailStatus: string | null;
  reason: FallbackReason;
  smsIdempotencyKey: string;
  sendNotBefore?: string;
  timingRule?: string;
  complianceDeadline?: string;
}

/** A fallback decided that SMS may not carry. */
export interface FallbackBlockedEntry {
  type: 'fallback.blocked';
  deadline: string;
  decidedAt: string;
  lastEmailStatus: string | null;
  /** Why SMS may not be used. */
  reason: 'no_phone' | 'sms_consent_missing' | 'sms_suppressed' | 'region_blocked';
  /** Why the fallback was decided. */
  fallbackReason: FallbackReason;
}

/** An SMS not yet sent, canceled by a late email delivery. */
export interface SmsCanceledEntry {
  type: 'sms.canceled';
  reason: 'email_delivered_late';
}

/** Herald stopped following an SMS without a final status. */
export interface SmsUnconfirmedEntry {
  type: 'sms.unconfirmed';
  attemptId: string | undefined;
  reason: 'sms_plan_ended' | 'sms_send_unconfirmed';
  lastStatus: string | null;
  checks: number;
  searchedUntil?: string;
}

/** An address suppressed because of this notice (a hard bounce, an opt-out). */
export interface SuppressionAddedEntry {
  type: 'suppression.added';
  channel: Channel;
  source: string;
  reason: string;
}

/** The notice canceled through the API. */
export interface NoticeCanceledEntry {
  type: 'notice.canceled';
  by: 'api';
}

/** Herald cannot go on: the content is gone or unreadable. */
export interface NoticeFailedEntry {
  type: 'notice.failed';
  reason: 'content_unavailable';
  stateBefore: NoticeState;
  content: 'gone' | 'unreadable';
  channel: Channel;
  attemptInDoubt?: true;
}

/** The reconciler drove an overdue notice forward. */
export interface NoticeReconciledEntry {
  type: 'notice.reconciled';
  state: NoticeState;
  stateBefore: NoticeState;
  entriesWritten: number;
}

/** The notice's content deleted. */
export interface ContentPurgedEntry {
  type: 'content.purged';
  purgedAt: string;
}

/** The notice ended: its final state, checks and cost. */
export interface NoticeCompletedEntry {
  type: 'notice.completed';
  state: NoticeState;
  cost?: Cost;
  checks?: { email: number; sms: number };
}

/** One entry of the decision log as Herald wrote it, before what reading it back adds. */
export type LogEntry =
  | NoticeAcceptedEntry
  | PolicyCheckedEntry
  | RequestedEntry
  | ProviderAcceptedEntry
  | EmailNotArrivedEntry
  | EmailObservedEntry
  | SmsObservedEntry
  | ProviderErrorEntry
  | FallbackDecidedEntry
  | FallbackBlockedEntry
  | SmsCanceledEntry
  | SmsUnconfirmedEntry
  | SuppressionAddedEntry
  | NoticeCanceledEntry
  | NoticeFailedEntry
  | NoticeReconciledEntry
  | ContentPurgedEntry
  | NoticeCompletedEntry;

/** A decision-log entry as the API answers it: with its stream `id`, `seq`, `noticeId` and `at` (when Herald wrote it). */
export type NoticeEvent = LogEntry & { id: string; seq: number; noticeId: string; at: string };
