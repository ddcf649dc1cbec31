/**
 * What must hold at the end of a chaos run, checked per notice against three witnesses that do
 * not depend on each other's honesty: the notice hash (`state`, `seq`, fields), its decision
 * log, and what the provider emulators actually received.
 */
import type { SandboxEmail, SandboxSms } from '@herald/sandbox';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { NEVER_DELIVERED, SMS_REFUSED, SMS_UNCONFIRMED, type NoticePlan } from './plan.js';
import { TRANSITIONS, transitionsMarkedBy, type Transition } from '../../src/notice/transitions.js';
import { TERMINAL_STATES, UNDECIDED_STATES } from '../../src/notice/states.js';

export const TERMINAL: readonly string[] = TERMINAL_STATES;
const UNDECIDED: readonly string[] = UNDECIDED_STATES;

/** Everything known about one planned notice at the end of a run. */
export interface NoticeOutcome {
  plan: NoticePlan;
  /** The notice ID the API gave (202, or 200 on an idempotent replay); undefined if never accepted. */
  id: string | undefined;
  /** Status of the cancel request, when one was made. */
  cancelStatus?: number;
  /** True when the SMS consent withdrawal was stored (200). */
  consentWithdrawn?: boolean;
  /**
   * The notice hash as Redis holds it; null when it is gone. For a retired notice, the fields
   * the rules read, taken from its archive record: state, seq (its entry count), fallbackReason
   * and the provider message IDs.
   */
  hash: Record<string, string> | null;
  /** Redis let go of the notice: `hash` and `events` come from its archive record and the archived log. */
  retired?: boolean;
  events: StoredEntry[];
  /** Emails the emulator holds for this notice (by its `notice_id` metadata). */
  emails: SandboxEmail[];
  /** SMS the emulator holds for this notice's phone number. */
  sms: SandboxSms[];
}

export interface Violation {
  rule: string;
  notice?: string;
  detail: string;
}

/**
 * The state a log entry moves the notice to, and the states it may move it from, read from
 * Herald's own transition table (src/notice/transitions.ts): an entry that marks a transition
 * moves the notice as that transition does. A `notice.completed` that marks none confirms the
 * terminal state its transition's own entry reached. Observations and late answers change nothing.
 */
function effect(entry: StoredEntry): { to: string; from: readonly string[] } | undefined {
  if (entry.late === true) return undefined;
  const state = entry.state === undefined ? undefined : String(entry.state);
  const marked = transitionsMarkedBy(entry.type, state).map((name) => TRANSITIONS[name] as Transition);
  if (marked.length > 0) {
    const from = marked.flatMap((t): readonly string[] => (t.from === '*' ? [] : t.from.length === 0 ? ['(new)'] : t.from));
    return { to: marked[0]!.to!, from: [...new Set(from)] };
  }
  if (entry.type === 'notice.completed') return { to: state ?? '(none)', from: state === undefined ? [] : [state] };
  return undefined;
}

/**
 * Herald has nothing more to do for the notice: a terminal state, or `sms.unconfirmed`: `sms_sent`
 * once its SMS checks ran out without a final status, `sms_sending` once the search for its SMS
 * in doubt ended with the provider unable to tell.
 */
export function settled(state: string, events: readonly StoredEntry[]): boolean {
  const unconfirmed = events.some((e) => e.type === 'sms.unconfirmed' && (state === 'sms_sent' || e.reason === 'sms_send_unconfirmed'));
  return TERMINAL.includes(state) || ((state === 'sms_sent' || state === 'sms_sending') && unconfirmed);
}

/** Checks one notice; returns every rule it breaks. */
export function checkNotice(outcome: NoticeOutcome): Violation[] {
  const violations: Violation[] = [];
  const { plan, id, hash, events } = outcome;
  const fail = (rule: string, detail: string) => violations.push({ rule, notice: id ?? `#${plan.index}`, detail });
  const ofType = (type: string) => events.filter((e) => e.type === type);

  if (id === undefined) {
    // Never answered 202/200: nothing may have been sent for it.
    if (outcome.sms.length > 0) fail('sms-without-notice', `${outcome.sms.length} SMS to ${plan.phone} for a notice never accepted`);
    return violations;
  }
  if (!hash || !hash.state) {
    fail('accepted-notice-lost', 'accepted with 202/200 but its hash is gone, and the archive holds no record of it');
    return violations;
  }
  // A retired notice's content was purged (and logged) before it left Redis.
  if (outcome.retired && ofType('content.purged').length !== 1) {
    fail('retired-without-purge', `retired with ${ofType('content.purged').length} content.purged entries`);
  }
  const state = hash.state;
  if (!settled(state, events)) {
    const trail = events.map(
      (e) => `${e.type}${e.status ? `(${String(e.status)})` : ''}${e.kind ? `(${String(e.kind)})` : ''}@${e.at.slice(17, 23)}`,
    );
    fail('not-terminal', `state is ${state}; log: ${trail.join(' ')}`);
  }

  // The log is complete and in order: seq 1..n, and the hash counted exactly n entries.
  const seqs = events.map((e) => e.seq);
  if (seqs.some((s, i) => s !== i + 1)) fail('log-seq', `seq is ${seqs.join(',')}`);
  if (Number(hash.seq) !== events.length) fail('log-seq', `hash seq ${hash.seq} but ${events.length} entries`);

  // Replay: every state change has its entry, every entry's change was allowed, and the
  // replayed state is the hash's state.
  let replayed = '(new)';
  let completed = 0;
  for (const entry of events) {
    if (entry.type === 'notice.reconciled' && entry.state !== replayed) {
      fail('log-replay', `notice.reconciled (seq ${entry.seq}) says ${String(entry.state)}, the log says ${replayed}`);
    }
    // The deadline step's own note (no message to read) is written only while undecided.
    if (entry.type === 'email.observed' && entry.note === undefined) {
      const late = entry.late === true;
      // Late means after the fallback was decided. After the email was delivered no fallback was
      // decided, and what is recorded then (a webhook's event, the same news again or an open; a
      // planned check that was already running when a webhook delivered) is not late.
      const decided = !UNDECIDED.includes(replayed) && replayed !== 'email_delivered';
      if (late !== decided) {
        fail(
          'log-replay',
          `email.observed (seq ${entry.seq}, ${String(entry.source ?? 'poll')}) late=${late} while the log says ${replayed}`,
        );
      }
    }
    if (TERMINAL.includes(replayed) && entry.type !== 'notice.completed') {
      const change = effect(entry);
      if (change) fail('change-after-terminal', `${entry.type} (seq ${entry.seq}) after ${replayed}`);
      continue;
    }
    const change = effect(entry);
    if (!change) continue;
    if (!change.from.includes(replayed)) {
      fail('log-replay', `${entry.type}${entry.state ? ` ${String(entry.state)}` : ''} (seq ${entry.seq}) from ${replayed}`);
    }
    if (entry.type === 'notice.completed') completed += 1;
    replayed = change.to;
  }
  if (replayed !== state) fail('state-without-entry', `hash state ${state}, log replays to ${replayed}`);
  if (completed > 1) fail('completed-twice', `${completed} notice.completed entries`);
  if (TERMINAL.includes(state) && completed !== 1) fail('completed-missing', `terminal ${state} with ${completed} notice.completed`);

  // At most one decision.
  const decided = ofType('fallback.decided');
  const blocked = ofType('fallback.blocked');
  if (decided.length > 1) fail('fallback-decided-twice', `${decided.length} fallback.decided`);
  if (decided.length + blocked.length > 1) fail('fallback-decided-twice', `${decided.length} decided, ${blocked.length} blocked`);
  const decision = decided[0] ?? blocked[0];
  if (decision) {
    const reason = decision.type === 'fallback.blocked' ? decision.fallbackReason : decision.reason;
    if (hash.fallbackReason !== reason) fail('hash-log-mismatch', `hash fallbackReason ${hash.fallbackReason}, log ${String(reason)}`);
    if (reason === 'email_deadline_elapsed' && Date.parse(String(decision.decidedAt)) < Date.parse(String(decision.deadline))) {
      fail('decided-early', `decidedAt ${String(decision.decidedAt)} before deadline ${String(decision.deadline)}`);
    }
  } else if (hash.fallbackReason !== undefined) {
    fail('state-without-entry', `hash fallbackReason ${hash.fallbackReason} without a fallback entry`);
  }

  // Emails: each one the emulator holds was requested in the log; each acceptance names one.
  const emailIds = new Set(outcome.emails.map((m) => m.messageId));
  const emailRequested = ofType('email.requested').length;
  // ARCHITECTURE: the email is handed to Postmark once; a send in doubt is searched for first.
  if (outcome.emails.length > 1) fail('email-twice', `${outcome.emails.length} emails for one notice`);
  if (outcome.emails.length > emailRequested) {
    fail('send-without-entry', `${outcome.emails.length} emails at the emulator, ${emailRequested} email.requested`);
  }
  for (const accepted of ofType('email.accepted')) {
    if (!emailIds.has(String(accepted.providerMessageId))) {
      fail('entry-without-send', `email.accepted ${String(accepted.providerMessageId)} is not at the emulator`);
    }
  }
  if (hash.emailProviderMessageId !== undefined && !emailIds.has(hash.emailProviderMessageId)) {
    fail('hash-log-mismatch', `hash emailProviderMessageId ${hash.emailProviderMessageId} is not at the emulator`);
  }
  for (const observed of ofType('email.observed')) {
    if (observed.status !== 'delivered') continue;
    const at = Date.parse(String(observed.observedAt));
    const delivered = outcome.emails.some((m) => m.events.some((e) => e.type === 'Delivered' && e.at <= at));
    if (!delivered) fail('entry-without-send', `email.observed delivered (seq ${observed.seq}) but the emulator delivered nothing by then`);
  }

  // SMS: at most one, exactly one when needed, each in the log.
  const sms = outcome.sms;
  const smsRequested = ofType('sms.requested').length;
  if (sms.length > 1) fail('sms-twice', `${sms.length} SMS to ${plan.phone}`);
  if (sms.length > 0 && decided.length === 0) fail('sms-without-decision', `${sms.length} SMS without fallback.decided`);
  if (sms.length > smsRequested) fail('send-without-entry', `${sms.length} SMS at the emulator, ${smsRequested} sms.requested`);
  const needed = decided.length === 1 && ofType('sms.canceled').length === 0 && !SMS_REFUSED.has(plan.smsBehaviour ?? '');
  if (needed && sms.length !== 1) fail('sms-missing', `fallback decided, ${sms.length} SMS at the emulator`);
  const smsIds = new Set(sms.map((m) => m.sid));
  for (const accepted of ofType('sms.accepted')) {
    if (!smsIds.has(String(accepted.providerMessageId))) {
      fail('entry-without-send', `sms.accepted ${String(accepted.providerMessageId)} is not at the emulator`);
    }
  }
  if (hash.smsProviderMessageId !== undefined && !smsIds.has(hash.smsProviderMessageId)) {
    fail('hash-log-mismatch', `hash smsProviderMessageId ${hash.smsProviderMessageId} is not at the emulator`);
  }
  if (state === 'sms_delivered' && !sms.some((m) => m.status === 'delivered')) {
    fail('entry-without-send', 'sms_delivered but the emulator did not deliver it');
  }
  if (state === 'canceled' && (outcome.emails.length > 0 || sms.length > 0)) {
    fail('sent-after-cancel', `${outcome.emails.length} emails and ${sms.length} SMS for a canceled notice`);
  }
  if (state === 'blocked' && sms.length > 0) fail('sms-when-blocked', `${sms.length} SMS for a blocked notice`);

  // Independent of the log: what the behaviours chosen say must happen.
  const mustFallBack =
    NEVER_DELIVERED.has(plan.emailBehaviour) &&
    outcome.cancelStatus !== 200 &&
    plan.phone !== undefined &&
    outcome.consentWithdrawn !== true;
  if (mustFallBack) {
    if (decided.length !== 1)
      fail('fallback-missing', `email ${plan.emailBehaviour} never delivered, yet no fallback.decided (state ${state})`);
    const expected = SMS_UNCONFIRMED.has(plan.smsBehaviour ?? '')
      ? 'sms_sent'
      : SMS_REFUSED.has(plan.smsBehaviour ?? '') || ['01', '02'].includes(plan.smsBehaviour ?? '')
        ? 'sms_failed'
        : 'sms_delivered';
    if (state !== expected)
      fail('wrong-end', `email ${plan.emailBehaviour}, SMS ${plan.smsBehaviour}: ended ${state}, expected ${expected}`);
  }
  if (NEVER_DELIVERED.has(plan.emailBehaviour) && plan.phone === undefined && outcome.cancelStatus !== 200 && state !== 'blocked') {
    fail('wrong-end', `email ${plan.emailBehaviour} never delivered and no phone: ended ${state}, expected blocked`);
  }
  if (NEVER_DELIVERED.has(plan.emailBehaviour) && state === 'email_delivered') {
    fail('wrong-end', `email ${plan.emailBehaviour} can never be delivered, yet ended email_delivered`);
  }
  return violations;
}

/** Checks every notice, and that the emulators hold nothing for notices the API never accepted. */
export function checkRun(outcomes: NoticeOutcome[], allEmails: SandboxEmail[], allSms: SandboxSms[]): Violation[] {
  const violations = outcomes.flatMap(checkNotice);
  const ids = new Set(outcomes.map((o) => o.id).filter((id): id is string => id !== undefined));
  const phones = new Set(outcomes.map((o) => o.plan.phone).filter((p): p is string => p !== undefined));
  for (const email of allEmails) {
    if (!ids.has(email.metadata.notice_id ?? '')) {
      violations.push({ rule: 'send-without-notice', detail: `email ${email.messageId} for unknown notice ${email.metadata.notice_id}` });
    }
  }
  for (const sms of allSms) {
    if (!phones.has(sms.to)) violations.push({ rule: 'send-without-notice', detail: `SMS ${sms.sid} to unknown number ${sms.to}` });
  }
  return violations;
}
