import { iso } from '../../clock.js';
import { decideSms } from '../../policy/decide.js';
import type { NoticeFields, StoredNotice, TransitionSpec } from '../../store/notices.js';
import { EMAIL, SMS } from '../channels.js';
import type { LogEntry } from '../entries.js';
import { smsIdempotencyKey } from '../notice.js';
import { done, retryAt, type StepOutcome } from '../outcome.js';
import { UNDECIDED_STATES, type BlockReason, type FallbackReason } from '../states.js';
import type { Notice } from '../notice.js';
import type { RecipientPolicy } from '../../store/policies.js';
import { MAX_RACES, type StepContext } from './context.js';

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
    ctx.deps.policies.get(notice.recipientId, notice.tenant),
    notice.phone ? ctx.deps.suppressions.has('sms', notice.phone) : false,
  ]).then(([policy, smsSuppressed]) => ({ policy, smsSuppressed }));
}

/** What a fallback decision on a notice writes, and what follows it: a blocked SMS, or when the SMS may leave. */
export interface FallbackWrite {
  spec: TransitionSpec;
  blocked: BlockReason | undefined;
  /** When the SMS may leave (quiet hours may push it), for a decision that does not block it. */
  sendAt: number;
}

/**
 * The transition that decides the fallback on `notice` (as read) for `reason` at `now`: the
 * policy check for SMS, then `fallback.decided` or `fallback.blocked` (and `notice.completed`).
 * `lastEmailStatus`: the email's status the decision follows. Reads and writes nothing.
 */
export function fallbackWrite(
  ctx: StepContext,
  notice: Notice,
  reason: FallbackReason,
  inputs: DecisionInputs,
  now: number,
  lastEmailStatus: string | null,
): FallbackWrite {
  const { policy, smsSuppressed } = inputs;
  const { settings } = ctx.deps;
  const region = notice.region ?? policy.region;
  const decision = decideSms({
    phone: notice.phone,
    region,
    consentSms: policy.consent.sms,
    smsSuppressed,
    rules: settings.rules,
    now,
    complianceDeadline: notice.complianceDeadline,
  });
  const blocked = decision.outcome === 'allowed' ? undefined : decision.block;
  const sendAt = decision.outcome === 'allowed' ? (decision.sendNotBefore ?? now) : now;

  const smsKey = smsIdempotencyKey(notice.id);
  const common = { deadline: iso(notice.deadline), decidedAt: iso(now), lastEmailStatus };
  const entries: LogEntry[] = [
    {
      type: 'policy.checked',
      channel: 'sms',
      outcome: decision.outcome,
      policyVersion: policy.version,
      rulesVersion: settings.rules?.version ?? null,
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
  const set: NoticeFields = { fallbackReason: reason, fallbackDecidedAt: now };
  if (blocked) set.blockReason = blocked;
  else {
    set[SMS.field('idempotencyKey')] = smsKey;
    if (decision.outcome === 'allowed' && decision.sendNotBefore !== undefined) set.smsSendNotBefore = decision.sendNotBefore;
    if (decision.outcome === 'allowed' && decision.from) set.smsFrom = decision.from;
  }
  const spec: TransitionSpec = {
    name: blocked ? 'blockFallback' : 'decideFallback',
    reached: reason === 'email_deadline_elapsed' ? 'deadline' : undefined,
    set,
    unset: [EMAIL.field('nextCheckAt')],
    entries,
    due: blocked ? 'remove' : sendAt,
  };
  return { spec, blocked, sendAt };
}

/**
 * What follows a decision once it is written: an early one drops the deadline job; the SMS is
 * queued for `sendAt` unless the caller sends it now (`sendHere`, and nothing makes it wait),
 * which `smsNow` says. `left`: the notice as the decision's transition left it, which the send
 * then starts from (the transition read it when asked: `decisionRead`).
 */
export async function afterDecision(
  ctx: StepContext,
  id: string,
  reason: FallbackReason,
  write: FallbackWrite,
  sendHere: boolean,
  left?: StoredNotice,
): Promise<{ outcome: StepOutcome; smsNow: boolean }> {
  const { blocked, sendAt } = write;
  if (reason !== 'email_deadline_elapsed') await ctx.dropDeadline(id);
  const smsNow = !blocked && sendHere && sendAt <= ctx.now();
  if (smsNow) ctx.keepRead(left);
  if (!blocked && !smsNow) await ctx.deps.schedule.smsSend(id, sendAt);
  ctx.deps.log.info({ noticeId: id, reason, blocked }, 'fallback decided');
  return { outcome: done(blocked ? `fallback blocked: ${blocked}` : `fallback decided: ${reason}`), smsNow };
}

/**
 * What a decision's transition is to read back: the notice as it leaves it, when the SMS is sent
 * right after in the same run (the send's read of the notice is then the script's, no round trip).
 */
export function decisionRead(write: FallbackWrite, sendHere: boolean, now: number): { read: boolean } {
  return { read: sendHere && !write.blocked && write.sendAt <= now };
}

/**
 * The decision on the notice as it is now, retried while other steps move it. `sendHere`: the
 * caller sends the SMS itself when nothing makes it wait (no quiet hours): then no `sms-send`
 * job is asked for, and `smsNow` says so.
 */
export async function decide(
  ctx: StepContext,
  id: string,
  reason: FallbackReason,
  sendHere: boolean,
): Promise<{ outcome: StepOutcome; smsNow?: boolean }> {
  for (let race = 0; race < MAX_RACES; race += 1) {
    const notice = await ctx.notice(id);
    if (!notice) return { outcome: done('no such notice') };
    if (!UNDECIDED_STATES.includes(notice.state)) return { outcome: done(`already decided: ${notice.state}`) };
    const now = ctx.now();
    if (reason === 'email_deadline_elapsed' && now < notice.deadline) return { outcome: retryAt(notice.deadline, 'deadline not reached') };
    const write = fallbackWrite(ctx, notice, reason, await readDecisionInputs(ctx, notice), now, notice.emailChannel.status ?? null);
    const result = await ctx.store.transition(id, now, iso(now), write.spec, decisionRead(write, sendHere, now));
    if (result.ok) return afterDecision(ctx, id, reason, write, sendHere, result.notice);
    if (result.reason === 'guard') return { outcome: retryAt(notice.deadline, 'deadline not reached') };
    if (result.reason === 'missing') return { outcome: done('no such notice') };
  }
  return { outcome: done('the notice kept moving; decision left to the next step') };
}
