import {
  DelayedError,
  Queue,
  WaitingError,
  type ConnectionOptions,
  type DefaultJobOptions,
  type Job,
  type JobState,
  type JobType,
} from 'bullmq';
import type { Logger } from 'pino';
import type { Clock } from '../src/clock.js';
import type { Channel } from '../src/providers/types.js';
import { shardOfNoticeId } from '../src/notice/ids.js';
import type { Scheduler, StepOutcome } from '../src/notice/outcome.js';
import { UNDECIDED_STATES, type NoticeState } from '../src/notice/states.js';
import { earlierPartitionOfNotice, partitionOfNotice, type Keys } from '../src/store/keys.js';
import { delayedUntil } from '../src/store/delayed-jobs.js';
import type { RedisClient } from '../src/store/redis.js';
import { stateOfReply } from '../src/store/notices.js';
import type { DeliveryQueue } from '../src/events/dispatch.js';
import { MovingJob, type RedisCommand } from './notice-worker.js';

/** Herald's queues; what each one's jobs do is the table of queues/processors.ts. */
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
  // Pulls the feed providers' events queues (SES, AWS SMS).
  providerFeed: 'provider-feed',
  // Turns the decision log's entries into deliveries of events to callers' endpoints.
  eventDispatch: 'event-dispatch',
  // One job per (event, endpoint): the signed POST, retried with backoff.
  eventDelivery: 'event-delivery',
} as const;

export type QueueKey = keyof typeof QUEUE_NAMES;

/**
 * A notice's job carries little: the job ID names the notice (jobIds), and the notice's state in
 * Redis is the truth. Jobs of earlier versions carry `noticeId` as well, which `noticeOfJob` reads
 * first.
 */
export interface NoticeJob {
  noticeId?: string;
  /** Unexpected errors so far (runStep); absent until the first. */
  errors?: number;
  /**
   * The planned status check the job comes back for, when that is what it waits on (Bull Board
   * shows it): written by the move back to delayed itself (runStep), read by the run, which takes
   * the channel's status read along with its read of the notice. A hint, never the truth: a
   * notice moved meanwhile (a webhook) makes its run do what its state needs.
   */
  check?: Channel;
}

/** The notice a job is for: from its ID (jobIds), or the data of a job queued by an earlier version. */
export function noticeOfJob(job: Job<NoticeJob>): string {
  const id = job.data.noticeId ?? noticeIdOfJob(job.id ?? '');
  if (id === undefined) throw new Error(`job ${job.id} of ${job.queueName} names no notice`);
  return id;
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
type SweepQueueKey = 'reconcile' | 'logMirror' | 'retentionSweep' | 'providerFeed' | 'eventDispatch';
export type NoticeQueueKey = Exclude<QueueKey, SweepQueueKey | 'eventDelivery'>;

/** The notice ID a job ID starts with (job IDs are derived from it), if any. */
function noticeIdOfJob(jobId: string): string | undefined {
  const id = jobId.slice(0, jobId.indexOf('-') === -1 ? jobId.length : jobId.indexOf('-'));
  return shardOfNoticeId(id) === undefined ? undefined : id;
}

/**
 * One notice queue split into partitions, each a BullMQ queue with its own hash tag: a
 * notice's jobs go to its shard's partition, so adding, finding and removing a job touches one
 * partition. `earlier` is the unpartitioned queue of a deployment that had one partition before:
 * workers still run what it holds, and the counts include it.
 */
export class PartitionedQueue {
  constructor(
    readonly name: string,
    readonly partitions: readonly Queue<NoticeJob>[],
    readonly earlier?: Queue<NoticeJob>,
  ) {}

  /** Every BullMQ queue of this notice queue: the partitions, then the earlier queue if any. */
  get all(): Queue<NoticeJob>[] {
    return this.earlier ? [...this.partitions, this.earlier] : [...this.partitions];
  }

  /** The partition of a notice's jobs. */
  of(noticeId: string): Queue<NoticeJob> {
    return this.partitions[partitionOfNotice(noticeId, this.partitions.length)]!;
  }

  /**
   * The queues a job may be in: for a job ID derived from a notice ID its notice's partition, and
   * the one versions before the placement by slot range chose when that differs; else all.
   */
  private holding(jobId: string): Queue<NoticeJob>[] {
    const noticeId = noticeIdOfJob(jobId);
    if (noticeId === undefined) return this.all;
    const now = this.of(noticeId);
    const before = this.partitions[earlierPartitionOfNotice(noticeId, this.partitions.length)]!;
    return before === now ? [now] : [now, before];
  }

  /** Adds a notice's job to its notice's partition: the notice the data names, or else its job ID (jobIds). */
  add(
    name: string,
    data: NoticeJob,
    opts: NonNullable<Parameters<Queue<NoticeJob>['add']>[2]> & { jobId: string },
  ): Promise<Job<NoticeJob>> {
    const noticeId = data.noticeId ?? noticeIdOfJob(opts.jobId);
    if (noticeId === undefined) throw new Error(`job ${opts.jobId} names no notice`);
    return this.of(noticeId).add(name, data, opts);
  }
  /** Adds many notices' jobs, in one bulk add per partition. */
  async addBulk(jobs: readonly { name: string; data: NoticeJob; opts: { jobId: string; delay?: number } }[]): Promise<void> {
    const byPartition = new Map<Queue<NoticeJob>, { name: string; data: NoticeJob; opts: { jobId: string; delay?: number } }[]>();
    for (const job of jobs) {
      const noticeId = job.data.noticeId ?? noticeIdOfJob(job.opts.jobId);
      if (noticeId === undefined) throw new Error(`job ${job.opts.jobId} names no notice`);
      const queue = this.of(noticeId);
      byPartition.set(queue, [...(byPartition.get(queue) ?? []), job]);
    }
    await Promise.all([...byPartition].map(([queue, list]) => queue.addBulk(list)));
  }
  async getJob(jobId: string): Promise<Job<NoticeJob> | undefined> {
    for (const queue of this.holding(jobId)) {
      const job = await queue.getJob(jobId);
      if (job) return job;
    }
    return undefined;
  }
  async getJobState(jobId: string): Promise<JobState | 'unknown'> {
    for (const queue of this.holding(jobId)) {
      const state = await queue.getJobState(jobId);
      if (state !== 'unknown') return state;
    }
    return 'unknown';
  }
  /** When a job waiting in a delayed set is due (ms), from its score there; undefined when no delayed set holds it. */
  async delayedUntil(jobId: string): Promise<number | undefined> {
    for (const queue of this.holding(jobId)) {
      const due = await delayedUntil(queue, jobId);
      if (due !== undefined) return due;
    }
    return undefined;
  }
  /**
   * Removes the job wherever it is. BullMQ's removal is a script that answers 1 whether or not the
   * job was there, so a queue other than the notice's own partition (the earlier one, where a job
   * queued before the placement by slot range waits) is first asked whether it holds the job at
   * all: a read of the job's hash instead of a script on the path of every delivered notice.
   */
  async remove(jobId: string, opts?: { removeChildren?: boolean }): Promise<number> {
    const [own, ...others] = this.holding(jobId);
    let removed = await own!.remove(jobId, opts);
    for (const queue of others) {
      if (await queue.getJob(jobId)) removed += await queue.remove(jobId, opts);
    }
    return removed;
  }
  /** Jobs of the given types from every partition (each partition's own order, one after another). */
  async getJobs(types?: JobType | JobType[], start?: number, end?: number, asc?: boolean): Promise<Job<NoticeJob>[]> {
    return (await Promise.all(this.all.map((q) => q.getJobs(types, start, end, asc)))).flat();
  }
  async getJobCounts(...types: JobType[]): Promise<Record<string, number>> {
    const sums: Record<string, number> = {};
    for (const counts of await Promise.all(this.all.map((q) => q.getJobCounts(...types)))) {
      for (const [type, n] of Object.entries(counts)) sums[type] = (sums[type] ?? 0) + n;
    }
    return sums;
  }
  async count(): Promise<number> {
    return (await Promise.all(this.all.map((q) => q.count()))).reduce((a, b) => a + b, 0);
  }
  async getActiveCount(): Promise<number> {
    return (await Promise.all(this.all.map((q) => q.getActiveCount()))).reduce((a, b) => a + b, 0);
  }
  /** Paused when every partition is. */
  async isPaused(): Promise<boolean> {
    return (await Promise.all(this.all.map((q) => q.isPaused()))).every(Boolean);
  }
  async pause(): Promise<void> {
    await Promise.all(this.all.map((q) => q.pause()));
  }
  async resume(): Promise<void> {
    await Promise.all(this.all.map((q) => q.resume()));
  }
  /** Listens for the errors of every partition (a queue emits them while Redis is away). */
  on(event: 'error', listener: (error: Error) => void): this {
    for (const queue of this.all) queue.on(event, listener);
    return this;
  }
  async close(): Promise<void> {
    await Promise.allSettled(this.all.map((q) => q.close()));
  }
}

export type HeraldQueues = Record<NoticeQueueKey, PartitionedQueue> & Record<SweepQueueKey | 'eventDelivery', Queue>;

/** One BullMQ queue as operators see it: in Bull Board, /metrics and the admin overview. */
export interface ListedQueue {
  /** The queue's name, with `p<i>.` before it for partition i of several: `p2.email-poll`. */
  label: string;
  queue: Queue;
  /** What it is, for Bull Board: its partition and hash tag. */
  description: string;
}

/** Every BullMQ queue of Herald: each notice queue's partitions (and earlier queue), then the sweeps. */
export function listQueues(queues: HeraldQueues): ListedQueue[] {
  const listed: ListedQueue[] = [];
  for (const key of NOTICE_QUEUE_KEYS) {
    const q = queues[key];
    const count = q.partitions.length;
    q.partitions.forEach((queue, i) =>
      listed.push(
        count === 1
          ? { label: q.name, queue, description: '' }
          : { label: `p${i}.${q.name}`, queue, description: `partition ${i} of ${count} (${queue.opts.prefix})` },
      ),
    );
    if (q.earlier)
      listed.push({ label: q.name, queue: q.earlier, description: 'unpartitioned queue of before: workers run what it still holds' });
  }
  for (const key of ['reconcile', 'logMirror', 'retentionSweep', 'providerFeed', 'eventDispatch', 'eventDelivery'] as const) {
    listed.push({ label: queues[key].name, queue: queues[key], description: '' });
  }
  return listed;
}

const NOTICE_QUEUE_KEYS: readonly NoticeQueueKey[] = ['emailSend', 'emailPoll', 'deadline', 'smsSend', 'smsPoll'];

/**
 * The queues that BullMQ 5 paused with jobs waiting: it moved them to the queue's `paused` list,
 * which BullMQ 6 no longer writes, counts or shows. They run once the queue is resumed (BullMQ 6's
 * resume moves them back to `wait`, oldest first). Every other key BullMQ 5 wrote, delayed jobs
 * included, BullMQ 6 reads as it is.
 */
export async function pausedUnderBullmq5(redis: RedisClient, listed: readonly ListedQueue[]): Promise<{ label: string; jobs: number }[]> {
  const found: { label: string; jobs: number }[] = [];
  for (const { label, queue } of listed) {
    const jobs = await redis.llen(queue.toKey('paused'));
    if (jobs > 0) found.push({ label, jobs });
  }
  return found;
}

/**
 * Opens every Herald queue on one connection: each notice queue in `partitions` partitions
 * (Keys.queuePartitionPrefixes), the sweeps unpartitioned. With more than one partition the
 * unpartitioned notice queues of before stay open too, for the workers to drain. Whoever opens
 * them closes them (closeQueues).
 */
export function openQueues(connection: ConnectionOptions, keys: Keys, partitions = 1): HeraldQueues {
  const open = (name: string, prefix: string) =>
    new Queue<NoticeJob>(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS, streams: STREAMS });
  const prefixes = keys.queuePartitionPrefixes(partitions);
  const partitioned = (name: string) =>
    new PartitionedQueue(
      name,
      prefixes.map((prefix) => open(name, prefix)),
      partitions > 1 ? open(name, keys.queuePrefix) : undefined,
    );
  const sweep = (name: string) =>
    new Queue(name, {
      connection,
      prefix: keys.queuePrefix,
      streams: STREAMS,
      defaultJobOptions: { removeOnComplete: true, removeOnFail: { count: 100 } },
    });
  return {
    emailSend: partitioned(QUEUE_NAMES.emailSend),
    emailPoll: partitioned(QUEUE_NAMES.emailPoll),
    deadline: partitioned(QUEUE_NAMES.deadline),
    smsSend: partitioned(QUEUE_NAMES.smsSend),
    smsPoll: partitioned(QUEUE_NAMES.smsPoll),
    reconcile: sweep(QUEUE_NAMES.reconcile),
    logMirror: sweep(QUEUE_NAMES.logMirror),
    retentionSweep: sweep(QUEUE_NAMES.retentionSweep),
    providerFeed: sweep(QUEUE_NAMES.providerFeed),
    eventDispatch: sweep(QUEUE_NAMES.eventDispatch),
    eventDelivery: new Queue(QUEUE_NAMES.eventDelivery, {
      connection,
      prefix: keys.queuePrefix,
      streams: STREAMS,
      // Deliveries are recorded on their endpoint (its deliveries list): a short tail is enough here.
      // A run that throws (Redis restarting under it) is run again every 5 s: an event queued is
      // never dropped for a fault of Herald's own; only its endpoint's answers can end it.
      defaultJobOptions: {
        removeOnComplete: { count: 1000 },
        removeOnFail: { count: 1000 },
        attempts: 100_000,
        backoff: { type: 'fixed', delay: 5_000 },
      },
    }),
  };
}

/** The `event-delivery` queue as the dispatch adds to it: one job per (event, endpoint), by ID. */
export function deliveryQueue(queues: HeraldQueues): DeliveryQueue {
  return {
    async addDeliveries(jobs) {
      if (jobs.length === 0) return;
      await queues.eventDelivery.addBulk(jobs.map(({ jobId, data }) => ({ name: 'event-delivery', data, opts: { jobId } })));
    },
  };
}

export async function closeQueues(queues: HeraldQueues): Promise<void> {
  await Promise.allSettled(Object.values(queues).map((q) => q.close()));
}

/**
 * The engine's Scheduler over BullMQ: delays come from the injected clock. A notice has one job,
 * `<id>-deadline` in the `deadline` queue (it is the deadline job, SPEC §3): the web adds it due
 * at once, and it sends the email, runs each planned check, the deadline and the SMS, moving
 * itself back to delayed in between (src/notice/steps/notice-job.ts), so what a step asks for
 * from inside that job is a time the job comes back at, not a job. What is asked for from outside
 * it (a webhook, a cancel, the reconciler, a job of another queue queued before one job per
 * notice) makes the notice's job due no later than asked: added when it is missing or finished,
 * brought forward when it is delayed until later, left as it is when it is waiting or running.
 */
export class QueueScheduler implements Scheduler {
  constructor(
    private readonly queues: HeraldQueues,
    private readonly clock: Clock,
  ) {}

  private delay(at: number): number {
    return Math.max(0, at - this.clock.now());
  }

  async emailSend(id: string, at: number): Promise<void> {
    await this.noticeDue(id, at);
  }
  /** The jobs of notices just accepted: each one's job, due when its email is to be sent. */
  async accepted(notices: readonly { noticeId: string; emailAt: number; deadline: number }[]): Promise<void> {
    if (notices.length === 1) {
      const [n] = notices;
      await this.queues.deadline.add('deadline', {}, { jobId: jobIds.deadline(n!.noticeId), delay: this.delay(n!.emailAt) });
      return;
    }
    if (notices.length === 0) return;
    await this.queues.deadline.addBulk(
      notices.map((n) => ({ name: 'deadline', data: {}, opts: { jobId: jobIds.deadline(n.noticeId), delay: this.delay(n.emailAt) } })),
    );
  }
  async emailPoll(id: string, at: number): Promise<void> {
    await this.noticeDue(id, at);
  }
  async deadline(id: string, at: number): Promise<void> {
    await this.noticeDue(id, at);
  }
  /** Removes the notice's job: the notice needs no run of it any more (a job already running stays). */
  async dropDeadline(id: string): Promise<void> {
    // Notice jobs have no child jobs (no flows): the removal skips BullMQ's search for them.
    await this.queues.deadline.remove(jobIds.deadline(id), { removeChildren: false });
  }
  /** A channel settled by a webhook: the notice's job, which runs its checks, goes. */
  async dropChecks(id: string): Promise<void> {
    await this.dropDeadline(id);
  }
  async smsSend(id: string, at: number): Promise<void> {
    await this.noticeDue(id, at);
  }
  async smsPoll(id: string, at: number): Promise<void> {
    await this.noticeDue(id, at);
  }

  /**
   * Makes the notice's job due no later than `at`. BullMQ ignores an add whose job ID exists,
   * finished jobs included: a finished job makes way for the new one. A job delayed until after
   * `at` is brought forward (promoted when `at` has come); one waiting or running keeps its place,
   * so asking twice stays harmless.
   */
  private async noticeDue(id: string, at: number): Promise<void> {
    const queue = this.queues.deadline;
    const jobId = jobIds.deadline(id);
    const job = await queue.getJob(jobId);
    if (job && !job.finishedOn) {
      const due = await queue.delayedUntil(jobId);
      if (due === undefined || due <= at) return;
      const delay = this.delay(at);
      // A job that left the delayed set meanwhile is running or about to: it reads the notice then.
      await (delay === 0 ? job.promote() : job.changeDelay(delay)).catch(() => undefined);
      return;
    }
    if (job) await queue.remove(jobId, { removeChildren: false });
    await queue.add('deadline', {}, { jobId, delay: this.delay(at) });
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
  /**
   * Reads a notice's state (the NoticeStore's), for a job that comes back only while its notice
   * stays undecided (`ifUndecided`): the read goes with the job's move back.
   */
  states?: NoticeStates;
}

/** How runStep reads a notice's state: a command to send with a move back, or a read on its own. */
export interface NoticeStates {
  stateRead(id: string): RedisCommand;
  statesOf(ids: readonly string[]): Promise<(NoticeState | undefined)[]>;
}

/**
 * Runs one engine step for a job. A step that must come back later (the next planned check, an
 * attempt in flight, a Retry-After) moves the same job back to delayed (no second job is added),
 * at the time the step asked for, or back to waiting when that time has come already; the job
 * keeps what it comes back for (`check`) in the same move. A provider's 429 pauses the
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
    await moveBack(job, token, Date.now() + (ctx.retryBaseMs ?? STEP_RETRY_BASE_MS) * 2 ** (errors - 1), { ...job.data, errors });
    throw new DelayedError(`run ${errors} of ${MAX_STEP_RUNS} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (outcome.pauseMs && pause) await pause(outcome.pauseMs);
  if (outcome.kind === 'retry' && token) {
    // A job that comes back for its next check starts that check with a clean error count.
    const data: NoticeJob = {
      ...(job.data.noticeId === undefined ? {} : { noticeId: job.data.noticeId }),
      ...(outcome.check === undefined ? {} : { check: outcome.check }),
    };
    const delay = outcome.at - clock.now();
    // Already due (a check that a slow provider call made late): straight back to waiting, not
    // through the delayed set, whose promotion would make it later still.
    if (delay <= 0) {
      if (!sameData(job.data, data)) await job.updateData(data);
      await job.moveToWait(token);
      throw new WaitingError(outcome.note);
    }
    if (outcome.ifUndecided && ctx.states) await moveBackIfUndecided(job, token, Date.now() + delay, data, ctx.states);
    else await moveBack(job, token, Date.now() + delay, data);
    throw new DelayedError(outcome.note);
  }
  return outcome.note;
}

/**
 * Moves a running job back to delayed (as moveBack) whose notice it comes back for only while
 * the notice stays undecided, then reads the notice's state, in the move's own round trip when
 * it can (MovingJob.moveBackReading): a notice decided or finished by then (a webhook's early
 * fallback, whose ask to run the job now found it running and left it) brings the job back at
 * once. Whatever lands after the read finds the job delayed, and its own ask promotes it.
 */
async function moveBackIfUndecided(
  job: Job<NoticeJob>,
  token: string,
  timestamp: number,
  data: NoticeJob,
  states: NoticeStates,
): Promise<void> {
  const id = noticeOfJob(job);
  const changed = !sameData(job.data, data);
  let sent: { reply: unknown } | undefined;
  if (job instanceof MovingJob) sent = await job.moveBackReading(timestamp, token, changed ? data : undefined, states.stateRead(id));
  else await moveBack(job, token, timestamp, data);
  const state = sent ? stateOfReply(sent.reply) : (await states.statesOf([id]))[0];
  if (state !== undefined && UNDECIDED_STATES.includes(state)) return;
  // The job is delayed until later; a promotion that finds it gone from the delayed set (a
  // webhook's own promoted it, another worker runs it) leaves it where it is.
  await job.promote().catch(() => undefined);
}

/**
 * Moves a running job back to delayed until `timestamp`, its data becoming `data`. A job of the
 * NoticeWorker (queues/notice-worker.ts) does both in one call, which also fetches its worker's
 * next job; a job of a plain BullMQ worker has its data written first.
 */
async function moveBack(job: Job<NoticeJob>, token: string, timestamp: number, data: NoticeJob): Promise<void> {
  const changed = !sameData(job.data, data);
  if (job instanceof MovingJob) return job.moveBack(timestamp, token, changed ? data : undefined);
  if (changed) await job.updateData(data);
  await job.moveToDelayed(timestamp, token);
}

function sameData(a: NoticeJob, b: NoticeJob): boolean {
  return a.noticeId === b.noticeId && a.errors === b.errors && a.check === b.check;
}
