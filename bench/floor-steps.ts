/**
 * The transitions a notice cannot do without, shaped as Herald's steps write them (the guards,
 * fields and entries of src/notice/steps): the record before each send and the answer after it
 * (what makes a send exactly once), one observation per status read, the deadline's read with
 * the decision, and the completion. The floor worker (bench/floor-worker.ts) runs them, with no
 * reads, provider calls or anything else around them, to measure the floor under the design.
 */
import { iso } from '../src/clock.js';
import type { LogEntry } from '../src/notice/entries.js';
import type { TransitionSpec } from '../src/store/notices.js';

const cost = (total: number) => ({ currency: 'USD', total, byChannel: { email: total, sms: 0 } });

export interface FloorNotice {
  id: string;
  /** The attempt of this notice's channel, made up from its ID. */
  attempt: string;
  deadline: number;
  now: number;
  /** The checks planned before the deadline, and which of them this is (1-based). */
  plannedAt?: number;
  nextCheckAt?: number;
  checks?: number;
}

export function startAttempt(channel: 'email' | 'sms', n: FloorNotice): TransitionSpec {
  const provider = channel === 'email' ? 'postmark' : 'twilio';
  return {
    name: channel === 'email' ? 'startEmailAttempt' : 'startSmsAttempt',
    eq: { [`${channel}AttemptId`]: '' },
    set: {
      [`${channel}AttemptId`]: n.attempt,
      [`${channel}Attempts`]: 1,
      [`${channel}AttemptStartedAt`]: n.now,
      [`${channel}AttemptSettled`]: 0,
      [`${channel}AttemptInDoubt`]: 0,
    },
    entries: [{ type: `${channel}.requested`, attemptId: n.attempt, idempotencyKey: `${n.id}-${channel}`, provider } as LogEntry],
    due: n.now + 10_000,
  };
}

export function recordAccepted(channel: 'email' | 'sms', n: FloorNotice, firstCheckAt: number): TransitionSpec {
  return {
    name: channel === 'email' ? 'recordEmailAccepted' : 'recordSmsAccepted',
    eq: { [`${channel}AttemptId`]: n.attempt },
    set: {
      [`${channel}ProviderMessageId`]: `msg-${n.id}`,
      [`${channel}AttemptSettled`]: 1,
      [`${channel}NextCheckAt`]: firstCheckAt,
    },
    entries: [{ type: `${channel}.accepted`, attemptId: n.attempt, providerMessageId: `msg-${n.id}` } as LogEntry],
    due: firstCheckAt,
  };
}

const observed = (channel: 'email' | 'sms', n: FloorNotice, status: string, providerStatus: string): LogEntry =>
  ({
    type: `${channel}.observed`,
    attemptId: n.attempt,
    providerStatus,
    status,
    observedAt: iso(n.now),
    ...(n.plannedAt === undefined ? {} : { plannedAt: iso(n.plannedAt) }),
    nextCheckAt: n.nextCheckAt === undefined ? null : iso(n.nextCheckAt),
    deadline: iso(n.deadline),
    source: 'poll',
  }) as LogEntry;

/** A planned check that found the email still on its way. */
export function observePending(n: FloorNotice): TransitionSpec {
  return {
    name: 'observeEmail',
    onlyFrom: ['email_sent'],
    set: {
      emailStatus: 'pending',
      emailProviderStatus: 'Sent',
      emailLastObservedAt: n.now,
      emailChecksDone: n.checks ?? 1,
      emailNextCheckAt: n.nextCheckAt ?? n.deadline,
    },
    entries: [observed('email', n, 'pending', 'Sent')],
    due: n.nextCheckAt ?? n.deadline,
  };
}

/** A check that found the message delivered: the notice ends. */
export function confirmDelivered(channel: 'email' | 'sms', n: FloorNotice): TransitionSpec {
  const state = channel === 'email' ? 'email_delivered' : 'sms_delivered';
  return {
    name: channel === 'email' ? 'confirmEmailDelivered' : 'confirmSmsDelivered',
    onlyFrom: channel === 'email' ? ['email_sent'] : ['sms_sent'],
    set: {
      [`${channel}Status`]: 'delivered',
      [`${channel}ProviderStatus`]: 'delivered',
      [`${channel}LastObservedAt`]: n.now,
      [`${channel}ChecksDone`]: n.checks ?? 1,
    },
    unset: [`${channel}NextCheckAt`],
    entries: [
      observed(channel, { ...n, nextCheckAt: undefined }, 'delivered', 'delivered'),
      {
        type: 'notice.completed',
        state,
        cost: cost(channel === 'email' ? 0.0012 : 0.0091),
        checks: { email: channel === 'email' ? (n.checks ?? 1) : 5, sms: channel === 'sms' ? (n.checks ?? 1) : 0 },
      } as LogEntry,
    ],
    due: 'remove',
  };
}

/** The deadline's last read, the policy check of the SMS and the decision, in one transition. */
export function decideAtDeadline(n: FloorNotice): TransitionSpec {
  return {
    name: 'decideFallback',
    reached: 'deadline',
    set: {
      emailStatus: 'pending',
      emailProviderStatus: 'Sent',
      emailLastObservedAt: n.now,
      emailChecksDone: n.checks ?? 5,
      fallbackReason: 'email_deadline_elapsed',
      fallbackDecidedAt: n.now,
      smsIdempotencyKey: `${n.id}-sms`,
    },
    unset: ['emailNextCheckAt'],
    entries: [
      observed('email', { ...n, nextCheckAt: undefined }, 'pending', 'Sent'),
      {
        type: 'policy.checked',
        channel: 'sms',
        outcome: 'allowed',
        policyVersion: 0,
        rulesVersion: null,
        region: null,
        recipientId: 'bench-player',
        hasPhone: true,
      } as LogEntry,
      {
        type: 'fallback.decided',
        reason: 'email_deadline_elapsed',
        deadline: iso(n.deadline),
        decidedAt: iso(n.now),
        lastEmailStatus: 'pending',
        smsIdempotencyKey: `${n.id}-sms`,
      } as LogEntry,
    ],
    due: n.now,
  };
}
