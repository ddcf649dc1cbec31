import type { Channel } from '../../providers/types.js';
import { done, retryAt, type Scheduler, type StepOutcome } from '../outcome.js';
import { readNoticeWithContent } from '../notice.js';
import { isTerminal, UNDECIDED_STATES } from '../states.js';
import type { StepContext } from './context.js';
import { runDeadline } from './deadline.js';
import { pollEmail, pollSms } from './observe.js';
import { sendEmail, sendSms } from './send.js';

/**
 * One run of a notice's job (`<id>-deadline`, the one job a notice has): the step its state
 * needs now, then the time it comes back, which the job is moved back to delayed for. Before
 * the deadline: the email's send, then each planned check when it is due, the deadline itself
 * never later than the notice waits for it; at or after the deadline: the last read, the
 * decision and the SMS's send (`runDeadline`); then an SMS that waits, and the SMS's checks.
 * What a step asks to schedule for its notice becomes a time to come back at (RunScheduler),
 * not another job. A planned check takes a status read of its provider first (the limit every
 * worker shares); the deadline's last read takes none.
 */
export async function runNotice(ctx: StepContext, id: string): Promise<StepOutcome> {
  // The content comes along: a send needs it, and it costs no round trip of its own so.
  const { notice, content } = await readNoticeWithContent(ctx.store, id);
  if (!notice) return done('no such notice');
  const now = ctx.now();
  const run = new RunScheduler(id, ctx.deps.schedule);
  const here = ctx.forRun(run, notice, content);
  const { deadline } = notice;
  let outcome: StepOutcome;
  // Until the fallback is decided, the notice comes back at its deadline at the latest.
  let waitsForDeadline = false;
  switch (notice.state) {
    case 'accepted':
    case 'email_sending':
      waitsForDeadline = now < deadline;
      outcome = waitsForDeadline ? await sendEmail(here, id) : await runDeadline(here, id);
      break;
    case 'email_sent': {
      waitsForDeadline = now < deadline;
      if (!waitsForDeadline) outcome = await runDeadline(here, id);
      else outcome = await check(here, 'email', notice.emailChannel.nextCheckAt, now, () => pollEmail(here, id));
      break;
    }
    case 'sms_pending':
    case 'sms_sending':
      outcome = await sendSms(here, id);
      break;
    case 'sms_sent':
      outcome = await check(here, 'sms', notice.smsChannel.nextCheckAt, now, () => pollSms(here, id));
      break;
    default:
      outcome = done(`state is ${notice.state}`);
  }
  let next: number | undefined;
  if (waitsForDeadline && !run.deadlineDropped) {
    // The notice may have moved under this run (a webhook's early fallback or delivery, whose ask
    // found this job running and so left it alone): a decided notice's next step is due now, not
    // at the next check or the deadline, and a finished one has none.
    const [state] = await ctx.store.statesOf([id]);
    if (state === undefined || isTerminal(state)) return done(outcome.note);
    if (!UNDECIDED_STATES.includes(state)) next = now;
  }
  const times = [
    outcome.kind === 'retry' ? outcome.at : undefined,
    run.at,
    next ?? (waitsForDeadline && !run.deadlineDropped ? deadline : undefined),
  ];
  const at = Math.min(...times.filter((t): t is number => t !== undefined));
  return Number.isFinite(at) ? retryAt(at, outcome.note) : done(outcome.note);
}

/**
 * A planned status check, when it is due and its provider has a read to spare; else the time
 * to come back for it. A provider's 429 holds every worker's reads of it back for its
 * Retry-After (never this queue: the deadlines in it must not wait).
 */
async function check(
  ctx: StepContext,
  channel: Channel,
  plannedAt: number | undefined,
  now: number,
  read: () => Promise<StepOutcome>,
): Promise<StepOutcome> {
  if (plannedAt === undefined) return done(`no ${channel} check planned`);
  if (plannedAt > now) return retryAt(plannedAt, `next ${channel} check`);
  const limit = ctx.deps.statusReads;
  const heldUntil = limit && (await limit.take(channel, now));
  if (heldUntil !== undefined) return retryAt(heldUntil, `${channel} status reads at their limit`);
  const outcome = await read();
  if (!outcome.pauseMs) return outcome;
  await limit?.pause(channel, outcome.pauseMs);
  return outcome.kind === 'retry' ? retryAt(outcome.at, outcome.note) : done(outcome.note);
}

/**
 * The Scheduler of one run of a notice's job. For its notice, what a step asks for (a check, an
 * SMS send, the deadline) is a time the job comes back at, the earliest of them (`at`), and a
 * step that settled the notice before its deadline (a delivery, an early fallback, a failure:
 * `dropDeadline`, `dropChecks`) means the job need not come back for the deadline
 * (`deadlineDropped`), only for what else was asked. Other notices' go to the queues.
 */
class RunScheduler implements Scheduler {
  at: number | undefined;
  deadlineDropped = false;

  constructor(
    private readonly id: string,
    private readonly queues: Scheduler,
  ) {}

  private comeBack(id: string, at: number, elsewhere: () => Promise<void>): Promise<void> {
    if (id !== this.id) return elsewhere();
    this.at = this.at === undefined ? at : Math.min(this.at, at);
    return Promise.resolve();
  }

  emailSend(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.emailSend(id, at));
  }
  accepted(notices: readonly { noticeId: string; emailAt: number; deadline: number }[]): Promise<void> {
    return this.queues.accepted(notices);
  }
  emailPoll(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.emailPoll(id, at));
  }
  deadline(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.deadline(id, at));
  }
  smsSend(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.smsSend(id, at));
  }
  smsPoll(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.smsPoll(id, at));
  }
  dropDeadline(id: string): Promise<void> {
    if (id !== this.id) return this.queues.dropDeadline(id);
    this.deadlineDropped = true;
    return Promise.resolve();
  }
  dropChecks(id: string, channel: 'email' | 'sms'): Promise<void> {
    if (id !== this.id) return this.queues.dropChecks(id, channel);
    this.deadlineDropped = true;
    return Promise.resolve();
  }
}
