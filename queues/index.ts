import { DelayedError, Queue, WaitingError, type ConnectionOptions, type DefaultJobOptions, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { Clock } from '../src/clock.js';
import type { Scheduler, StepOutcome } from '../src/notice/outcome.js';

/** Herald's queues; one processor module per queue in this folder. */
export const QUEUE_NAMES = {
  emailSend: 'email-send',
  emailPoll: 'email-poll',
  deadline: 'deadline',
  smsSend: 'sms-send',
  smsPoll: 'sms-poll',
  reconcile: 'reconcile',
  logMirror: 'log-mirror',
  // Runs the retention sweep; the name is persisted (job scheduler, Redis keys).
  retentionSweep: 'content-purge',
  // Pulls the feed providers' events queues (SES, AWS SMS): queues/provider-feed.ts.
  providerFeed: 'provider-feed',
} as const;

export type QueueKey = keyof typeof QUEUE_NAMES;

/** Every job of a notice carries only its ID: the notice's state in Redis is the truth. */
export interface NoticeJob {
  noticeId: string;
  /** Unexpected errors so far (runStep); absent until the first. */
  errors?: number;
}

/**
 * Job IDs are derived from the notice ID (BullMQ job IDs may not contain ':'). A notice has at
 * most one job per queue: its status checks run in one job per channel, moved back to delayed
 * for each planned check.
 */
export const jobIds = {
  emailSend: (id: string) => `${id}-email-send`,
  emailPoll: (id: string) => `${id}-email-poll`,
  deadline: (id: string) => `${id}-deadline`,
  smsSend: (id: string) => `${id}-sms-send`,
  smsPoll: (id: string) => `${id}-sms-poll`,
  /**
   * One job per planned check: what earlier versions queued. The same processors run them: such
   * a job moves itself back to delayed for the next check, as the channel's job does.
   */
  emailCheck: (id: string, check: number) => `${id}-poll-${check}`,
  smsCheck: (id: string, check: number) => `${id}-sms-poll-${check}`,
};

/**
 * Options stored in every notice job. Retries of unexpected errors are runStep's, not BullMQ's
 * `attempts` and `backoff`: those would be stored in every job (some 60 bytes of its options),
 * for an error that a step rarely meets.
 */
export const DEFAULT_JOB_OPTIONS: DefaultJobOptions = {};

/** A step that throws (a Redis hiccup, a bug) runs again after 1, 2, 4 ... s, this many times in all. */
export const MAX_STEP_RUNS = 8;
const STEP_RETRY_BASE_MS = 1000;

/** Finished jobs kept for inspection in Bull Board: set on the workers, not on each job. */
export const KEEP_JOBS = { removeOnComplete: { count: 1000 }, removeOnFail: { count: 5000 } } as const;

/** BullMQ's per-queue event stream is for live watchers; a short one keeps memory flat. */
const STREAMS = { events: { maxLen: 1000 } };

/** Queues of scheduled sweeps, whose jobs carry no notice. */
type SweepQueueKey = 'reconcile' | 'logMirror' | 'retentionSweep' | 'providerFeed';

export type HeraldQueues = Record<Exclude<QueueKey, SweepQueueKey>, Queue<NoticeJob>> & Record<SweepQueueKey, Queue>;

/** Opens every Herald queue on one connection. Whoever opens them closes them (closeQueues). */
export function openQueues(connection: ConnectionOptions, prefix: string): HeraldQueues {
  const open = (name: string) =>
    new Queue<NoticeJob>(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS, streams: STREAMS });
  const sweep = (name: string) =>
    new Queue(name, { connection, prefix, streams: STREAMS, defaultJobOptions: { removeOnComplete: true, removeOnFail: { count: 100 } } });
  return {
    emailSend: open(QUEUE_NAMES.emailSend),
    emailPoll: open(QUEUE_NAMES.emailPoll),
    deadline: open(QUEUE_NAMES.deadline),
    smsSend: open(QUEUE_NAMES.smsSend),
    smsPoll: open(QUEUE_NAMES.smsPoll),
    reconcile: sweep(QUEUE_NAMES.reconcile),
    logMirror: sweep(QUEUE_NAMES.logMirror),
    retentionSweep: sweep(QUEUE_NAMES.retentionSweep),
    providerFeed: sweep(QUEUE_NAMES.providerFeed),
  };
}

export async function closeQueues(queues: HeraldQueues): Promise<void> {
  await Promise.allSettled(Object.values(queues).map((q) => q.close()));
}

/** The engine's Scheduler over BullMQ: delays come from the injected clock. */
export class QueueScheduler implements Scheduler {
  constructor(
    private readonly queues: HeraldQueues,
    private readonly clock: Clock,
  ) {}

  private delay(at: number): number {
    return Math.max(0, at - this.clock.now());
  }

  async emailSend(id: string, at: number): Promise<void> {
    await this.queues.emailSend.add('email-send', { noticeId: id }, { jobId: jobIds.emailSend(id), delay: this.delay(at) });
  }
  async emailPoll(id: string, at: number): Promise<void> {
    await this.statusCheck(this.queues.emailPoll, 'email-poll', jobIds.emailPoll(id), id, at);
  }
  async deadline(id: string, at: number): Promise<void> {
    await this.queues.deadline.add('deadline', { noticeId: id }, { jobId: jobIds.deadline(id), delay: this.delay(at) });
  }
  async dropDeadline(id: string): Promise<void> {
    // Notice jobs have no child jobs (no flows): the removal skips BullMQ's search for them.
    await this.queues.deadline.remove(jobIds.deadline(id), { removeChildren: false });
  }
  async smsSend(id: string, at: number): Promise<void> {
    await this.queues.smsSend.add('sms-send', { noticeId: id }, { jobId: jobIds.smsSend(id), delay: this.delay(at) });
  }
  async smsPoll(id: string, at: number): Promise<void> {
    await this.statusCheck(this.queues.smsPoll, 'sms-poll', jobIds.smsPoll(id), id, at);
  }

  /**
   * A channel's status checks run in one job, which moves itself back to delayed for each
   * planned check. BullMQ ignores an add whose job ID exists, finished jobs included. The job is
   * asked for again only when it finished without moving the notice on (a duplicate that ran
   * too early, a job that failed for good), and then it must run: the finished job makes way.
   * A job still waiting, delayed or running keeps its place, so asking twice stays harmless.
   */
  private async statusCheck(queue: Queue<NoticeJob>, name: string, jobId: string, noticeId: string, at: number): Promise<void> {
    const existing = await queue.getJob(jobId);
    if (existing?.finishedOn) await queue.remove(jobId);
    await queue.add(name, { noticeId }, { jobId, delay: this.delay(at) });
  }
}

/** What a notice queue's processor needs besides the engine. */
export interface StepContext {
  clock: Clock;
  log: Logger;
  /** Pauses the queue for every worker (a provider's 429 on a status call). */
  pause?: (ms: number) => Promise<void>;
  /** The first retry's delay after a step threw (default 1 s), doubling with each. */
  retryBaseMs?: number;
}

/**
 * Runs one engine step for a job. A step that must come back later (the next planned check, an
 * attempt in flight, a Retry-After) moves the same job back to delayed (no second job is added),
 * at the time the step asked for, or back to waiting when that time has come already. A provider's 429 pauses the
 * queue for every worker (`pause`, BullMQ's global rate limit) for its Retry-After. A step that
 * throws is run again with backoff (MAX_STEP_RUNS); after the last run the job fails, for Bull
 * Board to show, and the reconciler drives the notice.
 */
export async function runStep(
  job: Job<NoticeJob>,
  token: string | undefined,
  ctx: StepContext,
  step: () => Promise<StepOutcome>,
): Promise<string> {
  const { clock, log, pause } = ctx;
  let outcome: StepOutcome;
  try {
    outcome = await step();
  } catch (error) {
    const errors = (job.data.errors ?? 0) + 1;
    if (!token || errors >= MAX_STEP_RUNS) throw error;
    log.warn({ err: error, queue: job.queueName, jobId: job.id, run: errors }, 'step failed; it runs again');
    await job.updateData({ ...job.data, errors });
    await job.moveToDelayed(Date.now() + (ctx.retryBaseMs ?? STEP_RETRY_BASE_MS) * 2 ** (errors - 1), token);
    throw new DelayedError(`run ${errors} of ${MAX_STEP_RUNS} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (outcome.pauseMs && pause) await pause(outcome.pauseMs);
  if (outcome.kind === 'retry' && token) {
    // A job that comes back for its next check starts that check with a clean error count.
    if (job.data.errors) await job.updateData({ noticeId: job.data.noticeId });
    const delay = outcome.at - clock.now();
    // Already due (a check that a slow provider call made late): straight back to waiting, not
    // through the delayed set, whose promotion would make it later still.
    if (delay <= 0) {
      await job.moveToWait(token);
      throw new WaitingError(outcome.note);
    }
    await job.moveToDelayed(Date.now() + delay, token);
    throw new DelayedError(outcome.note);
  }
  return outcome.note;
}
