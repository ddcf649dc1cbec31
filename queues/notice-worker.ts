/**
 * The BullMQ Worker of the notice queues, whose jobs move themselves back to delayed for their
 * next run (runStep, queues/index.ts): a check, the deadline, an SMS's check, a retry.
 *
 * BullMQ's worker, when a job it ran moved itself back to delayed (DelayedError), asks Redis for
 * the next job in a call of its own (`moveToActive`). BullMQ's move to delayed can fetch that
 * job itself (`fetchNext`, as BullMQ's own retry of a failed job does): one script call per move
 * back instead of two, and in a queue whose jobs come due each at its own time, where the second
 * call finds nothing nearly always, one call fewer for nothing. The job class of this worker
 * (`MovingJob`, through BullMQ's `Job` getter) moves with `fetchNext`, and hands the job it got
 * to its worker, which starts it in the slot the moved job left, as BullMQ starts the job a
 * finish fetched. The same call writes the job's data when it changes (what the job comes back
 * for, its error count), and a read the caller needs right after the move (its notice's state,
 * runStep) goes in the same round trip (`moveBackReading`).
 */
import { Job, raw2NextJobData, Worker } from 'bullmq';
import { scriptThenRead, type RedisCommand } from '../src/store/delayed-jobs.js';
import type { NoticeJob } from './index.js';

export type { RedisCommand };

/** What of BullMQ's Redis backend a move back sent with a read of its own uses. */
interface MoveBackend {
  /** The worker's connections, as BullMQ's own move reaches them. */
  queue: { client: Promise<unknown> };
  version: string;
  moveToDelayedArgs(jobId: string, timestamp: number, token: string, delay: number, opts: object): unknown[];
  finishedErrors(error: { code: number; jobId: string; command: string; state: string }): Error;
}

/**
 * What BullMQ's move to delayed answers when asked to fetch: the next job's fields and ID, and
 * the worker's delays; empty when it found no job.
 */
type Fetched = [jobData?: unknown, jobId?: string, rateLimitDelay?: number, delayUntil?: number];

/**
 * BullMQ's options of a move back: the attempt not counted (a planned return is no failure), the
 * job's data written when it changes, the worker's next job fetched when asked.
 */
function moveOptions(data: NoticeJob | undefined, fetchNext: boolean) {
  return {
    skipAttempt: true,
    ...(data === undefined ? {} : { fieldsToUpdate: { data: JSON.stringify(data) } }),
    fetchNext,
  };
}

/** The job class of the NoticeWorker: its moves back to delayed fetch the worker's next job. */
export class MovingJob extends Job<NoticeJob> {
  /** Moves the job back to delayed, as `moveBack` without a change of data. */
  override async moveToDelayed(timestamp: number, token?: string): Promise<void> {
    await this.moveBack(timestamp, token);
  }

  /**
   * Moves the running job back to delayed until `timestamp`, its data becoming `data` when given,
   * in one call; a worker that takes jobs now (not closing, not paused) gets its next job from
   * the same call.
   */
  async moveBack(timestamp: number, token: string | undefined, data?: NoticeJob): Promise<void> {
    const worker = this.queue instanceof NoticeWorker ? this.queue : undefined;
    const fetchNext = token !== undefined && worker !== undefined && worker.takesJobs();
    const now = Date.now();
    const delay = Math.max(0, timestamp - now);
    const next = await this.backend.moveToDelayed(this.id!, now, delay, token, moveOptions(data, fetchNext));
    this.moved(delay, data, fetchNext ? token : undefined, next);
  }

  /**
   * Moves back as `moveBack`, and reads `read` (a command of the job's Redis) after the move in
   * the same round trip: its reply, or `undefined` when the read could not go with the move (a
   * Cluster's pipelines keep to one slot, and the job's and the notice's differ), for the caller
   * to send on its own.
   */
  async moveBackReading(
    timestamp: number,
    token: string,
    data: NoticeJob | undefined,
    read: RedisCommand,
  ): Promise<{ reply: unknown } | undefined> {
    const backend = this.backend as unknown as MoveBackend;
    const worker = this.queue instanceof NoticeWorker ? this.queue : undefined;
    const fetchNext = worker?.takesJobs() ?? false;
    const now = Date.now();
    const delay = Math.max(0, timestamp - now);
    const replies = await scriptThenRead(
      await backend.queue.client,
      `moveToDelayed:${backend.version}`,
      backend.moveToDelayedArgs(this.id!, now, token, delay, moveOptions(data, fetchNext)),
      read,
    );
    if (!replies) {
      await this.moveBack(timestamp, token, data);
      return undefined;
    }
    const [moveReply, readReply] = replies;
    // As BullMQ's own move to delayed answers: its error, a refusal (the job not active, its lock
    // lost), or the next job when it fetched one.
    if (!moveReply) throw new Error(`the move of job ${this.id} to delayed got no reply`);
    const [moveError, moved] = moveReply;
    if (moveError) throw moveError;
    if (typeof moved === 'number' && moved < 0)
      throw backend.finishedErrors({ code: moved, jobId: this.id!, command: 'moveToDelayed', state: 'active' });
    this.moved(delay, data, fetchNext ? token : undefined, moved === undefined ? undefined : raw2NextJobData(moved as unknown[]));
    if (!readReply || readReply[0]) return undefined;
    return { reply: readReply[1] };
  }

  /** What a move back leaves: the job's delay and data as moved, what it fetched handed to its worker. */
  private moved(delay: number, data: NoticeJob | undefined, fetchedFor: string | undefined, next: unknown): void {
    this.delay = delay;
    if (data !== undefined) this.data = data;
    if (fetchedFor !== undefined && Array.isArray(next) && this.queue instanceof NoticeWorker)
      this.queue.handOver(fetchedFor, next as Fetched);
  }
}

export class NoticeWorker extends Worker<NoticeJob> {
  /** Jobs fetched by a move back, by the token of the slot whose job moved. */
  private readonly handedOver = new Map<string, Fetched>();

  protected override get Job(): typeof Job {
    return MovingJob as unknown as typeof Job;
  }

  /** Whether a move back may fetch the next job for this worker now. */
  takesJobs(): boolean {
    return !this.closing && !this.isPaused();
  }

  /** Keeps what a move back fetched for the slot `token` (a job, or none) until that slot's job ends. */
  handOver(token: string, next: Fetched): void {
    this.handedOver.set(token, next);
  }

  /**
   * The end of a job that threw: one that moved itself back, fetching, goes on with what the move
   * fetched, the next job or none, as BullMQ goes on after a finish that fetched (its own move is
   * done, whatever it threw after); any other ends as BullMQ ends it.
   */
  protected override async handleFailed(
    err: Error,
    job: Job<NoticeJob>,
    token: string,
    fetchNextCallback?: () => boolean,
    span?: unknown,
  ): Promise<Job<NoticeJob>> {
    const next = this.handedOver.get(token);
    if (next === undefined) return super.handleFailed(err, job, token, fetchNextCallback, span as never);
    this.handedOver.delete(token);
    const [jobData, jobId, rateLimitDelay, delayUntil] = next;
    // What BullMQ's own ends of a job do with a fetch's answer: its limiter's and delayed jobs' times.
    (this as unknown as { updateDelays?: (limit?: number, until?: number) => void }).updateDelays?.(rateLimitDelay, delayUntil);
    return this.nextJobFromJobData(jobData as never, jobId, token);
  }
}
