import type { Channel } from '../providers/types.js';

/** What a step of the engine asks of whoever ran it (a queue processor or the reconciler). */
export type StepOutcome =
  /** `pauseMs`: the provider asked (429 Retry-After) that this kind of call wait this long, for every worker. */
  | { kind: 'done'; note: string; pauseMs?: number }
  /**
   * `check`: what the notice's job comes back for at `at` is a planned status check of this
   * channel. The job keeps it (queues/index.ts runStep), and that run takes the channel's status
   * read along with its read of the notice, in the same round trip (src/notice/steps/notice-job.ts).
   */
  /**
   * `ifUndecided`: the notice waited undecided when the run ended, and comes back at `at` only
   * while it stays so. A webhook may decide it (an early fallback) or settle it while the run is
   * on, and its ask to run the job now finds the job running and leaves it: whoever moves the job
   * back reads the notice's state after the move, and brings a notice decided or finished by then
   * back at once (queues/index.ts runStep).
   */
  | { kind: 'retry'; at: number; note: string; pauseMs?: number; check?: Channel; ifUndecided?: true };

export const done = (note: string, pauseMs?: number): StepOutcome => (pauseMs ? { kind: 'done', note, pauseMs } : { kind: 'done', note });
export const retryAt = (at: number, note: string, pauseMs?: number): StepOutcome =>
  pauseMs ? { kind: 'retry', at, note, pauseMs } : { kind: 'retry', at, note };
/** Comes back at `at` for a planned status check of `channel`. */
export const checkAt = (at: number, note: string, channel: Channel, pauseMs?: number): StepOutcome =>
  pauseMs ? { kind: 'retry', at, note, pauseMs, check: channel } : { kind: 'retry', at, note, check: channel };

/**
 * What the engine asks to run when; queues/index.ts implements it over BullMQ, where each notice
 * has one job that comes back for each of these (asked from inside that job, a time it moves
 * itself back to delayed for). Asking twice is harmless.
 */
export interface Scheduler {
  /** The email's send, at `at`. */
  emailSend(noticeId: string, at: number): Promise<void>;
  /**
   * The first runs of many notices accepted together: each one's job due at `emailAt`, for the
   * email's send, added in bulk (one notice: one add).
   */
  accepted(notices: readonly { noticeId: string; emailAt: number; deadline: number }[]): Promise<void>;
  /** The channel's next planned status check, due at `at`. */
  emailPoll(noticeId: string, at: number): Promise<void>;
  deadline(noticeId: string, at: number): Promise<void>;
  /** The notice no longer waits for its deadline (settled before it): its job goes (a job already running stays). */
  dropDeadline(noticeId: string): Promise<void>;
  smsSend(noticeId: string, at: number): Promise<void>;
  smsPoll(noticeId: string, at: number): Promise<void>;
  /** A channel settled by a webhook: its checks are not needed (a job already running stays). */
  dropChecks(noticeId: string, channel: 'email' | 'sms'): Promise<void>;
}
