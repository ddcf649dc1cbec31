/**
 * The life of a notice after acceptance: send, observe, decide, fall back. Each public method is
 * one step (in ./steps/) that reads the notice, talks to at most one provider, and writes its
 * result through one named, guarded transition (./transitions.ts), so any number of workers (and
 * the reconciler) may run the same step twice without a second email decision or a second SMS.
 * The queue processors (queues/*) and the reconciler call these steps; nothing else does.
 */
import { StepContext, type EngineDeps } from './steps/context.js';
import { runDeadline } from './steps/deadline.js';
import { decideFallback } from './steps/decide.js';
import { drive } from './steps/drive.js';
import { runNotice } from './steps/notice-job.js';
import { pollEmail, pollSms } from './steps/observe.js';
import { sendEmail, sendSms } from './steps/send.js';
import type { StepOutcome } from './outcome.js';
import type { Channel } from '../providers/types.js';
import type { FallbackReason } from './states.js';

export { DEFAULT_MAX_RETRY_AFTER_MS, type EngineDeps, type EngineSettings } from './steps/context.js';

export class NoticeEngine {
  private readonly ctx: StepContext;

  constructor(deps: EngineDeps) {
    this.ctx = new StepContext(deps);
  }

  /** Hands the email to the provider once; resolves a send in doubt by searching first. */
  sendEmail(id: string): Promise<StepOutcome> {
    return sendEmail(this.ctx, id);
  }

  /** Hands the fallback SMS to the provider at most once, after quiet hours. */
  sendSms(id: string): Promise<StepOutcome> {
    return sendSms(this.ctx, id);
  }

  /** One planned email status check; asks for the next one. */
  pollEmail(id: string): Promise<StepOutcome> {
    return pollEmail(this.ctx, id);
  }

  /** One SMS status check; plans the next one from the SMS plan. */
  pollSms(id: string): Promise<StepOutcome> {
    return pollSms(this.ctx, id);
  }

  /** At or after the deadline: the last email status read, the fallback decision, and the SMS send when nothing makes it wait. */
  runDeadline(id: string): Promise<StepOutcome> {
    return runDeadline(this.ctx, id);
  }

  /**
   * One run of the notice's job: the step its state needs now (send, a planned check, the
   * deadline, the SMS's send or checks), coming back for the next one. `expected`: the job came
   * back for a planned check of this channel (its read is taken along with the notice's).
   * `readsState`: the caller reads the notice's state after moving the job back (`ifUndecided`).
   */
  runNotice(id: string, expected?: Channel, readsState?: boolean): Promise<StepOutcome> {
    return runNotice(this.ctx, id, expected, readsState);
  }

  /** Decides the fallback at most once (or blocks it when SMS may not be used). */
  decideFallback(id: string, reason: FallbackReason): Promise<StepOutcome> {
    return decideFallback(this.ctx, id, reason);
  }

  /** Drives an overdue notice with whatever step its state needs (the reconciler's repair). */
  drive(id: string): Promise<StepOutcome> {
    return drive(this.ctx, id);
  }
}
