/** The notice state machine's states, exactly as the API and the log spell them. */
export const STATES = [
  'accepted',
  'email_sending',
  'email_sent',
  'email_delivered',
  'sms_pending',
  'sms_sending',
  'sms_sent',
  'sms_delivered',
  'sms_failed',
  'blocked',
  'canceled',
  'failed',
] as const;

export type NoticeState = (typeof STATES)[number];

export const TERMINAL_STATES: readonly NoticeState[] = ['email_delivered', 'sms_delivered', 'sms_failed', 'blocked', 'canceled', 'failed'];

/** States from which the fallback may still be decided: the email is not yet confirmed. */
export const UNDECIDED_STATES: readonly NoticeState[] = ['accepted', 'email_sending', 'email_sent'];

export function isTerminal(state: NoticeState): boolean {
  return TERMINAL_STATES.includes(state);
}

/** Why the fallback to SMS was decided. */
export type FallbackReason = 'email_deadline_elapsed' | 'email_bounced' | 'email_rejected' | 'email_suppressed' | 'email_consent_missing';

/** Every fallback reason, in the order a notice may meet them. */
export const FALLBACK_REASONS: readonly FallbackReason[] = [
  'email_deadline_elapsed',
  'email_bounced',
  'email_rejected',
  'email_suppressed',
  'email_consent_missing',
];

/** Why a decided fallback could not use SMS (`fallback.blocked`). */
export type BlockReason = 'no_phone' | 'sms_consent_missing' | 'sms_suppressed' | 'region_blocked';

/** Why Herald could not go on with a notice (`notice.failed`): its content is gone or cannot be opened. */
export type FailureReason = 'content_unavailable';

/**
 * Why Herald stopped following an SMS without a final status (`sms.unconfirmed`): its checks ran
 * out (`sms_plan_ended`, the notice stays `sms_sent`), or a send in doubt that the provider could
 * not tell about was not found before the search's bound (`sms_send_unconfirmed`, the notice
 * stays `sms_sending`).
 */
export type UnconfirmedReason = 'sms_plan_ended' | 'sms_send_unconfirmed';

/** Outcome of a policy check (`policy.checked`). */
export type PolicyOutcome = 'allowed' | 'no_consent' | 'suppressed' | 'region_blocked' | 'no_address';
