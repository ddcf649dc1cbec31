import type { Channel } from '../../providers/types.js';
import { checkAt, done, retryAt, type Scheduler, type StepOutcome } from '../outcome.js';
import { readNotice, readNoticeWithContent } from '../notice.js';
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
 *
 * `expected`: the job came back for a planned check of this channel (the outcome's `check` of
 * its last run, which the job keeps). The run then takes that status read in the same round
 * trip as its read of the notice, instead of one of its own after it; should the notice need
 * something else by now (a webhook moved it), the read taken goes unused, as a read refused by
 * the provider would.
 *
 * `readsState`: whoever runs this reads the notice's state after the job's move back, as
 * `ifUndecided` asks (queues/index.ts runStep does, in the move's own round trip). Without it,
 * the run reads the state itself after its step, and comes back at once for a notice that moved
 * under it.
 */
export async function runNotice(ctx: StepContext, id: string, expected?: Channel, readsState = false): Promise<StepOutcome> {
  const limit = ctx.deps.statusReads;
  const taken = expected && limit ? { channel: expected, heldUntil: limit.take(expected, ctx.now()) } : undefined;
  // A read that goes unused must not leave a rejection unhandled; one that is used is awaited.
  taken?.heldUntil.catch(() => undefined);
  // The content comes along, at no round trip of its own, unless the run came back for a check: a
  // check sends nothing (a fallback it decides leaves in a run of its own, which reads it along),
  // and a step that sends without it reads it then (StepContext.content).
  const { notice, content } = expected
    ? { notice: await readNotice(ctx.store, id), content: undefined }
    : await readNoticeWithContent(ctx.store, id);
  if (!notice) return done('no such notice');
  const now = ctx.now();
  const run = new RunScheduler(id, ctx.deps.schedule);
  const here = ctx.forRun(run, notice, content);
  const { deadline } = notice;
  const take = (channel: Channel) =>
    taken?.channel === channel ? taken.heldUntil : limit ? limit.take(channel, now) : Promise.resolve(undefined);
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
      else outcome = await check(here, 'email', notice.emailChannel.nextCheckAt, now, take, () => pollEmail(here, id));
      break;
    }
    case 'sms_pending':
    case 'sms_sending':
      outcome = await sendSms(here, id);
      break;
    case 'sms_sent':
      outcome = await check(here, 'sms', notice.smsChannel.nextCheckAt, now, take, () => pollSms(here, id));
      break;
    default:
      outcome = done(`state is ${notice.state}`);
  }
  let next: number | undefined;
  // The notice may have moved under this run (a webhook's early fallback or delivery, whose ask
  // found this job running and so left it alone): a decided notice's next step is due now, not
  // at the next check or the deadline, and a finished one has none.
  const undecided = waitsForDeadline && !run.deadlineDropped;
  if (undecided && !readsState) {
    const [state] = await ctx.store.statesOf([id]);
    if (state === undefined || isTerminal(state)) return done(outcome.note);
    if (!UNDECIDED_STATES.includes(state)) next = now;
  }
  // The earliest of what was asked, and whether that is a planned check (of one channel only).
  const asks: { at: number | undefined; check?: Channel }[] = [
    outcome.kind === 'retry' ? { at: outcome.at, check: outcome.check } : { at: undefined },
    { at: run.at, check: run.check },
    { at: next ?? (waitsForDeadline && !run.deadlineDropped ? deadline : undefined) },
  ];
  const at = Math.min(...asks.flatMap((ask) => (ask.at === undefined ? [] : [ask.at])));
  if (!Number.isFinite(at)) return done(outcome.note);
  const checks = new Set(asks.filter((ask) => ask.at === at).map((ask) => ask.check));
  const [channel] = checks;
  const back = checks.size === 1 && channel ? checkAt(at, outcome.note, channel) : retryAt(at, outcome.note);
  return undecided && readsState && back.kind === 'retry' ? { ...back, ifUndecided: true } : back;
}

/**
 * A planned status check, when it is due and its provider has a read to spare; else the time
 * to come back for it. A provider's 429 holds every worker's reads of it back for its
 * Retry-After (never this queue: the deadlines in it must not wait). `take` takes the read (or
 * hands over the one the run took along with its read of the notice).
 */
async function check(
  ctx: StepContext,
  channel: Channel,
  plannedAt: number | undefined,
  now: number,
  take: (channel: Channel) => Promise<number | undefined>,
  read: () => Promise<StepOutcome>,
): Promise<StepOutcome> {
  if (plannedAt === undefined) return done(`no ${channel} check planned`);
  if (plannedAt > now) return checkAt(plannedAt, `next ${channel} check`, channel);
  const heldUntil = await take(channel);
  if (heldUntil !== undefined) return checkAt(heldUntil, `${channel} status reads at their limit`, channel);
  const outcome = await read();
  if (!outcome.pauseMs) return outcome;
  await ctx.deps.statusReads?.pause(channel, outcome.pauseMs);
  if (outcome.kind !== 'retry') return done(outcome.note);
  return outcome.check ? checkAt(outcome.at, outcome.note, outcome.check) : retryAt(outcome.at, outcome.note);
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
  /** The channel whose planned check `at` is, when that is what the earliest ask was (and only it). */
  check: Channel | undefined;
  deadlineDropped = false;

  constructor(
    private readonly id: string,
    private readonly queues: Scheduler,
  ) {}

  private comeBack(id: string, at: number, elsewhere: () => Promise<void>, check?: Channel): Promise<void> {
    if (id !== this.id) return elsewhere();
    if (this.at === undefined || at < this.at) [this.at, this.check] = [at, check];
    else if (at === this.at && check !== this.check) this.check = undefined;
    return Promise.resolve();
  }

  emailSend(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.emailSend(id, at));
  }
  accepted(notices: readonly { noticeId: string; emailAt: number; deadline: number }[]): Promise<void> {
    return this.queues.accepted(notices);
  }
  emailPoll(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.emailPoll(id, at), 'email');
  }
  deadline(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.deadline(id, at));
  }
  smsSend(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.smsSend(id, at));
  }
  smsPoll(id: string, at: number): Promise<void> {
    return this.comeBack(id, at, () => this.queues.smsPoll(id, at), 'sms');
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
