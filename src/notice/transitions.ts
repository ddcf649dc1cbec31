/**
 * The notice state machine as one table: every way a notice's state may change, by name, with
 * the states it may start from and the state it ends in. The transition script enforces `from`
 * atomically (src/store/lua/transition-8.lua); nothing else writes notice state.
 *
 * `marks` names the log entry that records the change, so that replaying a decision log moves a
 * notice through the same table (the chaos invariants do exactly that). A terminal state's
 * `notice.completed` follows its marking entry, or is the marking entry itself.
 */
import { UNDECIDED_STATES, type NoticeState } from './states.js';

export interface Transition {
  /** The states the notice may be in; '*' for a transition that records without moving. */
  readonly from: readonly NoticeState[] | '*';
  /** The state it ends in; absent when the state stays as it is. */
  readonly to?: NoticeState;
  /** The entry type that records the move (with `to`); `notice.completed` when it is the only one. */
  readonly marks?: string;
  /**
   * The write must survive a failover before what follows it happens: it waits for a
   * replica where the master has one (src/store/replicas.ts), and is counted under this name
   * when it goes ahead unreplicated.
   */
  readonly replicated?: ReplicatedWrite;
}

/** The writes that wait for a replica: the notice's creation, and a provider send about to leave. */
export type ReplicatedWrite = 'accept' | 'email_send' | 'sms_send';

/** The states a step that needs the notice's content runs from: a send, or a search for an SMS in doubt. */
export const NEEDS_CONTENT: readonly NoticeState[] = ['accepted', 'email_sending', 'sms_pending', 'sms_sending'];

export const TRANSITIONS = {
  /** `POST /v1/notices` stores the notice (createNotice-10.lua, not transition-8.lua). */
  accept: { from: [], to: 'accepted', marks: 'notice.accepted', replicated: 'accept' },

  /** An email attempt starts; a retry of an unsettled attempt starts from email_sending. */
  startEmailAttempt: { from: ['accepted', 'email_sending'], to: 'email_sending', marks: 'email.requested', replicated: 'email_send' },
  /** Postmark accepted the email (or a search found the message of an attempt in doubt). */
  recordEmailAccepted: { from: ['email_sending'], to: 'email_sent', marks: 'email.accepted' },
  /**
   * An email attempt ended without acceptance: a provider error settles it, in doubt or not, or
   * the provider's event feed establishes that it never arrived (`email.not_arrived`: no longer
   * in doubt, so the next attempt goes ahead without a search).
   */
  settleEmailAttempt: { from: ['email_sending'] },
  /** An email status read is recorded, whatever the notice is doing (late observations say so). */
  observeEmail: { from: '*' },
  /** The email was confirmed delivered before any fallback: the notice ends. */
  confirmEmailDelivered: { from: UNDECIDED_STATES, to: 'email_delivered', marks: 'notice.completed' },
  /** The email was confirmed delivered after the fallback, before its SMS left: the SMS is canceled. */
  cancelSmsForLateDelivery: { from: ['sms_pending'], to: 'email_delivered', marks: 'notice.completed' },

  /** The fallback to SMS is decided, at most once. */
  decideFallback: { from: UNDECIDED_STATES, to: 'sms_pending', marks: 'fallback.decided' },
  /** The fallback is decided but SMS may not be used: the notice ends. */
  blockFallback: { from: UNDECIDED_STATES, to: 'blocked', marks: 'fallback.blocked' },

  /** An SMS attempt starts; a retry of an unsettled attempt starts from sms_sending. */
  startSmsAttempt: { from: ['sms_pending', 'sms_sending'], to: 'sms_sending', marks: 'sms.requested', replicated: 'sms_send' },
  /** Twilio accepted the SMS (or a search found the message of an attempt in doubt). */
  recordSmsAccepted: { from: ['sms_sending'], to: 'sms_sent', marks: 'sms.accepted' },
  /** An SMS attempt ended without acceptance and may be tried again. */
  settleSmsAttempt: { from: ['sms_sending'] },
  /**
   * The search for an SMS in doubt reached its bound and the provider still could not tell
   * whether it has the message (AWS SMS's feed never showed it): Herald stops searching and
   * never sends again. The notice stays `sms_sending`, out of the due index, with
   * `sms.unconfirmed` (`sms_send_unconfirmed`) saying so, and retires as a settled one.
   */
  leaveSmsInDoubt: { from: ['sms_sending'] },
  /** Twilio refused the SMS itself (an opted-out number, an invalid one): the notice ends. */
  rejectSms: { from: ['sms_sending'], to: 'sms_failed', marks: 'notice.completed' },
  /** An SMS status read is recorded. */
  observeSms: { from: ['sms_sent'] },
  /** The SMS was confirmed delivered: the notice ends. */
  confirmSmsDelivered: { from: ['sms_sent'], to: 'sms_delivered', marks: 'notice.completed' },
  /** The SMS is undeliverable: the notice ends. */
  failSms: { from: ['sms_sent'], to: 'sms_failed', marks: 'notice.completed' },

  /** Canceled through the API before anything was handed to a provider. */
  cancel: { from: ['accepted'], to: 'canceled', marks: 'notice.canceled' },
  /** Herald cannot go on: the content a send needs is gone or cannot be opened. */
  fail: { from: NEEDS_CONTENT, to: 'failed', marks: 'notice.failed' },

  /**
   * An entry that changes nothing: a late acceptance, a suppression, the content purge, the
   * reconciler's note. Guards (`eq`) still hold, and the state may be narrowed by the caller.
   */
  annotate: { from: '*' },
} as const satisfies Record<string, Transition>;

export type TransitionName = keyof typeof TRANSITIONS;

/** The transitions a log entry may record: those it marks, by type (and by `state` for `notice.completed`). */
export function transitionsMarkedBy(type: string, state?: string): TransitionName[] {
  return (Object.entries(TRANSITIONS) as [TransitionName, Transition][])
    .filter(([, t]) => t.marks === type && (type !== 'notice.completed' || t.to === state))
    .map(([name]) => name);
}
