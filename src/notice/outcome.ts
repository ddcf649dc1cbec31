/** What a step of the engine asks of whoever ran it (a queue processor or the reconciler). */
export type StepOutcome =
  /** `pauseMs`: the provider asked (429 Retry-After) that this kind of call wait this long, for every worker. */
  { kind: 'done'; note: string; pauseMs?: number } | { kind: 'retry'; at: number; note: string; pauseMs?: number };

export const done = (note: string, pauseMs?: number): StepOutcome => (pauseMs ? { kind: 'done', note, pauseMs } : { kind: 'done', note });
export const retryAt = (at: number, note: string, pauseMs?: number): StepOutcome =>
  pauseMs ? { kind: 'retry', at, note, pauseMs } : { kind: 'retry', at, note };

/** The jobs the engine asks for; queues/index.ts implements it over BullMQ. Adding twice is harmless. */
export interface Scheduler {
  emailSend(noticeId: string, at: number): Promise<void>;
  /**
   * The first jobs of many notices accepted together (a batch): each one's `email-send` job at
   * `emailAt` and its `deadline` job at its deadline, added in bulk.
   */
  accepted(notices: readonly { noticeId: string; emailAt: number; deadline: number }[]): Promise<void>;
  /** The channel's status-check job, due at `at`; it moves itself back to delayed for each later check. */
  emailPoll(noticeId: string, at: number): Promise<void>;
  deadline(noticeId: string, at: number): Promise<void>;
  /** Removes the deadline job of a notice that no longer needs it (a job already running stays). */
  dropDeadline(noticeId: string): Promise<void>;
  smsSend(noticeId: string, at: number): Promise<void>;
  smsPoll(noticeId: string, at: number): Promise<void>;
  /** Removes a channel's status-check job (a job already running stays). */
  dropChecks(noticeId: string, channel: 'email' | 'sms'): Promise<void>;
}
