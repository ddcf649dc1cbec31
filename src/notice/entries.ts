/**
 * The decision log's vocabulary: one member per entry type, with the fields that type carries
 * (flat, as the log stores them), and a constructor for each entry a step writes. Readers narrow
 * on `type`. The list of entry types in docs/API.md is kept in step with `ENTRY_TYPES` by a test.
 */
import type { Channel } from '../providers/types.js';
import type { ProviderError } from '../providers/types.js';
import type { BlockReason, FailureReason, FallbackReason, NoticeState, PolicyOutcome, UnconfirmedReason } from './states.js';

type Cost = { currency: string; total: number; byChannel: { email: number; sms: number } };

export interface NoticeAccepted {
  type: 'notice.accepted';
  /** The tenant of the key that created the notice (absent in entries written before tenants: `default`). */
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

export interface PolicyChecked {
  type: 'policy.checked';
  channel: Channel;
  outcome: PolicyOutcome;
  policyVersion: number;
  rulesVersion?: string | null;
  region?: string | null;
  /** What a replay of an SMS decision needs, so that the decision's own entries suffice. */
  recipientId?: string;
  hasPhone?: boolean;
  complianceDeadline?: string;
}

export interface Requested {
  type: 'email.requested' | 'sms.requested';
  attemptId: string;
  idempotencyKey: string | undefined;
  provider: string;
  attempt: number;
  retryOf?: string;
}

export interface Accepted {
  type: 'email.accepted' | 'sms.accepted';
  attemptId: string;
  providerMessageId: string;
  providerStatus?: string;
  /** Set when a search for a send in doubt found the message. */
  resolvedBy?: 'provider_search';
  /** The notice had moved on when the acceptance arrived. */
  late?: true;
}

/**
 * An email attempt in doubt that never reached the provider, as its event feed established (SES):
 * no event of Herald's key `feedAbsenceMs` after the attempt started, the feed read to its end
 * since. It settles the attempt; the email is sent once more under a new attempt.
 */
export interface EmailNotArrived {
  type: 'email.not_arrived';
  attemptId: string;
  provider: string;
  attemptStartedAt: string;
  /** HERALD_FEED_ABSENCE_MS: how long after the attempt the feed showed no event of its key. */
  feedAbsenceMs: number;
}

export interface EmailObserved {
  type: 'email.observed';
  attemptId: string | undefined;
  providerStatus: string | null;
  status: string;
  observedAt: string;
  /** When this check was planned for (a planned check; the deadline's own read has none): how late it ran is `observedAt − plannedAt`. */
  plannedAt?: string;
  nextCheckAt: string | null;
  deadline: string;
  engagement?: string[];
  bounceType?: string;
  late?: true;
  /** The deadline's own read, when there was no message to read. */
  note?: 'email_not_sent' | 'email_send_unconfirmed';
  /** Where the status came from: a status read Herald made, or the provider's webhook. */
  source: ObservationSource;
  /** A webhook's delivery: the planned checks of the channel it made unnecessary. */
  checksSaved?: number;
  /** A webhook's: the provider's identity of the event (the notice records each event once). */
  event?: string;
}

/** An observation's origin: Herald's own status read (`poll`) or the provider's push (`webhook`). */
export type ObservationSource = 'poll' | 'webhook';

export interface SmsObserved {
  type: 'sms.observed';
  attemptId: string | undefined;
  providerStatus: string;
  status: string;
  observedAt: string;
  /** When this check was planned for: how late it ran is `observedAt − plannedAt`. */
  plannedAt?: string;
  nextCheckAt: string | null;
  errorCode?: number | string;
  /** As on `email.observed`. */
  source: ObservationSource;
  checksSaved?: number;
  event?: string;
}

export interface ProviderErrorEntry {
  type: 'provider.error';
  channel: Channel;
  attemptId: string | undefined;
  operation: string;
  kind: ProviderError['kind'];
  retryable: boolean;
  providerTimeoutMs: number;
  httpStatus?: number;
  providerCode?: number;
  retryAfterMs?: number;
  retryAfterClampedFromMs?: number;
}

interface DecisionCommon {
  deadline: string;
  decidedAt: string;
  lastEmailStatus: string | null;
}

export interface FallbackDecided extends DecisionCommon {
  type: 'fallback.decided';
  reason: FallbackReason;
  smsIdempotencyKey: string;
  sendNotBefore?: string;
  timingRule?: string;
  complianceDeadline?: string;
}

export interface FallbackBlocked extends DecisionCommon {
  type: 'fallback.blocked';
  /** Why SMS may not be used. */
  reason: BlockReason;
  /** Why the fallback was decided. */
  fallbackReason: FallbackReason;
}

export interface SmsCanceled {
  type: 'sms.canceled';
  reason: 'email_delivered_late';
}

export interface SmsUnconfirmed {
  type: 'sms.unconfirmed';
  attemptId: string | undefined;
  reason: UnconfirmedReason;
  lastStatus: string | null;
  checks: number;
  /** `sms_send_unconfirmed`: the bound the search for the SMS in doubt ran to (its attempt's start + the SMS plan's span). */
  searchedUntil?: string;
}

export interface SuppressionAdded {
  type: 'suppression.added';
  channel: Channel;
  source: string;
  reason: string;
}

export interface NoticeCanceled {
  type: 'notice.canceled';
  by: 'api';
}

export interface NoticeFailed {
  type: 'notice.failed';
  reason: FailureReason;
  stateBefore: NoticeState;
  content: 'gone' | 'unreadable';
  channel: Channel;
  attemptInDoubt?: true;
}

export interface NoticeReconciled {
  type: 'notice.reconciled';
  state: NoticeState;
  stateBefore: NoticeState;
  entriesWritten: number;
}

export interface ContentPurged {
  type: 'content.purged';
  purgedAt: string;
}

export interface NoticeCompleted {
  type: 'notice.completed';
  state: NoticeState;
  cost?: Cost;
  checks?: { email: number; sms: number };
}

/** One decision-log entry as Herald writes it: a type and flat fields, never nested. */
export type LogEntry =
  | NoticeAccepted
  | PolicyChecked
  | Requested
  | Accepted
  | EmailNotArrived
  | EmailObserved
  | SmsObserved
  | ProviderErrorEntry
  | FallbackDecided
  | FallbackBlocked
  | SmsCanceled
  | SmsUnconfirmed
  | SuppressionAdded
  | NoticeCanceled
  | NoticeFailed
  | NoticeReconciled
  | ContentPurged
  | NoticeCompleted;

export type EntryType = LogEntry['type'];

/** A decision-log entry as read back: with its stream `id`, `seq`, `noticeId` and `at`. */
export type StoredEntry = LogEntry & { id: string; seq: number; noticeId: string; at: string };

/** Every entry type, in the order of a notice's life. */
export const ENTRY_TYPES = [
  'notice.accepted',
  'policy.checked',
  'email.requested',
  'email.accepted',
  'email.observed',
  'provider.error',
  'email.not_arrived',
  'fallback.decided',
  'fallback.blocked',
  'sms.requested',
  'sms.accepted',
  'sms.observed',
  'sms.canceled',
  'sms.unconfirmed',
  'suppression.added',
  'notice.canceled',
  'notice.failed',
  'notice.reconciled',
  'content.purged',
  'notice.completed',
] as const satisfies readonly EntryType[];

/** Narrows an entry to one type. */
export function isEntry<T extends EntryType>(entry: { type: string }, type: T): entry is Extract<StoredEntry, { type: T }> {
  return entry.type === type;
}

/** `provider.error`, with the Retry-After Herald followed and what the provider asked for when it was clamped. */
export function providerErrorEntry(
  channel: Channel,
  attemptId: string | undefined,
  operation: string,
  error: ProviderError,
  providerTimeoutMs: number,
): ProviderErrorEntry {
  return {
    type: 'provider.error',
    channel,
    attemptId,
    operation,
    kind: error.kind,
    retryable: error.retryable,
    providerTimeoutMs,
    httpStatus: error.httpStatus,
    providerCode: error.providerCode,
    retryAfterMs: error.retryAfterMs,
    retryAfterClampedFromMs: error.retryAfterClampedFromMs,
  };
}
