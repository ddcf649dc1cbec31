import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import {
  ProviderError,
  type Channel,
  type EmailProvider,
  type SendResult,
  type SmsProvider,
  type StatusObservation,
} from '../providers/types.js';
import type { Prices } from '../config.js';
import { decideSms } from '../policy/decide.js';
import type { Rules } from '../policy/rules.js';
import type { PolicyStore } from '../store/policies.js';
import type { SuppressionSource, SuppressionStore } from '../store/suppressions.js';
import { costOf, smsSegments } from './cost.js';
import {
  channelField,
  ContentUnreadableError,
  type LogEntry,
  type Notice,
  type NoticeContent,
  type NoticeStore,
  type TransitionSpec,
} from '../store/notices.js';
import { newAttemptId } from './ids.js';
import { done, retryAt, type Scheduler, type StepOutcome } from './outcome.js';
import { nextCheckAfter, planSmsChecks } from './planner.js';
import { UNDECIDED_STATES, type FailureReason, type FallbackReason, type NoticeState } from './states.js';

export interface EngineSettings {
  providerTimeoutMs: number;
  minPollIntervalMs: number;
  maxChecksPerNotice: number;
  prices: Prices;
  /** The regional rules file; undefined: SMS allowed everywhere, no quiet hours. */
  rules: Rules | undefined;
  /** HERALD_MAX_RETRY_AFTER: the longest a provider's Retry-After is followed (default 5 min). */
  maxRetryAfterMs?: number;
}

/** HERALD_MAX_RETRY_AFTER's default. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 5 * 60_000;

export interface EngineDeps {
  store: NoticeStore;
  policies: PolicyStore;
  suppressions: SuppressionStore;
  email: EmailProvider;
  sms: SmsProvider;
  clock: Clock;
  log: Logger;
  schedule: Scheduler;
  settings: EngineSettings;
}

/**
 * An attempt still unsettled this long after its provider timeout is taken as lost (its
 * process died): the SDK gives up at the timeout, so no answer can still be on its way.
 */
const SETTLE_MARGIN_MS = 2_000;
/** Clock skew allowed between Herald and the SMS provider when looking for a send in doubt. */
const PROVIDER_CLOCK_SKEW_MS = 5_000;
const MAX_RETRY_DELAY_MS = 60_000;
/** Optimistic steps re-read the notice this many times when another worker moved it meanwhile. */
const MAX_RACES = 3;

const SEND_STATES: Record<Channel, { ready: NoticeState; sending: NoticeState; sent: NoticeState }> = {
  email: { ready: 'accepted', sending: 'email_sending', sent: 'email_sent' },
  sms: { ready: 'sms_pending', sending: 'sms_sending', sent: 'sms_sent' },
};

/**
 * The life of a notice after acceptance: send, observe, decide, fall back. Every method is one
 * step that reads the notice, talks to at most one provider, and writes its result through one
 * guarded transition, so any number of workers (and the reconciler) may run the same step
 * twice without a second email decision or a second SMS.
 */
export class NoticeEngine {
  constructor(private readonly deps: EngineDeps) {}

  private get store(): NoticeStore {
    return this.deps.store;
  }

  private now(): number {
    return this.deps.clock.now();
  }

  // ---- sending -------------------------------------------------------------------------------

  /** Hands the email to the provider once; resolves a send in doubt by searching first. */
  async sendEmail(id: string): Promise<StepOutcome> {
    const notice = await this.store.get(id);
    if (!notice) return done('no such notice');
    if (notice.state === 'accepted' && notice.emailPolicy !== 'allowed') {
      const reason: FallbackReason = notice.emailPolicy === 'suppressed' ? 'email_suppressed' : 'email_consent_missing';
      return this.decideFallback(id, reason);
    }
    return this.send('email', notice);
  }

  /**
   * Hands the fallback SMS to the provider at most once, not before the time the decision set
   * (quiet hours). After such a wait the email status is read once more: a delivery meanwhile
   * cancels the SMS that has not left yet.
   */
  async sendSms(id: string): Promise<StepOutcome> {
    let notice = await this.store.get(id);
    if (!notice) return done('no such notice');
    if (notice.state === 'sms_pending' && notice.smsSendNotBefore !== undefined) {
      if (this.now() < notice.smsSendNotBefore) return retryAt(notice.smsSendNotBefore, 'waiting for the end of quiet hours');
      if (notice.emailChannel.providerMessageId && notice.smsChannel.attempts === 0) {
        await this.observeEmail(notice, true);
        notice = await this.store.get(id);
        if (!notice) return done('no such notice');
      }
    }
    return this.send('sms', notice);
  }

  private async send(channel: Channel, notice: Notice): Promise<StepOutcome> {
    const states = SEND_STATES[channel];
    const record = channel === 'email' ? notice.emailChannel : notice.smsChannel;
    const now = this.now();
    const timeout = notice.providerTimeoutMs;
    const field = (name: Parameters<typeof channelField>[1]) => channelField(channel, name);

    if (notice.state !== states.ready && notice.state !== states.sending) return done(`state is ${notice.state}`);
    const to = channel === 'email' ? notice.email! : notice.phone!;

    let retryOf: string | undefined;
    if (notice.state === states.sending) {
      const settleBy = (record.attemptStartedAt ?? 0) + timeout + SETTLE_MARGIN_MS;
      if (!record.attemptSettled && now < settleBy) return retryAt(settleBy, 'an attempt is in flight');
      if (!record.attemptSettled || record.attemptInDoubt) {
        // Postmark is searched by Herald's key alone; an SMS in doubt is looked for by its body.
        let smsBody: string | undefined;
        if (channel === 'sms') {
          const read = await this.readContent(notice.id);
          if ('unavailable' in read) return this.contentUnavailable(notice, read.unavailable);
          smsBody = read.content.sms ?? read.content.subject;
        }
        let found: SendResult | null;
        try {
          found =
            channel === 'email'
              ? await this.deps.email.findByIdempotencyKey(record.idempotencyKey!, to)
              : ((await this.deps.sms.findSince(to, (record.attemptStartedAt ?? now) - PROVIDER_CLOCK_SKEW_MS, smsBody!))[0] ?? null);
        } catch (error) {
          return this.providerFailure(channel, notice, record.attemptId!, 'search', error, {});
        }
        if (found) {
          return this.accepted(channel, notice, record.attemptId!, found, 'provider_search', smsBody);
        }
      }
      retryOf = record.attemptId;
    }

    const read = await this.readContent(notice.id);
    if ('unavailable' in read) return this.contentUnavailable(notice, read.unavailable);
    const content = read.content;
    const smsBody = content.sms ?? content.subject;

    const attemptId = newAttemptId();
    const provider = channel === 'email' ? this.deps.email.name : this.deps.sms.name;
    const start = await this.store.transition(notice.id, now, iso(now), {
      name: channel === 'email' ? 'startEmailAttempt' : 'startSmsAttempt',
      onlyFrom: [notice.state],
      eq: { [field('attemptId')]: record.attemptId ?? '' },
      set: {
        [field('attemptId')]: attemptId,
        [field('attemptStartedAt')]: now,
        [field('attempts')]: record.attempts + 1,
        [field('attemptSettled')]: 0,
        [field('attemptInDoubt')]: 1,
      },
      entries: [
        {
          type: `${channel}.requested`,
          attemptId,
          idempotencyKey: record.idempotencyKey,
          provider,
          attempt: record.attempts + 1,
          retryOf,
        },
      ],
      due: now + timeout,
    });
    if (!start.ok) return done('another worker took the send');

    let result: SendResult;
    try {
      result =
        channel === 'email'
          ? await this.deps.email.send({
              to,
              subject: content.subject,
              text: content.text,
              html: content.html,
              idempotencyKey: record.idempotencyKey!,
              metadata: { notice_id: notice.id },
            })
          : await this.deps.sms.send({ to, body: smsBody, ...(notice.smsFrom ? { from: notice.smsFrom } : {}) });
    } catch (error) {
      return this.providerFailure(channel, notice, attemptId, 'send', error, { attemptStarted: true });
    }
    return this.accepted(channel, notice, attemptId, result, 'send', smsBody);
  }

  /** The notice's content, or why it cannot be had: gone (expired, purged) or unreadable (no key opens it). */
  private async readContent(id: string): Promise<{ content: NoticeContent } | { unavailable: 'gone' | 'unreadable' }> {
    try {
      const content = await this.store.content(id);
      return content ? { content } : { unavailable: 'gone' };
    } catch (error) {
      if (!(error instanceof ContentUnreadableError)) throw error;
      this.deps.log.warn({ err: error, noticeId: id }, 'notice content cannot be opened');
      return { unavailable: 'unreadable' };
    }
  }

  /**
   * Ends a notice Herald cannot go on with (SPEC §2 `failed`): a step needs its content and the
   * content is gone or cannot be opened. Retrying would never bring it back, so the notice ends
   * here, with `notice.failed` saying why, instead of failing its job over and over.
   */
  private async contentUnavailable(notice: Notice, content: 'gone' | 'unreadable'): Promise<StepOutcome> {
    const now = this.now();
    const record = notice.state.startsWith('sms_') ? notice.smsChannel : notice.emailChannel;
    const channel: Channel = notice.state.startsWith('sms_') ? 'sms' : 'email';
    const result = await this.store.transition(notice.id, now, iso(now), {
      name: 'fail',
      onlyFrom: [notice.state],
      // No other attempt started meanwhile.
      eq: { [channelField(channel, 'attemptId')]: record.attemptId ?? '' },
      unset: ['emailNextCheckAt', 'smsNextCheckAt'],
      entries: [
        {
          type: 'notice.failed',
          reason: 'content_unavailable' satisfies FailureReason,
          stateBefore: notice.state,
          content,
          channel,
          // A send in doubt may have reached the provider before Herald lost the content.
          attemptInDoubt: record.attemptId !== undefined && (!record.attemptSettled || record.attemptInDoubt) ? true : undefined,
        },
        this.completed(notice, 'failed'),
      ],
      due: 'remove',
    });
    if (!result.ok) return done('the notice moved on before it could fail');
    this.deps.log.warn({ noticeId: notice.id, stateBefore: notice.state, content }, 'notice failed: content unavailable');
    if (UNDECIDED_STATES.includes(notice.state)) await this.dropDeadline(notice.id);
    return done(`failed: content_unavailable (${content})`);
  }

  /** Stores a provider's acceptance of an attempt and plans the first status check. */
  private async accepted(
    channel: Channel,
    notice: Notice,
    attemptId: string,
    result: SendResult,
    resolvedBy: 'send' | 'provider_search',
    smsBody?: string,
  ): Promise<StepOutcome> {
    const states = SEND_STATES[channel];
    const field = (name: Parameters<typeof channelField>[1]) => channelField(channel, name);
    const now = this.now();
    const plan = channel === 'email' ? this.emailChecksBeforeDeadline(notice) : planSmsChecks(now, this.limits());
    const nextCheck = nextCheckAfter(plan, now);
    const entry: LogEntry = {
      type: `${channel}.accepted`,
      attemptId,
      providerMessageId: result.providerMessageId,
      providerStatus: result.providerStatus,
      resolvedBy: resolvedBy === 'send' ? undefined : resolvedBy,
    };
    const set: Record<string, string | number> = {
      [field('providerMessageId')]: result.providerMessageId,
      [field('attemptSettled')]: 1,
      [field('attemptInDoubt')]: 0,
      [field('status')]: 'pending',
    };
    if (channel === 'sms') {
      const limits = this.limits();
      Object.assign(set, { smsPlanAt: now, smsPlanFloorMs: limits.minPollIntervalMs, smsPlanMax: limits.maxChecks });
    }
    if (channel === 'sms' && smsBody !== undefined) set.smsSegments = smsSegments(smsBody);
    if (nextCheck !== undefined) set[field('nextCheckAt')] = nextCheck;
    const due = channel === 'email' ? (nextCheck ?? notice.deadline) : (nextCheck ?? 'remove');
    const stored = await this.store.transition(notice.id, now, iso(now), {
      name: channel === 'email' ? 'recordEmailAccepted' : 'recordSmsAccepted',
      eq: { [field('attemptId')]: attemptId },
      set,
      entries: [entry],
      due,
    });
    if (!stored.ok) {
      // The notice moved on while the provider was answering (the deadline decided the
      // fallback, say). The message exists all the same: the log must say so.
      await this.store.transition(notice.id, now, iso(now), {
        name: 'annotate',
        set: { [field('providerMessageId')]: result.providerMessageId },
        entries: [{ ...entry, late: true }],
      });
      return done('accepted after the notice moved on');
    }
    if (nextCheck !== undefined) {
      const check = plan.indexOf(nextCheck) + 1;
      if (channel === 'email') await this.deps.schedule.emailPoll(notice.id, check, nextCheck);
      else await this.deps.schedule.smsPoll(notice.id, check, nextCheck);
    }
    return done(`${channel} accepted`);
  }

  /** Records a failed provider call; a refusal of the message itself ends the channel. */
  private async providerFailure(
    channel: Channel,
    notice: Notice,
    attemptId: string,
    operation: 'send' | 'search',
    thrown: unknown,
    opts: { attemptStarted?: boolean },
  ): Promise<StepOutcome> {
    if (!(thrown instanceof ProviderError)) throw thrown;
    const error = this.bounded(thrown);
    const field = (name: Parameters<typeof channelField>[1]) => channelField(channel, name);
    const now = this.now();
    const record = channel === 'email' ? notice.emailChannel : notice.smsChannel;
    const attempts = record.attempts + (opts.attemptStarted ? 1 : 0);
    const retryTime = now + Math.max(error.retryAfterMs ?? 0, backoff(attempts));
    const entry = this.providerErrorEntry(channel, attemptId, operation, error, notice.providerTimeoutMs);
    const sending = SEND_STATES[channel].sending;
    this.deps.log.warn({ err: error, noticeId: notice.id, channel, operation, kind: error.kind }, 'provider call failed');

    if (error.kind === 'rejected' && operation === 'send') {
      if (error.suppressed) {
        const to = channel === 'email' ? notice.email! : notice.phone!;
        await this.suppress(
          notice,
          channel,
          to,
          channel === 'email' ? 'postmark_inactive' : 'twilio_opt_out',
          `provider code ${error.providerCode ?? 'unknown'}`,
        );
      }
      if (channel === 'email') {
        await this.store.transition(notice.id, now, iso(now), {
          name: 'settleEmailAttempt',
          eq: { [field('attemptId')]: attemptId },
          set: { [field('attemptSettled')]: 1, [field('attemptInDoubt')]: 0, [field('status')]: 'failed' },
          entries: [entry],
        });
        return this.decideFallback(notice.id, error.suppressed ? 'email_suppressed' : 'email_rejected');
      }
      await this.store.transition(notice.id, now, iso(now), {
        name: 'rejectSms',
        eq: { [field('attemptId')]: attemptId },
        set: { [field('attemptSettled')]: 1, [field('attemptInDoubt')]: 0, [field('status')]: 'failed' },
        entries: [entry, this.completed(notice, 'sms_failed')],
        due: 'remove',
      });
      return done('sms rejected');
    }

    // A 429 was never processed; a timeout or a 5xx may have sent the message.
    const inDoubt = operation === 'search' || error.kind !== 'rate_limited';
    await this.store.transition(notice.id, now, iso(now), {
      name: channel === 'email' ? 'settleEmailAttempt' : 'settleSmsAttempt',
      eq: { [field('attemptId')]: attemptId },
      set: { [field('attemptSettled')]: 1, [field('attemptInDoubt')]: inDoubt ? 1 : 0 },
      entries: [entry],
      due: retryTime,
    });
    return retryAt(retryTime, `${channel} ${operation}: ${error.kind}`);
  }

  private providerErrorEntry(
    channel: Channel,
    attemptId: string | undefined,
    operation: string,
    error: ProviderError,
    providerTimeoutMs: number,
  ): LogEntry {
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

  /** The error with its Retry-After clamped to HERALD_MAX_RETRY_AFTER. */
  private bounded(error: ProviderError): ProviderError {
    return error.withRetryAfterAtMost(this.deps.settings.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS);
  }

  // ---- observing -----------------------------------------------------------------------------

  /** One planned email status check; asks for the next one. */
  async pollEmail(id: string): Promise<StepOutcome> {
    const notice = await this.store.get(id);
    if (!notice) return done('no such notice');
    const observable = notice.state === 'email_sent' || (notice.state === 'sms_pending' && notice.emailChannel.providerMessageId);
    if (!observable) return done(`state is ${notice.state}`);
    const { outcome, nextCheckAt } = await this.observeEmail(notice, false);
    if (nextCheckAt !== undefined && nextCheckAt < notice.deadline) {
      await this.deps.schedule.emailPoll(id, notice.pollPlan.filter((at) => at < nextCheckAt).length + 1, nextCheckAt);
    }
    return outcome;
  }

  /**
   * Reads the email status and records it. A delivery ends the notice (or, after the fallback
   * was decided but before the SMS left, cancels the SMS); a bounce or a refusal decides the
   * fallback early; anything else waits for the next check or the deadline, whose time it
   * returns as `nextCheckAt` when the notice still waits for the email.
   */
  private async observeEmail(notice: Notice, final: boolean): Promise<{ outcome: StepOutcome; nextCheckAt?: number }> {
    const record = notice.emailChannel;
    let observation: StatusObservation;
    try {
      observation = await this.deps.email.status(record.providerMessageId!);
    } catch (thrown) {
      if (!(thrown instanceof ProviderError)) throw thrown;
      const error = this.bounded(thrown);
      const now = this.now();
      const pauseMs = error.kind === 'rate_limited' ? (error.retryAfterMs ?? 1000) : undefined;
      const planned = final ? undefined : nextCheckAfter(this.emailChecksBeforeDeadline(notice), now);
      // A 429 pushes this notice's next check past the provider's Retry-After (never past the deadline).
      const next = planned === undefined ? undefined : Math.min(Math.max(planned, now + (pauseMs ?? 0)), notice.deadline);
      await this.store.transition(notice.id, now, iso(now), {
        name: 'observeEmail',
        set: next !== undefined ? { emailNextCheckAt: next } : {},
        unset: next === undefined ? ['emailNextCheckAt'] : [],
        entries: [this.providerErrorEntry('email', record.attemptId, 'status', error, notice.providerTimeoutMs)],
        due: UNDECIDED_STATES.includes(notice.state) ? (next ?? notice.deadline) : undefined,
      });
      return {
        outcome: done(`status read failed: ${error.kind}`, pauseMs),
        nextCheckAt: UNDECIDED_STATES.includes(notice.state) ? next : undefined,
      };
    }

    for (let race = 0; race < MAX_RACES; race += 1) {
      const current = race === 0 ? notice : await this.store.get(notice.id);
      if (!current) return { outcome: done('no such notice') };
      const now = this.now();
      const undecided = UNDECIDED_STATES.includes(current.state);
      const late = !undecided;
      const next = final || !undecided ? undefined : nextCheckAfter(this.emailChecksBeforeDeadline(current), now);
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
      const set: Record<string, string | number> = {
        emailStatus: observation.status,
        emailProviderStatus: observation.providerStatus,
        emailLastObservedAt: now,
        emailChecksDone: current.emailChannel.checksDone + 1,
      };
      if (next !== undefined) set.emailNextCheckAt = next;
      const spec: TransitionSpec = {
        name: 'observeEmail',
        onlyFrom: [current.state],
        set,
        unset: next === undefined ? ['emailNextCheckAt'] : [],
        entries: [observed],
      };
      if (observation.status === 'delivered') {
        if (undecided) {
          Object.assign(spec, { name: 'confirmEmailDelivered', due: 'remove' });
          spec.entries.push(this.completed(current, 'email_delivered', { emailChecks: 1 }));
        } else if (current.state === 'sms_pending') {
          Object.assign(spec, { name: 'cancelSmsForLateDelivery', due: 'remove' });
          spec.entries.push(
            { type: 'sms.canceled', reason: 'email_delivered_late' },
            this.completed(current, 'email_delivered', { emailChecks: 1 }),
          );
        }
      } else if (undecided) {
        spec.due = next ?? current.deadline;
      }
      const result = await this.store.transition(current.id, now, iso(now), spec);
      if (!result.ok && result.reason === 'state') continue;
      if (!result.ok) return { outcome: done(`observation not stored: ${result.reason}`) };
      if (observation.suppressed && observation.status !== 'delivered') {
        const source: SuppressionSource = observation.status === 'bounced' ? 'postmark_hard_bounce' : 'postmark_unsubscribe';
        await this.suppress(current, 'email', current.email!, source, observation.bounceType ?? observation.providerStatus);
      }
      if (undecided && observation.status === 'bounced') return { outcome: await this.decideFallback(current.id, 'email_bounced') };
      if (undecided && observation.status === 'failed') {
        return { outcome: await this.decideFallback(current.id, observation.suppressed ? 'email_suppressed' : 'email_rejected') };
      }
      // Delivered before its deadline (a planned check, not the deadline's own): its deadline job has nothing left to do.
      if (undecided && observation.status === 'delivered' && !final) await this.dropDeadline(current.id);
      return { outcome: done(`email ${observation.status}`), nextCheckAt: result.state === 'email_sent' ? next : undefined };
    }
    return { outcome: done('the notice kept moving; observation dropped') };
  }

  /** One SMS status check; plans the next one from the SMS plan. */
  async pollSms(id: string): Promise<StepOutcome> {
    const notice = await this.store.get(id);
    if (!notice) return done('no such notice');
    if (notice.state !== 'sms_sent') return done(`state is ${notice.state}`);
    const record = notice.smsChannel;
    let observation: StatusObservation;
    const now0 = this.now();
    const next = nextCheckAfter(notice.smsPlan, now0);
    try {
      observation = await this.deps.sms.status(record.providerMessageId!);
    } catch (thrown) {
      if (!(thrown instanceof ProviderError)) throw thrown;
      const error = this.bounded(thrown);
      const now = this.now();
      const entries = [this.providerErrorEntry('sms', record.attemptId, 'status', error, notice.providerTimeoutMs)];
      if (next === undefined) entries.push(this.smsUnconfirmed(notice, record.checksDone));
      await this.store.transition(id, now, iso(now), {
        name: 'observeSms',
        set: next !== undefined ? { smsNextCheckAt: next } : {},
        unset: next === undefined ? ['smsNextCheckAt'] : [],
        entries,
        due: next ?? 'remove',
      });
      if (next !== undefined) await this.deps.schedule.smsPoll(id, notice.smsPlan.indexOf(next) + 1, next);
      return done(`sms status read failed: ${error.kind}`, error.kind === 'rate_limited' ? (error.retryAfterMs ?? 1000) : undefined);
    }
    const now = this.now();
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
    if (terminal) entries.push(this.completed(notice, terminal, { smsChecks: 1 }));
    else if (next === undefined) entries.push(this.smsUnconfirmed(notice, record.checksDone + 1, observation.status));
    const result = await this.store.transition(id, now, iso(now), {
      name: terminal === 'sms_delivered' ? 'confirmSmsDelivered' : terminal === 'sms_failed' ? 'failSms' : 'observeSms',
      set: {
        smsStatus: observation.status,
        smsProviderStatus: observation.providerStatus,
        smsLastObservedAt: now,
        smsChecksDone: record.checksDone + 1,
        ...(next !== undefined && !terminal ? { smsNextCheckAt: next } : {}),
      },
      unset: terminal || next === undefined ? ['smsNextCheckAt'] : [],
      entries,
      due: terminal || next === undefined ? 'remove' : next,
    });
    if (result.ok && !terminal && next !== undefined) await this.deps.schedule.smsPoll(id, notice.smsPlan.indexOf(next) + 1, next);
    return done(`sms ${observation.status}`);
  }

  // ---- deciding ------------------------------------------------------------------------------

  /**
   * The deadline step: never before the deadline; reads the email status one last time and
   * records it; then, unless that read proved delivery, decides the fallback.
   */
  async runDeadline(id: string): Promise<StepOutcome> {
    const notice = await this.store.get(id);
    if (!notice) return done('no such notice');
    if (!UNDECIDED_STATES.includes(notice.state)) return done(`state is ${notice.state}`);
    const now = this.now();
    if (now < notice.deadline) return retryAt(notice.deadline, 'deadline not reached');

    if (notice.emailChannel.providerMessageId) {
      await this.observeEmail(notice, true);
    } else {
      await this.store.transition(id, now, iso(now), {
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
          },
        ],
      });
    }
    return this.decideFallback(id, 'email_deadline_elapsed');
  }

  /**
   * Decides the fallback at most once: checks whether SMS may be used, and records either
   * `fallback.decided` (then asks for the SMS send) or `fallback.blocked` (the notice ends).
   */
  async decideFallback(id: string, reason: FallbackReason): Promise<StepOutcome> {
    for (let race = 0; race < MAX_RACES; race += 1) {
      const notice = await this.store.get(id);
      if (!notice) return done('no such notice');
      if (!UNDECIDED_STATES.includes(notice.state)) return done(`already decided: ${notice.state}`);
      const now = this.now();
      if (reason === 'email_deadline_elapsed' && now < notice.deadline) return retryAt(notice.deadline, 'deadline not reached');

      const policy = await this.deps.policies.get(notice.recipientId);
      const region = notice.region ?? policy.region;
      const decision = decideSms({
        phone: notice.phone,
        region,
        consentSms: policy.consent.sms,
        smsSuppressed: notice.phone ? await this.deps.suppressions.has('sms', notice.phone) : false,
        rules: this.deps.settings.rules,
        now,
        complianceDeadline: notice.complianceDeadline,
      });
      const blocked = decision.outcome === 'allowed' ? undefined : decision.block;
      const sendAt = decision.outcome === 'allowed' ? (decision.sendNotBefore ?? now) : now;

      const smsIdempotencyKey = `${id}-sms`;
      const common = {
        reason,
        deadline: iso(notice.deadline),
        decidedAt: iso(now),
        lastEmailStatus: notice.emailChannel.status ?? null,
      };
      const entries: LogEntry[] = [
        {
          type: 'policy.checked',
          channel: 'sms',
          outcome: decision.outcome,
          policyVersion: policy.version,
          rulesVersion: this.deps.settings.rules?.version ?? null,
          region: region ?? null,
          // What a replay of this decision needs, so that the decision's own entries suffice.
          recipientId: notice.recipientId,
          hasPhone: notice.phone !== undefined,
          complianceDeadline: notice.complianceDeadline === undefined ? undefined : iso(notice.complianceDeadline),
        },
      ];
      if (blocked) {
        entries.push({ type: 'fallback.blocked', ...common, fallbackReason: reason, reason: blocked }, this.completed(notice, 'blocked'));
      } else if (decision.outcome === 'allowed') {
        entries.push({
          type: 'fallback.decided',
          ...common,
          smsIdempotencyKey,
          sendNotBefore: decision.sendNotBefore === undefined ? undefined : iso(decision.sendNotBefore),
          timingRule: decision.timingRule,
          complianceDeadline: notice.complianceDeadline === undefined ? undefined : iso(notice.complianceDeadline),
        });
      }
      const set: Record<string, string | number> = { fallbackReason: reason, fallbackDecidedAt: now };
      if (blocked) set.blockReason = blocked;
      else {
        set.smsIdempotencyKey = smsIdempotencyKey;
        if (decision.outcome === 'allowed' && decision.sendNotBefore !== undefined) set.smsSendNotBefore = decision.sendNotBefore;
        if (decision.outcome === 'allowed' && decision.from) set.smsFrom = decision.from;
      }
      const result = await this.store.transition(id, now, iso(now), {
        name: blocked ? 'blockFallback' : 'decideFallback',
        reached: reason === 'email_deadline_elapsed' ? 'deadline' : undefined,
        set,
        unset: ['emailNextCheckAt'],
        entries,
        due: blocked ? 'remove' : sendAt,
      });
      if (result.ok) {
        if (reason !== 'email_deadline_elapsed') await this.dropDeadline(id);
        if (!blocked) await this.deps.schedule.smsSend(id, sendAt);
        this.deps.log.info({ noticeId: id, reason, blocked }, 'fallback decided');
        return done(blocked ? `fallback blocked: ${blocked}` : `fallback decided: ${reason}`);
      }
      if (result.reason === 'guard') return retryAt(notice.deadline, 'deadline not reached');
      if (result.reason === 'missing') return done('no such notice');
    }
    return done('the notice kept moving; decision left to the next step');
  }

  // ---- reconciling ---------------------------------------------------------------------------

  /**
   * Drives an overdue notice forward with whatever step its state needs; used by the
   * reconciler when a job was lost, killed or never enqueued.
   */
  async drive(id: string): Promise<StepOutcome> {
    const notice = await this.store.get(id);
    if (!notice) return done('no such notice');
    const now = this.now();
    switch (notice.state) {
      case 'accepted':
      case 'email_sending':
        return now >= notice.deadline ? this.runDeadline(id) : this.sendEmail(id);
      case 'email_sent': {
        if (now >= notice.deadline) return this.runDeadline(id);
        // Polls go through their queue, so the provider's shared status-call limit holds for
        // repairs too; the job ID makes this a no-op when the check is already queued.
        const planned = notice.emailChannel.nextCheckAt ?? now;
        await this.deps.schedule.emailPoll(id, notice.pollPlan.filter((at) => at < planned).length + 1, now);
        return retryAt(now + this.deps.settings.minPollIntervalMs, 'status check queued');
      }
      case 'sms_pending':
      case 'sms_sending':
        return this.sendSms(id);
      case 'sms_sent': {
        const planned = notice.smsChannel.nextCheckAt ?? now;
        await this.deps.schedule.smsPoll(id, Math.max(1, notice.smsPlan.filter((at) => at < planned).length + 1), now);
        return retryAt(now + this.deps.settings.minPollIntervalMs, 'status check queued');
      }
      default:
        await this.store.transition(id, now, iso(now), { name: 'annotate', entries: [], due: 'remove' });
        return done(`state is ${notice.state}`);
    }
  }

  /**
   * Removes the deadline job of a notice decided before its deadline: it would only find the
   * notice done, and meanwhile it holds memory and a row in Bull Board. Failing here is
   * harmless, as the job then runs and does nothing.
   */
  private async dropDeadline(id: string): Promise<void> {
    try {
      await this.deps.schedule.dropDeadline(id);
    } catch (error) {
      this.deps.log.debug({ err: error, noticeId: id }, 'deadline job not removed');
    }
  }

  /** Adds an address to the suppression list because a provider said so, and logs it (without the address). */
  private async suppress(notice: Notice, channel: Channel, address: string, source: SuppressionSource, reason: string): Promise<void> {
    const now = this.now();
    const added = await this.deps.suppressions.add({ channel, address, reason, source, noticeId: notice.id, createdAt: iso(now) });
    if (!added) return;
    await this.store.transition(notice.id, now, iso(now), { name: 'annotate', entries: [{ type: 'suppression.added', channel, source, reason }] });
  }

  /** The `notice.completed` entry, with what the notice cost at the configured prices. */
  private completed(notice: Notice, state: NoticeState, extra: { emailChecks?: number; smsChecks?: number } = {}): LogEntry {
    const cost = costOf(
      {
        emailSends: notice.emailChannel.providerMessageId ? 1 : 0,
        emailChecks: notice.emailChannel.checksDone + (extra.emailChecks ?? 0),
        smsSegments: notice.smsSegments,
        smsChecks: notice.smsChannel.checksDone + (extra.smsChecks ?? 0),
      },
      this.deps.settings.prices,
    );
    const checks = {
      email: notice.emailChannel.checksDone + (extra.emailChecks ?? 0),
      sms: notice.smsChannel.checksDone + (extra.smsChecks ?? 0),
    };
    return { type: 'notice.completed', state, cost, checks };
  }

  /**
   * `sms.unconfirmed`: the SMS plan has run out without a final status from the provider (a
   * message that stays `sent`, status reads that never answer). Herald does nothing more for the
   * notice, which stays `sms_sent`; the entry says why, and lets the notice leave Redis.
   */
  private smsUnconfirmed(notice: Notice, checks: number, lastStatus?: string): LogEntry {
    return {
      type: 'sms.unconfirmed',
      attemptId: notice.smsChannel.attemptId,
      reason: 'sms_plan_ended',
      lastStatus: lastStatus ?? notice.smsChannel.status ?? null,
      checks,
    };
  }

  /** The email checks the poll jobs run: the plan without its last check, which the deadline step makes. */
  private emailChecksBeforeDeadline(notice: Notice): number[] {
    return notice.pollPlan.filter((at) => at < notice.deadline);
  }

  private limits() {
    return { minPollIntervalMs: this.deps.settings.minPollIntervalMs, maxChecks: this.deps.settings.maxChecksPerNotice };
  }
}

function backoff(attempts: number): number {
  return Math.min(MAX_RETRY_DELAY_MS, 1000 * 2 ** Math.max(0, attempts - 1));
}
