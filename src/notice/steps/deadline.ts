import { iso } from '../../clock.js';
import type { StatusObservation } from '../../providers/types.js';
import type { TransitionSpec } from '../../store/notices.js';
import { EMAIL } from '../channels.js';
import type { Notice } from '../notice.js';
import { done, retryAt, type StepOutcome } from '../outcome.js';
import { UNDECIDED_STATES } from '../states.js';
import type { StepContext } from './context.js';
import { afterDecision, decide, decisionRead, fallbackWrite, readDecisionInputs } from './decide.js';
import { sendSms } from './send.js';
import { emailObservationWrite, readEmailStatus, recordEmailObservation } from './observe.js';

/**
 * The deadline step: never before the deadline; reads the email status one last time and
 * records it; then, unless that read proved delivery, decides the fallback, and (`sendSms`, the
 * deadline job) hands the SMS over at once when nothing makes it wait (no quiet hours).
 *
 * When the last read leaves nothing but the fallback to follow (it neither delivers, bounces nor
 * fails the email), the read and the decision are one transition; a step that moved the notice
 * meanwhile (a webhook's delivery) makes that transition refuse, and the read is then recorded
 * on its own before the decision is tried again on the notice as it is.
 */
export async function runDeadline(ctx: StepContext, id: string, opts: { sendSms: boolean } = { sendSms: true }): Promise<StepOutcome> {
  const notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  // Run again after it decided (its worker died, say): the SMS it was to send is still its own.
  if (opts.sendSms && (notice.state === 'sms_pending' || notice.state === 'sms_sending')) return sendSmsHere(ctx, id);
  if (!UNDECIDED_STATES.includes(notice.state)) return done(`state is ${notice.state}`);
  const now = ctx.now();
  if (now < notice.deadline) return retryAt(notice.deadline, 'deadline not reached');

  if (notice.emailChannel.providerMessageId) {
    // The recipient's policy and suppression are read while the provider answers: what the
    // decision needs is in hand when the read is.
    const inputs = readDecisionInputs(ctx, notice);
    inputs.catch(() => undefined);
    const observation = await readEmailStatus(ctx, notice, true);
    if (observation && onlyTheFallbackFollows(notice, observation)) {
      const decided = await readAndDecide(ctx, notice, observation, await inputs, opts.sendSms);
      if (decided) return decided.smsNow ? withSms(ctx, id, decided.outcome) : decided.outcome;
      const current = await ctx.notice(id);
      if (current) await recordEmailObservation(ctx, current, observation, { final: true });
    } else if (observation) {
      await recordEmailObservation(ctx, notice, observation, { final: true });
    }
  } else {
    // No message to read: the read is recorded all the same, saying why.
    await ctx.store.transition(id, now, iso(now), {
      name: 'observeEmail',
      onlyFrom: UNDECIDED_STATES,
      entries: [
        {
          type: 'email.observed',
          attemptId: notice.emailChannel.attemptId,
          providerStatus: null,
          status: 'unknown',
          observedAt: iso(now),
          nextCheckAt: null,
          deadline: iso(notice.deadline),
          note: notice.state === 'accepted' ? 'email_not_sent' : 'email_send_unconfirmed',
          source: 'poll',
        },
      ],
    });
  }
  const { outcome, smsNow } = await decide(ctx, id, 'email_deadline_elapsed', opts.sendSms);
  return smsNow ? withSms(ctx, id, outcome) : outcome;
}

/** True when what the last read says of a notice still waiting for its email leaves only the fallback. */
function onlyTheFallbackFollows(notice: Notice, observation: StatusObservation): boolean {
  const decides = observation.status === 'delivered' || observation.status === 'bounced' || observation.status === 'failed';
  return !decides && !observation.suppressed && UNDECIDED_STATES.includes(notice.state);
}

/**
 * The last read and the fallback decision in one transition, on `notice` as read before the
 * read; undefined when the notice moved meanwhile (nothing was written).
 */
async function readAndDecide(
  ctx: StepContext,
  notice: Notice,
  observation: StatusObservation,
  inputs: Awaited<ReturnType<typeof readDecisionInputs>>,
  sendHere: boolean,
): Promise<{ outcome: StepOutcome; smsNow: boolean } | undefined> {
  const now = ctx.now();
  const observed = emailObservationWrite(notice, observation, { final: true }, undefined, now);
  const write = fallbackWrite(ctx, notice, 'email_deadline_elapsed', inputs, now, String(observed.set[EMAIL.field('status')]));
  const spec: TransitionSpec = {
    ...write.spec,
    set: { ...observed.set, ...write.spec.set },
    unset: [...new Set([...observed.unset, ...(write.spec.unset ?? [])])],
    entries: [observed.entry, ...write.spec.entries],
  };
  const result = await ctx.store.transition(notice.id, now, iso(now), spec, decisionRead(write, sendHere, now));
  if (result.ok) return afterDecision(ctx, notice.id, 'email_deadline_elapsed', write, sendHere, result.notice);
  if (result.reason === 'guard') return { outcome: retryAt(notice.deadline, 'deadline not reached'), smsNow: false };
  if (result.reason === 'missing') return { outcome: done('no such notice'), smsNow: false };
  return undefined;
}

/** The decision's outcome, then the SMS sent in the same job. */
async function withSms(ctx: StepContext, id: string, decided: StepOutcome): Promise<StepOutcome> {
  const sent = await sendSmsHere(ctx, id);
  return { ...sent, note: `${decided.note}; ${sent.note}` };
}

/**
 * The SMS send of a fallback the deadline decided, in the same run. What makes it wait (an
 * attempt in flight or in doubt, a provider's Retry-After) is asked of the scheduler: the
 * notice's job comes back for it then.
 */
async function sendSmsHere(ctx: StepContext, id: string): Promise<StepOutcome> {
  const outcome = await sendSms(ctx, id);
  if (outcome.kind !== 'retry') return outcome;
  await ctx.deps.schedule.smsSend(id, outcome.at);
  return done(`${outcome.note}; the sms is sent at ${iso(outcome.at)}`);
}
