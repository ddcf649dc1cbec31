import type { Processor } from 'bullmq';
import type { NoticeEngine } from '../src/notice/engine.js';
import { noticeOfJob, runStep, type NoticeJob, type StepContext } from './index.js';

/**
 * The `email-poll` queue: one job per notice runs `pollEmail` at each planned check, moved back to
 * delayed in between (a job of an earlier version, one per check, does the same); its workers
 * share the provider's status-call limit.
 */
export function pollEmailProcessor(engine: NoticeEngine, ctx: StepContext): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, ctx, () => engine.pollEmail(noticeOfJob(job)));
}
