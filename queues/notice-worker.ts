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
 * for, its error count).
 */
import { Job, Worker } from 'bullmq';
import type { NoticeJob } from './index.js';

/**
 * What BullMQ's move to delayed answers when asked to fetch: the next job's fields and ID, and
 * the worker's delays; empty when it found no job.
 */
type Fetched = [jobData?: unknown, jobId?: string, rateLimitDelay?: number, delayUntil?: number];

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
    const next = await this.backend.moveToDelayed(this.id!, now, delay, token, {
      skipAttempt: true,
      ...(data === undefined ? {} : { fieldsToUpdate: { data: JSON.stringify(data) } }),
      fetchNext,
    });
    this.delay = delay;
    if (data !== undefined) this.data = data;
    if (fetchNext && Array.isArray(next)) worker.handOver(token, next as Fetched);
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
