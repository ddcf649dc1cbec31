import { iso } from '../../clock.js';
import { ProviderError, type EmailMessage, type SendResult, type SmsMessage } from '../../providers/types.js';
import { ContentUnreadableError, type NoticeContent, type NoticeFields } from '../../store/notices.js';
import type { Notice } from '../notice.js';
import { EMAIL, refusedAddressSource, SMS, type ChannelPort } from '../channels.js';
import { smsSegments } from '../cost.js';
import { providerErrorEntry, type Accepted, type SmsUnconfirmed } from '../entries.js';
import { newAttemptId } from '../ids.js';
import { done, retryAt, type StepOutcome } from '../outcome.js';
import { nextCheckAfter, planSmsChecks, smsSearchEndsAt } from '../planner.js';
import { UNDECIDED_STATES, type FailureReason, type FallbackReason } from '../states.js';
import { emailChecksBeforeDeadline, type StepContext } from './context.js';
import { decideFallback } from './decide.js';
import { observeEmail } from './observe.js';

/**
 * An attempt still unsettled this long after its provider timeout is taken as lost (its
 * process died): the SDK gives up at the timeout, so no answer can still be on its way.
 */
const SETTLE_MARGIN_MS = 2_000;
/** Clock skew allowed between Herald and the SMS provider when looking for a send in doubt. */
const PROVIDER_CLOCK_SKEW_MS = 5_000;
const MAX_RETRY_DELAY_MS = 60_000;
/**
 * How long after an email's absence time its search comes back: by then the feed sweep (every
 * second, a one-second long poll) has read the events queue to its end past it, which the
 * absence needs.
 */
const FEED_READ_MARGIN_MS = 2_000;

/** Hands the email to the provider once; resolves a send in doubt by searching first. */
export async function sendEmail(ctx: StepContext, id: string): Promise<StepOutcome> {
  const notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  if (notice.state === 'accepted' && notice.emailPolicy !== 'allowed') {
    const reason: FallbackReason = notice.emailPolicy === 'suppressed' ? 'email_suppressed' : 'email_consent_missing';
    return decideFallback(ctx, id, reason);
  }
  return send(ctx, EMAIL, notice);
}

/**
 * Hands the fallback SMS to the provider at most once, not before the time the decision set
 * (quiet hours). After such a wait the email status is read once more: a delivery meanwhile
 * cancels the SMS that has not left yet.
 */
export async function sendSms(ctx: StepContext, id: string): Promise<StepOutcome> {
  let notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  if (notice.state === 'sms_pending' && notice.smsSendNotBefore !== undefined) {
    if (ctx.now() < notice.smsSendNotBefore) return retryAt(notice.smsSendNotBefore, 'waiting for the end of quiet hours');
    if (notice.emailChannel.providerMessageId && notice.smsChannel.attempts === 0) {
      await observeEmail(ctx, notice, true);
      notice = await ctx.notice(id);
      if (!notice) return done('no such notice');
    }
  }
  return send(ctx, SMS, notice);
}

/** The SMS body: its own text, or the subject when the notice gave none. */
const smsBodyOf = (content: NoticeContent) => content.sms ?? content.subject;

async function send(ctx: StepContext, port: ChannelPort, notice: Notice): Promise<StepOutcome> {
  const { states } = port;
  const record = port.record(notice);
  const now = ctx.now();
  const timeout = notice.providerTimeoutMs;

  if (notice.state !== states.ready && notice.state !== states.sending) return done(`state is ${notice.state}`);
  // The search for this SMS in doubt ended unanswered (smsSearchEnded): a duplicate job must not send it now.
  if (port === SMS && notice.smsSearchEndedAt !== undefined) return done('the search for the sms in doubt has ended');

  let retryOf: string | undefined;
  if (notice.state === states.sending) {
    const settleBy = (record.attemptStartedAt ?? 0) + timeout + SETTLE_MARGIN_MS;
    // An attempt in flight, or one in doubt (a timeout or a 5xx): the provider may still carry it
    // out, or list it late, until the margin has passed. Searching before would find nothing and
    // send again (two SMS; the schedule the protocol model found, model/README.md).
    if ((!record.attemptSettled || record.attemptInDoubt) && now < settleBy)
      return retryAt(settleBy, 'an attempt is in flight or in doubt');
    if (!record.attemptSettled || record.attemptInDoubt) {
      // Postmark is searched by Herald's key alone; an SMS in doubt is looked for by its body.
      // The send as it was made goes along for providers that find by replaying it (Infrai).
      const read = await readContent(ctx, notice.id);
      if (port === SMS && 'unavailable' in read) return contentUnavailable(ctx, notice, read.unavailable);
      const content = 'content' in read ? read.content : undefined;
      const smsBody = port === SMS && content ? smsBodyOf(content) : undefined;
      let found: SendResult | null;
      try {
        found = await searchInDoubt(ctx, port, notice, content);
      } catch (error) {
        if (port === SMS && error instanceof ProviderError) {
          const searchUntil = smsSearchEndsAt(record.attemptStartedAt ?? notice.createdAt, ctx.limits());
          if (ctx.now() >= searchUntil) return smsSearchEnded(ctx, notice, error, searchUntil);
        }
        return providerFailure(ctx, port, notice, record.attemptId!, 'search', error, {});
      }
      if (found) return accepted(ctx, port, notice, record.attemptId!, found, 'provider_search', smsBody);
      // "None" from a provider whose feed establishes absence (SES): the attempt never arrived.
      if (port === EMAIL && ctx.deps.email.feedAbsenceMs !== undefined) {
        const stop = await emailNotArrived(ctx, notice, ctx.deps.email.feedAbsenceMs);
        if (stop) return stop;
      }
    }
    retryOf = record.attemptId;
  }

  const read = await readContent(ctx, notice.id);
  if ('unavailable' in read) return contentUnavailable(ctx, notice, read.unavailable);
  const content = read.content;

  const attemptId = newAttemptId();
  const start = await ctx.store.transition(notice.id, now, iso(now), {
    name: port.transitions.start,
    onlyFrom: [notice.state],
    eq: { [port.field('attemptId')]: record.attemptId ?? '' },
    set: {
      [port.field('attemptId')]: attemptId,
      [port.field('attemptStartedAt')]: now,
      [port.field('attempts')]: record.attempts + 1,
      [port.field('attemptSettled')]: 0,
      [port.field('attemptInDoubt')]: 1,
      // Which provider's events may speak of this attempt (src/notice/steps/webhook.ts).
      [port.field('provider')]: port.providerName(ctx.deps),
    },
    entries: [
      {
        type: `${port.channel}.requested`,
        attemptId,
        idempotencyKey: record.idempotencyKey,
        provider: port.providerName(ctx.deps),
        attempt: record.attempts + 1,
        retryOf,
      },
    ],
    due: now + timeout,
  });
  if (!start.ok) return done('another worker took the send');

  let result: SendResult;
  try {
    result = await handOver(ctx, port, notice, content);
  } catch (error) {
    return providerFailure(ctx, port, notice, attemptId, 'send', error, { attemptStarted: true });
  }
  return accepted(ctx, port, notice, attemptId, result, 'send', smsBodyOf(content));
}

/** The one provider call of a send: the email with Herald's key in its metadata, or the SMS. */
function handOver(ctx: StepContext, port: ChannelPort, notice: Notice, content: NoticeContent): Promise<SendResult> {
  return port === EMAIL ? ctx.deps.email.send(emailMessage(notice, content)) : ctx.deps.sms.send(smsMessage(notice, content));
}

function emailMessage(notice: Notice, content: NoticeContent): EmailMessage {
  return {
    to: EMAIL.address(notice),
    subject: content.subject,
    text: content.text,
    html: content.html,
    idempotencyKey: notice.emailChannel.idempotencyKey,
    metadata: { notice_id: notice.id },
  };
}

function smsMessage(notice: Notice, content: NoticeContent): SmsMessage {
  const key = notice.smsChannel.idempotencyKey;
  return {
    to: SMS.address(notice),
    body: smsBodyOf(content),
    ...(notice.smsFrom ? { from: notice.smsFrom } : {}),
    ...(key ? { idempotencyKey: key } : {}),
  };
}

/**
 * Asks the provider whether an attempt in doubt reached it: Postmark by Herald's key, Twilio by
 * number, time and body, Infrai by replaying the send under its key (`content` absent: the
 * content is gone, and only a search that needs none can still find the email).
 */
async function searchInDoubt(
  ctx: StepContext,
  port: ChannelPort,
  notice: Notice,
  content: NoticeContent | undefined,
): Promise<SendResult | null> {
  const record = port.record(notice);
  const to = port.address(notice);
  if (port === EMAIL) {
    const lastAttemptAgeMs = ctx.now() - (record.attemptStartedAt ?? notice.createdAt);
    const window = { since: notice.createdAt, lastAttemptAgeMs };
    return ctx.deps.email.findByIdempotencyKey(record.idempotencyKey!, to, window, content && emailMessage(notice, content));
  }
  const since = (record.attemptStartedAt ?? ctx.now()) - PROVIDER_CLOCK_SKEW_MS;
  const message = smsMessage(notice, content!);
  return (await ctx.deps.sms.findSince(to, since, message.body, message))[0] ?? null;
}

/** The notice's content, or why it cannot be had: gone (expired, purged) or unreadable (no key opens it). */
async function readContent(ctx: StepContext, id: string): Promise<{ content: NoticeContent } | { unavailable: 'gone' | 'unreadable' }> {
  try {
    const content = await ctx.content(id);
    return content ? { content } : { unavailable: 'gone' };
  } catch (error) {
    if (!(error instanceof ContentUnreadableError)) throw error;
    ctx.deps.log.warn({ err: error, noticeId: id }, 'notice content cannot be opened');
    return { unavailable: 'unreadable' };
  }
}

/**
 * Ends a notice Herald cannot go on with (the `failed` state): a step needs its content and the
 * content is gone or cannot be opened. Retrying would never bring it back, so the notice ends
 * here, with `notice.failed` saying why, instead of failing its job over and over.
 */
async function contentUnavailable(ctx: StepContext, notice: Notice, content: 'gone' | 'unreadable'): Promise<StepOutcome> {
  const now = ctx.now();
  const port = notice.state.startsWith('sms_') ? SMS : EMAIL;
  const record = port.record(notice);
  const result = await ctx.store.transition(notice.id, now, iso(now), {
    name: 'fail',
    onlyFrom: [notice.state],
    // No other attempt started meanwhile.
    eq: { [port.field('attemptId')]: record.attemptId ?? '' },
    unset: [EMAIL.field('nextCheckAt'), SMS.field('nextCheckAt')],
    entries: [
      {
        type: 'notice.failed',
        reason: 'content_unavailable' satisfies FailureReason,
        stateBefore: notice.state,
        content,
        channel: port.channel,
        // A send in doubt may have reached the provider before Herald lost the content.
        attemptInDoubt: record.attemptId !== undefined && (!record.attemptSettled || record.attemptInDoubt) ? true : undefined,
      },
      ctx.completed(notice, 'failed'),
    ],
    due: 'remove',
  });
  if (!result.ok) return done('the notice moved on before it could fail');
  ctx.deps.log.warn({ noticeId: notice.id, stateBefore: notice.state, content }, 'notice failed: content unavailable');
  if (UNDECIDED_STATES.includes(notice.state)) await ctx.dropDeadline(notice.id);
  return done(`failed: content_unavailable (${content})`);
}

/**
 * Ends the search for an SMS in doubt at its bound (`smsSearchEndsAt`): the provider still cannot
 * tell whether it has the message, and Herald never sends blindly, so it stops here, with no
 * second SMS and no more searches, and records why: the search's last error, then
 * `sms.unconfirmed` (`sms_send_unconfirmed`). The notice stays `sms_sending` with its attempt in
 * doubt and its SMS status `unknown`, out of the due index: like an `sms_sent` notice whose checks
 * ran out, it has nothing more to do, and the entry lets it retire.
 */
async function smsSearchEnded(ctx: StepContext, notice: Notice, thrown: ProviderError, searchedUntil: number): Promise<StepOutcome> {
  const error = ctx.bounded(thrown);
  const now = ctx.now();
  const record = notice.smsChannel;
  const unconfirmed: SmsUnconfirmed = {
    ...ctx.smsUnconfirmed(notice, record.checksDone),
    reason: 'sms_send_unconfirmed',
    searchedUntil: iso(searchedUntil),
  };
  const result = await ctx.store.transition(notice.id, now, iso(now), {
    name: 'leaveSmsInDoubt',
    onlyFrom: ['sms_sending'],
    // No other attempt started, and no other worker ended this search meanwhile.
    eq: { [SMS.field('attemptId')]: record.attemptId ?? '', smsSearchEndedAt: '' },
    set: { [SMS.field('attemptSettled')]: 1, [SMS.field('attemptInDoubt')]: 1, [SMS.field('status')]: 'unknown', smsSearchEndedAt: now },
    entries: [providerErrorEntry('sms', record.attemptId, 'search', error, notice.providerTimeoutMs), unconfirmed],
    due: 'remove',
  });
  if (!result.ok) return done('the notice moved on before its search ended');
  ctx.deps.log.warn(
    { noticeId: notice.id, attemptId: record.attemptId, searchedUntil: unconfirmed.searchedUntil, kind: error.kind },
    'sms in doubt not found by the end of its search: recorded unconfirmed, never sent again',
  );
  return done('sms send unconfirmed: the provider could not tell by the end of the search');
}

/**
 * Settles an email attempt in doubt that the provider's event feed says never arrived
 * (`email.not_arrived`), so that the email is sent once more under a new attempt, with the same
 * idempotency key. Not once the deadline has come: the deadline decides, as for any send in
 * doubt. Returns why the step stops, or undefined to go on to the new attempt.
 */
async function emailNotArrived(ctx: StepContext, notice: Notice, feedAbsenceMs: number): Promise<StepOutcome | undefined> {
  const now = ctx.now();
  const record = notice.emailChannel;
  if (now >= notice.deadline) return done('email not arrived, but the deadline has come: the deadline decides');
  const startedAt = record.attemptStartedAt ?? notice.createdAt;
  const settled = await ctx.store.transition(notice.id, now, iso(now), {
    name: 'settleEmailAttempt',
    onlyFrom: ['email_sending'],
    eq: { [EMAIL.field('attemptId')]: record.attemptId ?? '' },
    set: { [EMAIL.field('attemptSettled')]: 1, [EMAIL.field('attemptInDoubt')]: 0 },
    entries: [
      {
        type: 'email.not_arrived',
        attemptId: record.attemptId ?? '',
        provider: EMAIL.providerName(ctx.deps),
        attemptStartedAt: iso(startedAt),
        feedAbsenceMs,
      },
    ],
    due: now,
  });
  if (!settled.ok) return done('the notice moved on before the attempt was settled as not arrived');
  ctx.deps.log.warn(
    { noticeId: notice.id, attemptId: record.attemptId, feedAbsenceMs },
    'email in doubt not arrived: the feed showed no event of it; sending once more',
  );
  return undefined;
}

/** Stores a provider's acceptance of an attempt and plans the first status check. */
async function accepted(
  ctx: StepContext,
  port: ChannelPort,
  notice: Notice,
  attemptId: string,
  result: SendResult,
  resolvedBy: 'send' | 'provider_search',
  smsBody?: string,
): Promise<StepOutcome> {
  const now = ctx.now();
  const plan = port === EMAIL ? emailChecksBeforeDeadline(notice) : planSmsChecks(now, ctx.limits());
  const nextCheck = nextCheckAfter(plan, now);
  const entry: Accepted = {
    type: `${port.channel}.accepted`,
    attemptId,
    providerMessageId: result.providerMessageId,
    providerStatus: result.providerStatus,
    resolvedBy: resolvedBy === 'send' ? undefined : resolvedBy,
  };
  const set: NoticeFields = {
    [port.field('providerMessageId')]: result.providerMessageId,
    [port.field('attemptSettled')]: 1,
    [port.field('attemptInDoubt')]: 0,
    [port.field('status')]: 'pending',
  };
  if (port === SMS) {
    const limits = ctx.limits();
    set.smsPlanAt = now;
    set.smsPlanFloorMs = limits.minPollIntervalMs;
    set.smsPlanMax = limits.maxChecks;
    if (smsBody !== undefined) set.smsSegments = smsSegments(smsBody);
  }
  if (nextCheck !== undefined) set[port.field('nextCheckAt')] = nextCheck;
  // The email waits for its deadline; an SMS with no check left has nothing due.
  const due = nextCheck ?? (port === EMAIL ? notice.deadline : 'remove');
  const stored = await ctx.store.transition(notice.id, now, iso(now), {
    name: port.transitions.accepted,
    eq: { [port.field('attemptId')]: attemptId },
    set,
    entries: [entry],
    due,
  });
  if (!stored.ok) {
    // The notice moved on while the provider was answering (the deadline decided the
    // fallback, say). The message exists all the same: the log must say so.
    await ctx.store.transition(notice.id, now, iso(now), {
      name: 'annotate',
      set: { [port.field('providerMessageId')]: result.providerMessageId },
      entries: [{ ...entry, late: true }],
    });
    return done('accepted after the notice moved on');
  }
  if (nextCheck !== undefined) {
    if (port === EMAIL) await ctx.deps.schedule.emailPoll(notice.id, nextCheck);
    else await ctx.deps.schedule.smsPoll(notice.id, nextCheck);
  }
  return done(`${port.channel} accepted`);
}

/** Records a failed provider call; a refusal of the message itself ends the channel. */
async function providerFailure(
  ctx: StepContext,
  port: ChannelPort,
  notice: Notice,
  attemptId: string,
  operation: 'send' | 'search',
  thrown: unknown,
  opts: { attemptStarted?: boolean },
): Promise<StepOutcome> {
  if (!(thrown instanceof ProviderError)) throw thrown;
  const error = ctx.bounded(thrown);
  const now = ctx.now();
  const record = port.record(notice);
  const attempts = record.attempts + (opts.attemptStarted ? 1 : 0);
  let retryTime = now + Math.max(error.retryAfterMs ?? 0, backoff(attempts));
  // An email in doubt at a feed provider: looked up no more often than the poll floor, and once
  // more just after its absence can be established (the job comes back then, not at the deadline).
  const absenceMs = port === EMAIL && operation === 'search' ? ctx.deps.email.feedAbsenceMs : undefined;
  if (absenceMs !== undefined) {
    const spaced = Math.max(retryTime, now + ctx.deps.settings.minPollIntervalMs);
    const lookAgainAt = (record.attemptStartedAt ?? notice.createdAt) + absenceMs + FEED_READ_MARGIN_MS;
    retryTime = lookAgainAt > now ? Math.min(lookAgainAt, spaced) : spaced;
  }
  const entry = providerErrorEntry(port.channel, attemptId, operation, error, notice.providerTimeoutMs);
  ctx.deps.log.warn({ err: error, noticeId: notice.id, channel: port.channel, operation, kind: error.kind }, 'provider call failed');

  if (error.kind === 'rejected' && operation === 'send') {
    if (error.suppressed) {
      await ctx.suppress(
        notice,
        port.channel,
        port.address(notice),
        refusedAddressSource(port, ctx.deps),
        error.providerCode !== undefined ? `provider code ${error.providerCode}` : `refused (HTTP ${error.httpStatus ?? 'status unknown'})`,
      );
    }
    const settled = { [port.field('attemptSettled')]: 1, [port.field('attemptInDoubt')]: 0, [port.field('status')]: 'failed' };
    if (port === EMAIL) {
      await ctx.store.transition(notice.id, now, iso(now), {
        name: 'settleEmailAttempt',
        eq: { [port.field('attemptId')]: attemptId },
        set: settled,
        entries: [entry],
      });
      return decideFallback(ctx, notice.id, error.suppressed ? 'email_suppressed' : 'email_rejected');
    }
    await ctx.store.transition(notice.id, now, iso(now), {
      name: 'rejectSms',
      eq: { [port.field('attemptId')]: attemptId },
      set: settled,
      entries: [entry, ctx.completed(notice, 'sms_failed')],
      due: 'remove',
    });
    return done('sms rejected');
  }

  // A 429 was never processed; a timeout or a 5xx may have sent the message.
  const inDoubt = operation === 'search' || error.kind !== 'rate_limited';
  await ctx.store.transition(notice.id, now, iso(now), {
    name: port.transitions.settle,
    eq: { [port.field('attemptId')]: attemptId },
    set: { [port.field('attemptSettled')]: 1, [port.field('attemptInDoubt')]: inDoubt ? 1 : 0 },
    entries: [entry],
    due: retryTime,
  });
  return retryAt(retryTime, `${port.channel} ${operation}: ${error.kind}`);
}

function backoff(attempts: number): number {
  return Math.min(MAX_RETRY_DELAY_MS, 1000 * 2 ** Math.max(0, attempts - 1));
}
