import { iso } from '../../clock.js';
import { ProviderError, type StatusObservation } from '../../providers/types.js';
import type { NoticeField, NoticeFields, TransitionSpec } from '../../store/notices.js';
import type { Notice } from '../notice.js';
import type { SuppressionSource } from '../../store/suppressions.js';
import { EMAIL, SMS } from '../channels.js';
import { providerErrorEntry, type LogEntry } from '../entries.js';
import { checkAt, done, type StepOutcome } from '../outcome.js';
import { nextCheckAfter } from '../planner.js';
import { isTerminal, UNDECIDED_STATES, type NoticeState } from '../states.js';
import { emailChecksBeforeDeadline, MAX_RACES, type StepContext } from './context.js';
import { decideFallback } from './decide.js';

/** One planned email status check; comes back (the same job, moved back to delayed) for the next one. */
export async function pollEmail(ctx: StepContext, id: string): Promise<StepOutcome> {
  const notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  const observable = notice.state === 'email_sent' || (notice.state === 'sms_pending' && notice.emailChannel.providerMessageId);
  if (!observable) return done(`state is ${notice.state}`);
  const { outcome, nextCheckAt } = await observeEmail(ctx, notice, false, notice.emailChannel.nextCheckAt);
  // The next check runs in this same job, moved back to delayed until then.
  if (nextCheckAt === undefined || nextCheckAt >= notice.deadline) return outcome;
  return checkAt(nextCheckAt, outcome.note, 'email', outcome.pauseMs);
}

/**
 * Reads the email status and records it. A delivery ends the notice (or, after the fallback
 * was decided but before the SMS left, cancels the SMS); a bounce or a refusal decides the
 * fallback early; anything else waits for the next check or the deadline, whose time it
 * returns as `nextCheckAt` when the notice still waits for the email. `final`: the read the
 * deadline (or the end of quiet hours) makes, which plans no further check. `plannedAt`: when a
 * planned check was due, recorded with its observation.
 */
export async function observeEmail(
  ctx: StepContext,
  notice: Notice,
  final: boolean,
  plannedAt?: number,
): Promise<{ outcome: StepOutcome; nextCheckAt?: number }> {
  const read = await readOrRecordFailure(ctx, notice, final);
  if ('failed' in read) return read.failed;
  return recordEmailObservation(ctx, notice, read.observation, { final, plannedAt });
}

/**
 * Reads the email status for a check (`final`: the deadline's own read). A read the provider
 * fails is recorded here (`provider.error`, the next check planned) and gives undefined.
 */
export async function readEmailStatus(ctx: StepContext, notice: Notice, final: boolean): Promise<StatusObservation | undefined> {
  const read = await readOrRecordFailure(ctx, notice, final);
  return 'failed' in read ? undefined : read.observation;
}

async function readOrRecordFailure(
  ctx: StepContext,
  notice: Notice,
  final: boolean,
): Promise<{ observation: StatusObservation } | { failed: { outcome: StepOutcome; nextCheckAt?: number } }> {
  const { store } = ctx;
  const record = notice.emailChannel;
  const nextCheckField = EMAIL.field('nextCheckAt');
  try {
    return { observation: await ctx.deps.email.status(record.providerMessageId!, { to: EMAIL.address(notice), since: notice.createdAt }) };
  } catch (thrown) {
    if (!(thrown instanceof ProviderError)) throw thrown;
    const error = ctx.bounded(thrown);
    const now = ctx.now();
    const pauseMs = error.kind === 'rate_limited' ? (error.retryAfterMs ?? 1000) : undefined;
    const planned = final ? undefined : nextCheckAfter(emailChecksBeforeDeadline(notice), now);
    // A 429 pushes this notice's next check past the provider's Retry-After (never past the deadline).
    const next = planned === undefined ? undefined : Math.min(Math.max(planned, now + (pauseMs ?? 0)), notice.deadline);
    await store.transition(notice.id, now, iso(now), {
      name: 'observeEmail',
      set: next !== undefined ? { [nextCheckField]: next } : {},
      unset: next === undefined ? [nextCheckField] : [],
      entries: [providerErrorEntry('email', record.attemptId, 'status', error, notice.providerTimeoutMs)],
      due: UNDECIDED_STATES.includes(notice.state) ? (next ?? notice.deadline) : undefined,
    });
    return {
      failed: {
        outcome: done(`status read failed: ${error.kind}`, pauseMs),
        nextCheckAt: UNDECIDED_STATES.includes(notice.state) ? next : undefined,
      },
    };
  }
}

/** Where an observation came from, and what it was for. */
export interface ObservationOrigin {
  /** The deadline's own read (or the end of quiet hours'), which plans no further check. */
  final?: boolean;
  /** When the planned check that made this read was due. */
  plannedAt?: number;
  /**
   * A provider's webhook, by the provider's identity of the event: it is not a check (the
   * plan is left as it is, and no call is counted), and the notice records each event once.
   */
  webhookEvent?: string;
}

/** The field of the notice hash that records one webhook event (a digest of its identity). */
export function webhookEventField(event: string): `webhook:${string}` {
  return `webhook:${event}`;
}

/**
 * Whether an observation went into the log: a webhook event recorded before is a `duplicate`; one
 * that came after the notice completed and after it had recorded its share of them, `over_limit`.
 */
export type Stored = 'recorded' | 'duplicate' | 'over_limit' | 'not_stored';

/**
 * How many webhook observations a completed notice still records (an open after the delivery, a
 * late delivery report). Past it they are only counted in /metrics: a completed trail does not
 * grow, nor its archive, on a provider's (or a forger's) say-so.
 */
export const MAX_WEBHOOKS_AFTER_COMPLETION = 5;

/** What recording an observation did: the step's outcome, and whether the observation was stored. */
export interface Recorded {
  outcome: StepOutcome;
  stored: Stored;
  /** A check's: when the next one is due, while the notice still waits for the email. */
  nextCheckAt?: number;
}

/**
 * Records an email status, read by a check or pushed by a webhook. A delivery ends the notice
 * (or, after the fallback was decided but before the SMS left, cancels the SMS); a bounce or a
 * refusal decides the fallback early; anything else waits for the next check or the deadline,
 * whose time it returns as `nextCheckAt` when the notice still waits for the email.
 */
export async function recordEmailObservation(
  ctx: StepContext,
  notice: Notice,
  observation: StatusObservation,
  origin: ObservationOrigin,
): Promise<Recorded> {
  const { store } = ctx;
  const { final = false, webhookEvent } = origin;
  const webhook = webhookEvent !== undefined;
  const planned = webhook ? undefined : ctx.checkRan('email', origin.plannedAt);
  // A late webhook that loses the race for the count lost it to one that took a share, so those
  // races end by themselves within the bound: they get rounds of their own beside MAX_RACES.
  const races = MAX_RACES + (webhook ? MAX_WEBHOOKS_AFTER_COMPLETION : 0);
  for (let race = 0; race < races; race += 1) {
    const current = race === 0 ? notice : await ctx.notice(notice.id);
    if (!current) return { outcome: done('no such notice'), stored: 'not_stored' };
    const now = ctx.now();
    const undecided = UNDECIDED_STATES.includes(current.state);
    // A completed notice takes a few late webhook observations, counted under a guard so that
    // concurrent ones cannot pass the bound together.
    const late = webhook && isTerminal(current.state);
    if (late && current.lateWebhooks >= MAX_WEBHOOKS_AFTER_COMPLETION) {
      return { outcome: done('the completed notice records no more webhook observations'), stored: 'over_limit' };
    }
    const { entry: observed, set, unset, next, delivers, keepsPlan } = emailObservationWrite(current, observation, origin, planned, now);
    const eq: TransitionSpec['eq'] = webhook ? { [webhookEventField(webhookEvent)]: '' } : undefined;
    if (late) {
      eq!.lateWebhooks = current.lateWebhooks === 0 ? '' : String(current.lateWebhooks);
      set.lateWebhooks = current.lateWebhooks + 1;
    }
    const spec: TransitionSpec = { name: 'observeEmail', onlyFrom: [current.state], eq, set, unset, entries: [observed] };
    if (delivers) {
      if (undecided) {
        Object.assign(spec, { name: 'confirmEmailDelivered', due: 'remove' });
        spec.entries.push(ctx.completed(current, 'email_delivered', { emailChecks: webhook ? 0 : 1 }));
      } else {
        Object.assign(spec, { name: 'cancelSmsForLateDelivery', due: 'remove' });
        spec.entries.push(
          { type: 'sms.canceled', reason: 'email_delivered_late' },
          ctx.completed(current, 'email_delivered', { emailChecks: webhook ? 0 : 1 }),
        );
      }
    } else if (undecided && !keepsPlan) {
      spec.due = next ?? current.deadline;
    }
    const result = await store.transition(current.id, now, iso(now), spec);
    if (!result.ok && result.reason === 'state') continue;
    // Another late observation took the count first: read it again.
    if (!result.ok && result.reason === 'guard' && result.field === 'lateWebhooks') continue;
    if (!result.ok && result.reason === 'guard') return { outcome: done('webhook event recorded before'), stored: 'duplicate' };
    if (!result.ok) return { outcome: done(`observation not stored: ${result.reason}`), stored: 'not_stored' };
    if (observation.suppressed && observation.status !== 'delivered') {
      const source: SuppressionSource =
        observation.suppressionSource ?? (observation.status === 'bounced' ? 'postmark_hard_bounce' : 'postmark_unsubscribe');
      await ctx.suppress(current, 'email', current.email!, source, observation.bounceType ?? observation.providerStatus);
    }
    if (undecided && observation.status === 'bounced')
      return { outcome: await decideFallback(ctx, current.id, 'email_bounced'), stored: 'recorded' };
    if (undecided && observation.status === 'failed') {
      return {
        outcome: await decideFallback(ctx, current.id, observation.suppressed ? 'email_suppressed' : 'email_rejected'),
        stored: 'recorded',
      };
    }
    // Delivered before its deadline (a planned check or a webhook, not the deadline's own read):
    // the notice waits for its deadline no more, nor, for a webhook, for its checks.
    if (undecided && delivers && !final) await (webhook ? ctx.dropChecks(current.id, 'email') : ctx.dropDeadline(current.id));
    return {
      outcome: done(`email ${observation.status}`),
      stored: 'recorded',
      nextCheckAt: result.state === 'email_sent' && !webhook ? next : undefined,
    };
  }
  return { outcome: done('the notice kept moving; observation dropped'), stored: 'not_stored' };
}

/** What recording one email observation writes: its entry and the notice's fields. */
export interface ObservationWrite {
  entry: LogEntry;
  set: NoticeFields;
  unset: NoticeField[];
}

/**
 * The entry and fields that record an email status on `current` (as read now), and what the
 * status means for it: the next planned check, whether it delivers, whether a webhook leaves
 * the plan as it is.
 */
export function emailObservationWrite(
  current: Notice,
  observation: StatusObservation,
  origin: ObservationOrigin,
  planned: string | undefined,
  now: number,
): ObservationWrite & { next: number | undefined; delivers: boolean; keepsPlan: boolean } {
  const { final = false, webhookEvent } = origin;
  const webhook = webhookEvent !== undefined;
  const nextCheckField = EMAIL.field('nextCheckAt');
  const undecided = UNDECIDED_STATES.includes(current.state);
  // Decided before this status came (a webhook after a polled delivery is not late news).
  const late = !undecided && current.state !== 'email_delivered';
  const delivers = observation.status === 'delivered' && (undecided || current.state === 'sms_pending');
  // A webhook leaves the plan as it is, unless its delivery ends it.
  const next = final || !undecided || webhook ? undefined : nextCheckAfter(emailChecksBeforeDeadline(current), now);
  const keepsPlan = webhook && !delivers;
  const entry: LogEntry = {
    type: 'email.observed',
    attemptId: current.emailChannel.attemptId,
    providerStatus: observation.providerStatus,
    status: observation.status,
    observedAt: iso(now),
    plannedAt: planned,
    nextCheckAt: keepsPlan
      ? current.emailChannel.nextCheckAt === undefined
        ? null
        : iso(current.emailChannel.nextCheckAt)
      : next === undefined
        ? null
        : iso(next),
    deadline: iso(current.deadline),
    engagement: observation.engagement.length > 0 ? observation.engagement : undefined,
    bounceType: observation.bounceType,
    late: late ? true : undefined,
    source: webhook ? 'webhook' : 'poll',
    checksSaved: webhook && delivers ? current.pollPlan.filter((at) => at > now).length : undefined,
    event: webhookEvent,
  };
  // A webhook arriving after the notice was decided (its delivery included: an open after the
  // delivery), or saying nothing of delivery (an open, a click), is recorded but changes no field;
  // so is a check whose read was on its way while a webhook delivered the email (its call is counted).
  const set: NoticeFields =
    (webhook && !delivers && (!undecided || observation.status === 'pending')) || (!webhook && current.state === 'email_delivered')
      ? {}
      : {
          [EMAIL.field('status')]: observation.status,
          [EMAIL.field('providerStatus')]: observation.providerStatus,
          [EMAIL.field('lastObservedAt')]: now,
        };
  if (!webhook) set[EMAIL.field('checksDone')] = current.emailChannel.checksDone + 1;
  if (next !== undefined) set[nextCheckField] = next;
  if (webhook) set[webhookEventField(webhookEvent)] = 1;
  return { entry, set, unset: keepsPlan || next !== undefined ? [] : [nextCheckField], next, delivers, keepsPlan };
}

/** One SMS status check; comes back for the next one of the SMS plan. */
export async function pollSms(ctx: StepContext, id: string): Promise<StepOutcome> {
  const { store } = ctx;
  const notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  if (notice.state !== 'sms_sent') return done(`state is ${notice.state}`);
  const record = notice.smsChannel;
  const nextCheckField = SMS.field('nextCheckAt');
  let observation: StatusObservation;
  const next = nextCheckAfter(notice.smsPlan, ctx.now());
  try {
    observation = await ctx.deps.sms.status(record.providerMessageId!);
  } catch (thrown) {
    if (!(thrown instanceof ProviderError)) throw thrown;
    const error = ctx.bounded(thrown);
    const now = ctx.now();
    const entries: LogEntry[] = [providerErrorEntry('sms', record.attemptId, 'status', error, notice.providerTimeoutMs)];
    if (next === undefined) entries.push(ctx.smsUnconfirmed(notice, record.checksDone));
    await store.transition(id, now, iso(now), {
      name: 'observeSms',
      set: next !== undefined ? { [nextCheckField]: next } : {},
      unset: next === undefined ? [nextCheckField] : [],
      entries,
      due: next ?? 'remove',
    });
    const note = `sms status read failed: ${error.kind}`;
    const pauseMs = error.kind === 'rate_limited' ? (error.retryAfterMs ?? 1000) : undefined;
    return next !== undefined ? checkAt(next, note, 'sms', pauseMs) : done(note, pauseMs);
  }
  return (await recordSmsObservation(ctx, notice, observation, { plannedAt: record.nextCheckAt })).outcome;
}

/**
 * Records an SMS status, read by a check or pushed by a webhook: a final status ends the notice;
 * a check's other status waits for the next check of the SMS plan, and the plan's last one
 * records `sms.unconfirmed`. A webhook's other status is recorded and leaves the plan as it is.
 */
export async function recordSmsObservation(
  ctx: StepContext,
  notice: Notice,
  observation: StatusObservation,
  origin: ObservationOrigin,
): Promise<Recorded> {
  const { store } = ctx;
  const { webhookEvent } = origin;
  const webhook = webhookEvent !== undefined;
  const id = notice.id;
  const record = notice.smsChannel;
  const nextCheckField = SMS.field('nextCheckAt');
  const planned = webhook ? undefined : ctx.checkRan('sms', origin.plannedAt);
  const now = ctx.now();
  const terminal: NoticeState | undefined =
    observation.status === 'delivered' ? 'sms_delivered' : observation.status === 'failed' ? 'sms_failed' : undefined;
  const keepsPlan = webhook && !terminal;
  const next = webhook ? undefined : nextCheckAfter(notice.smsPlan, now);
  const entries: LogEntry[] = [
    {
      type: 'sms.observed',
      attemptId: record.attemptId,
      providerStatus: observation.providerStatus,
      status: observation.status,
      observedAt: iso(now),
      plannedAt: planned,
      nextCheckAt: keepsPlan
        ? record.nextCheckAt === undefined
          ? null
          : iso(record.nextCheckAt)
        : terminal || next === undefined
          ? null
          : iso(next),
      errorCode: observation.errorCode,
      source: webhook ? 'webhook' : 'poll',
      checksSaved: webhook && terminal ? notice.smsPlan.filter((at) => at > now).length : undefined,
      event: webhookEvent,
    },
  ];
  if (terminal) entries.push(ctx.completed(notice, terminal, { smsChecks: webhook ? 0 : 1 }));
  else if (!webhook && next === undefined) entries.push(ctx.smsUnconfirmed(notice, record.checksDone + 1, observation.status));
  const set: NoticeFields = {
    [SMS.field('status')]: observation.status,
    [SMS.field('providerStatus')]: observation.providerStatus,
    [SMS.field('lastObservedAt')]: now,
  };
  if (!webhook) set[SMS.field('checksDone')] = record.checksDone + 1;
  if (!keepsPlan && next !== undefined && !terminal) set[nextCheckField] = next;
  if (webhook) set[webhookEventField(webhookEvent)] = 1;
  const result = await store.transition(id, now, iso(now), {
    name: terminal === 'sms_delivered' ? 'confirmSmsDelivered' : terminal === 'sms_failed' ? 'failSms' : 'observeSms',
    eq: webhook ? { [webhookEventField(webhookEvent)]: '' } : undefined,
    set,
    unset: keepsPlan ? [] : terminal || next === undefined ? [nextCheckField] : [],
    entries,
    due: keepsPlan ? undefined : terminal || next === undefined ? 'remove' : next,
  });
  if (!result.ok && result.reason === 'guard') return { outcome: done('webhook event recorded before'), stored: 'duplicate' };
  if (!result.ok) return { outcome: done(`observation not stored: ${result.reason}`), stored: 'not_stored' };
  if (terminal && webhook) await ctx.dropChecks(id, 'sms');
  if (!terminal && !webhook && next !== undefined)
    return { outcome: checkAt(next, `sms ${observation.status}`, 'sms'), stored: 'recorded' };
  return { outcome: done(`sms ${observation.status}`), stored: 'recorded' };
}
