/**
 * What each queue's job does, as one table: a notice queue's job runs one step of the engine for
 * the notice its ID names (`runStep` moves it back to delayed when the step asks to come back); a
 * sweep queue's scheduled job runs one pass of its sweep. The worker (src/worker.ts) starts a
 * BullMQ Worker per queue (per partition) with the processor of this table.
 */
import { DelayedError, type Processor } from 'bullmq';
import type { DeliveryStep } from '../src/events/deliver.js';
import type { EventDeliveryJob } from '../src/events/dispatch.js';
import type { Clock } from '../src/clock.js';
import type { NoticeEngine } from '../src/notice/engine.js';
import type { StepOutcome } from '../src/notice/outcome.js';
import { noticeOfJob, runStep, type NoticeJob, type NoticeQueueKey, type StepContext } from './index.js';

/** The engine step each notice queue runs, by queue. */
export const NOTICE_STEPS: Readonly<
  Record<NoticeQueueKey, (engine: NoticeEngine, noticeId: string, job: NoticeJob, readsState: boolean) => Promise<StepOutcome>>
> = {
  // The notice's job (`<id>-deadline`, the one job a notice has): whatever its state needs now,
  // coming back (moved to delayed) for the next: the email's send, each planned check, the
  // deadline's read and decision, the SMS's send and checks. A deadline job queued before one job
  // per notice, due at the deadline, runs the deadline's step here. A job that came back for a
  // planned check says so (`check`): the run takes that status read with its read of the notice.
  // With the notice's states at hand, runStep reads the state with the move back (`ifUndecided`).
  deadline: (engine, id, job, readsState) => engine.runNotice(id, job.check, readsState),
  // The queues below run the jobs queued before one job per notice (and duplicates of them).
  // Hands the email to the provider once; a send in doubt is searched for first.
  emailSend: (engine, id) => engine.sendEmail(id),
  // One planned status check; the job comes back (moved to delayed) for the next one before the deadline.
  emailPoll: (engine, id) => engine.pollEmail(id),
  // An SMS that waited (quiet hours, a send in doubt, a Retry-After, an early fallback).
  smsSend: (engine, id) => engine.sendSms(id),
  // One SMS status check, coming back for each check of the SMS plan.
  smsPoll: (engine, id) => engine.pollSms(id),
};

/** The processor of a notice queue: its step of NOTICE_STEPS for the notice of each job. */
export function noticeProcessor(queue: NoticeQueueKey, engine: NoticeEngine, ctx: StepContext): Processor<NoticeJob> {
  const step = NOTICE_STEPS[queue];
  const readsState = ctx.states !== undefined;
  return (job, token) => runStep(job, token, ctx, () => step(engine, noticeOfJob(job), job.data, readsState));
}

/**
 * The processor of a sweep queue (`reconcile`, `log-mirror`, `content-purge`, `provider-feed`):
 * each scheduled job runs one pass of the sweep.
 */
export function sweepProcessor(pass: () => Promise<unknown>): Processor {
  return async () => pass();
}

/**
 * The processor of the `event-delivery` queue: one attempt per run; an attempt that failed moves
 * the job back to delayed until its retry, with its count in the job's data.
 */
export function eventDeliveryProcessor(
  deliver: (job: EventDeliveryJob) => Promise<DeliveryStep>,
  clock: Clock,
): Processor<EventDeliveryJob> {
  return async (job, token) => {
    const step = await deliver(job.data);
    if (step.kind === 'done') return step.outcome;
    if (!token) return 'retry without a lock: left to run again';
    await job.updateData({ ...job.data, attempts: step.attempts });
    // BullMQ's delays are on the wall clock; the step's time is the injected clock's.
    await job.moveToDelayed(Date.now() + Math.max(0, step.at - clock.now()), token);
    throw new DelayedError(`attempt ${step.attempts} failed; the next at ${new Date(step.at).toISOString()}`);
  };
}
