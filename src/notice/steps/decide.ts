import { iso } from '../../clock.js';
import { decideSms } from '../../policy/decide.js';
import type { NoticeFields } from '../../store/notices.js';
import { EMAIL, SMS } from '../channels.js';
import type { LogEntry } from '../entries.js';
import { smsIdempotencyKey } from '../notice.js';
import { done, retryAt, type StepOutcome } from '../outcome.js';
import { UNDECIDED_STATES, type FallbackReason } from '../states.js';
import type { Notice } from '../notice.js';
import type { RecipientPolicy } from '../../store/policies.js';
import { MAX_RACES, type StepContext } from './context.js';
import type { ObservationWrite } from './observe.js';

/**
 * Decides the fallback at most once: checks whether SMS may be used, and records either
 * `fallback.decided` (then asks for the SMS send) or `fallback.blocked` (the notice ends).
 */
export async function decideFallback(ctx: StepContext, id: string, reason: FallbackReason): Promise<StepOutcome> {
  return (await decide(ctx, id, reason, false)).outcome;
}

/** What the SMS decision reads besides the notice: the recipient's policy and whether the phone is suppressed. */
export interface DecisionInputs {
  policy: RecipientPolicy;
  smsSuppressed: boolean;
}

/** Starts the reads a decision on this notice needs, so that they can run beside another (the deadline's status read). */
export function readDecisionInputs(ctx: StepContext, notice: Notice): Promise<DecisionInputs> {
  return Promise.all([
    ctx.deps.policies.get(notice.recipientId),
    notice.phone ? ctx.deps.suppressions.has('sms', notice.phone) : false,
  ]).then(([policy, smsSuppressed]) => ({ policy, smsSuppressed }));
}

/**
 * A decision that records, in its own transition, the observation it follows (the deadline's own
 * read: `finalReadBeforeDecision`), made on `notice` as read before that observation, with its
 * inputs read beside it. When the notice moved meanwhile, nothing is written and `raced` says so:
 * the caller records the observation on its own and decides again.
 */
export interface DecisionAfterRead {
  notice: Notice;
  observed: ObservationWrite;
  inputs: Promise<DecisionInputs>;
}

/**
 * The decision itself. `sendHere`: the caller sends the SMS itself when nothing makes it wait
 * (no quiet hours): then no `sms-send` job is asked for, and `smsNow` says so.
 */
export async function decide(
  ctx: StepContext,
  id: string,
  reason: FallbackReason,
  sendHere: boolean,
  after?: DecisionAfterRead,
): Promise<{ outcome: StepOutcome; smsNow?: boolean; raced?: boolean }> {
  const { deps, store } = ctx;
  for (let race = 0; race < (after ? 1 : MAX_RACES); race += 1) {
    const notice = after ? after.notice : await ctx.notice(id);
    if (!notice) return { outcome: done('no such notice') };
    if (!UNDECIDED_STATES.includes(notice.state)) return { outcome: done(`already decided: ${notice.state}`) };
    const now = ctx.now();
    if (reason === 'email_deadline_elapsed' && now < notice.deadline) return { outcome: retryAt(notice.deadline, 'deadline not reached') };

    const { policy, smsSuppressed } = await (after?.inputs ?? readDecisionInputs(ctx, notice));
    const region = notice.region ?? policy.region;
    const decision = decideSms({
      phone: notice.phone,
      region,
      consentSms: policy.consent.sms,
      smsSuppressed,
      rules: deps.settings.rules,
      now,
      complianceDeadline: notice.complianceDeadline,
    });
    const blocked = decision.outcome === 'allowed' ? undefined : decision.block;
    const sendAt = decision.outcome === 'allowed' ? (decision.sendNotBefore ?? now) : now;

    const smsKey = smsIdempotencyKey(id);
    const common = {
      deadline: iso(notice.deadline),
      decidedAt: iso(now),
      lastEmailStatus: after ? String(after.observed.set[EMAIL.field('status')]) : (notice.emailChannel.status ?? null),
    };
    const entries: LogEntry[] = [
      ...(after ? [after.observed.entry] : []),
      {
        type: 'policy.checked',
        channel: 'sms',
        outcome: decision.outcome,
        policyVersion: policy.version,
        rulesVersion: deps.settings.rules?.version ?? null,
        region: region ?? null,
        // What a replay of this decision needs, so that the decision's own entries suffice.
        recipientId: notice.recipientId,
        hasPhone: notice.phone !== undefined,
        complianceDeadline: notice.complianceDeadline === undefined ? undefined : iso(notice.complianceDeadline),
      },
    ];
    if (blocked) {
      entries.push({ type: 'fallback.blocked', reason: blocked, ...common, fallbackReason: reason }, ctx.completed(notice, 'blocked'));
    } else if (decision.outcome === 'allowed') {
      entries.push({
        type: 'fallback.decided',
        reason,
        ...common,
        smsIdempotencyKey: smsKey,
        sendNotBefore: decision.sendNotBefore === undefined ? undefined : iso(decision.sendNotBefore),
        timingRule: decision.timingRule,
        complianceDeadline: notice.complianceDeadline === undefined ? undefined : iso(notice.complianceDeadline),
      });
    }
    const set: NoticeFields = { ...after?.observed.set, fallbackReason: reason, fallbackDecidedAt: now };
    if (blocked) set.blockReason = blocked;
    else {
      set[SMS.field('idempotencyKey')] = smsKey;
      if (decision.outcome === 'allowed' && decision.sendNotBefore !== undefined) set.smsSendNotBefore = decision.sendNotBefore;
      if (decision.outcome === 'allowed' && decision.from) set.smsFrom = decision.from;
    }
    const result = await store.transition(id, now, iso(now), {
      name: blocked ? 'blockFallback' : 'decideFallback',
      reached: reason === 'email_deadline_elapsed' ? 'deadline' : undefined,
      set,
      unset: [...new Set([...(after?.observed.unset ?? []), EMAIL.field('nextCheckAt')])],
      entries,
      due: blocked ? 'remove' : sendAt,
    });
    if (result.ok) {
      if (reason !== 'email_deadline_elapsed') await ctx.dropDeadline(id);
      const smsNow = !blocked && sendHere && sendAt <= now;
      if (!blocked && !smsNow) await deps.schedule.smsSend(id, sendAt);
      deps.log.info({ noticeId: id, reason, blocked }, 'fallback decided');
      return { outcome: done(blocked ? `fallback blocked: ${blocked}` : `fallback decided: ${reason}`), smsNow };
    }
    if (result.reason === 'guard') return { outcome: retryAt(notice.deadline, 'deadline not reached') };
    if (result.reason === 'missing') return { outcome: done('no such notice') };
    if (after) return { outcome: done('the notice moved during the read'), raced: true };
  }
  return { outcome: done('the notice kept moving; decision left to the next step') };
}
