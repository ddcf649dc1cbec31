import { iso } from '../../clock.js';
import { ProviderError, type StatusObservation } from '../../providers/types.js';
import type { NoticeFields, TransitionSpec } from '../../store/notices.js';
import type { Notice } from '../notice.js';
import type { SuppressionSource } from '../../store/suppressions.js';
import { EMAIL, SMS } from '../channels.js';
import { providerErrorEntry, type LogEntry } from '../entries.js';
import { done, type StepOutcome } from '../outcome.js';
import { checkNumber, nextCheckAfter } from '../planner.js';
import { UNDECIDED_STATES, type NoticeState } from '../states.js';
import { emailChecksBeforeDeadline, MAX_RACES, type StepContext } from './context.js';
import { decideFallback } from './decide.js';

/** One planned email status check; asks for the next one. */
export async function pollEmail(ctx: StepContext, id: string): Promise<StepOutcome> {
  const notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  const observable = notice.state === 'email_sent' || (notice.state === 'sms_pending' && notice.emailChannel.providerMessageId);
  if (!observable) return done(`state is ${notice.state}`);
  const { outcome, nextCheckAt } = await observeEmail(ctx, notice, false);
  if (nextCheckAt !== undefined && nextCheckAt < notice.deadline) {
    await ctx.deps.schedule.emailPoll(id, checkNumber(notice.pollPlan, nextCheckAt), nextCheckAt);
  }
  return outcome;
}

/**
 * Reads the email status and records it. A delivery ends the notice (or, after the fallback
 * was decided but before the SMS left, cancels the SMS); a bounce or a refusal decides the
 * fallback early; anything else waits for the next check or the deadline, whose time it
 * returns as `nextCheckAt` when the notice still waits for the email. `final`: the read the
 * deadline (or the end of quiet hours) makes, which plans no further check.
 */
export async function observeEmail(
  ctx: StepContext,
  notice: Notice,
  final: boolean,
): Promise<{ outcome: StepOutcome; nextCheckAt?: number }> {
  const { store } = ctx;
  const record = notice.emailChannel;
  const nextCheckField = EMAIL.field('nextCheckAt');
  let observation: StatusObservation;
  try {
    observation = await ctx.deps.email.status(record.providerMessageId!);
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
      outcome: done(`status read failed: ${error.kind}`, pauseMs),
      nextCheckAt: UNDECIDED_STATES.includes(notice.state) ? next : undefined,
    };
  }

  for (let race = 0; race < MAX_RACES; race += 1) {
    const current = race === 0 ? notice : await ctx.notice(notice.id);
    if (!current) return { outcome: done('no such notice') };
    const now = ctx.now();
    const undecided = UNDECIDED_STATES.includes(current.state);
    const late = !undecided;
    const next = final || !undecided ? undefined : nextCheckAfter(emailChecksBeforeDeadline(current), now);
    const observed: LogEntry = {
      type: 'email.observed',
      attemptId: record.attemptId,
      providerStatus: observation.providerStatus,
      status: observation.status,
      observedAt: iso(now),
      nextCheckAt: next === undefined ? null : iso(next),
      deadline: iso(current.deadline),
      engagement: observation.engagement.length > 0 ? observation.engagement : undefined,
      bounceType: observation.bounceType,
      late: late ? true : undefined,
    };
    const set: NoticeFields = {
      [EMAIL.field('status')]: observation.status,
      [EMAIL.field('providerStatus')]: observation.providerStatus,
      [EMAIL.field('lastObservedAt')]: now,
      [EMAIL.field('checksDone')]: current.emailChannel.checksDone + 1,
    };
    if (next !== undefined) set[nextCheckField] = next;
    const spec: TransitionSpec = {
      name: 'observeEmail',
      onlyFrom: [current.state],
      set,
      unset: next === undefined ? [nextCheckField] : [],
      entries: [observed],
    };
    if (observation.status === 'delivered') {
      if (undecided) {
        Object.assign(spec, { name: 'confirmEmailDelivered', due: 'remove' });
        spec.entries.push(ctx.completed(current, 'email_delivered', { emailChecks: 1 }));
      } else if (current.state === 'sms_pending') {
        Object.assign(spec, { name: 'cancelSmsForLateDelivery', due: 'remove' });
        spec.entries.push({ type: 'sms.canceled', reason: 'email_delivered_late' }, ctx.completed(current, 'email_delivered', { emailChecks: 1 }));
      }
    } else if (undecided) {
      spec.due = next ?? current.deadline;
    }
    const result = await store.transition(current.id, now, iso(now), spec);
    if (!result.ok && result.reason === 'state') continue;
    if (!result.ok) return { outcome: done(`observation not stored: ${result.reason}`) };
    if (observation.suppressed && observation.status !== 'delivered') {
      const source: SuppressionSource =
        observation.suppressionSource ?? (observation.status === 'bounced' ? 'postmark_hard_bounce' : 'postmark_unsubscribe');
      await ctx.suppress(current, 'email', current.email!, source, observation.bounceType ?? observation.providerStatus);
    }
    if (undecided && observation.status === 'bounced') return { outcome: await decideFallback(ctx, current.id, 'email_bounced') };
    if (undecided && observation.status === 'failed') {
      return { outcome: await decideFallback(ctx, current.id, observation.suppressed ? 'email_suppressed' : 'email_rejected') };
    }
    // Delivered before its deadline (a planned check, not the deadline's own): its deadline job has nothing left to do.
    if (undecided && observation.status === 'delivered' && !final) await ctx.dropDeadline(current.id);
    return { outcome: done(`email ${observation.status}`), nextCheckAt: result.state === 'email_sent' ? next : undefined };
  }
  return { outcome: done('the notice kept moving; observation dropped') };
}

/** One SMS status check; plans the next one from the SMS plan. */
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
    if (next !== undefined) await ctx.deps.schedule.smsPoll(id, checkNumber(notice.smsPlan, next), next);
    return done(`sms status read failed: ${error.kind}`, error.kind === 'rate_limited' ? (error.retryAfterMs ?? 1000) : undefined);
  }
  const now = ctx.now();
  const terminal: NoticeState | undefined =
    observation.status === 'delivered' ? 'sms_delivered' : observation.status === 'failed' ? 'sms_failed' : undefined;
  const entries: LogEntry[] = [
    {
      type: 'sms.observed',
      attemptId: record.attemptId,
      providerStatus: observation.providerStatus,
      status: observation.status,
      observedAt: iso(now),
      nextCheckAt: terminal || next === undefined ? null : iso(next),
      errorCode: observation.errorCode,
    },
  ];
  if (terminal) entries.push(ctx.completed(notice, terminal, { smsChecks: 1 }));
  else if (next === undefined) entries.push(ctx.smsUnconfirmed(notice, record.checksDone + 1, observation.status));
  const result = await store.transition(id, now, iso(now), {
    name: terminal === 'sms_delivered' ? 'confirmSmsDelivered' : terminal === 'sms_failed' ? 'failSms' : 'observeSms',
    set: {
      [SMS.field('status')]: observation.status,
      [SMS.field('providerStatus')]: observation.providerStatus,
      [SMS.field('lastObservedAt')]: now,
      [SMS.field('checksDone')]: record.checksDone + 1,
      ...(next !== undefined && !terminal ? { [nextCheckField]: next } : {}),
    },
    unset: terminal || next === undefined ? [nextCheckField] : [],
    entries,
    due: terminal || next === undefined ? 'remove' : next,
  });
  if (result.ok && !terminal && next !== undefined) await ctx.deps.schedule.smsPoll(id, checkNumber(notice.smsPlan, next), next);
  return done(`sms ${observation.status}`);
}
