import type { Processor } from 'bullmq';
import type { NoticeEngine } from '../src/notice/engine.js';
import { noticeOfJob, runStep, type NoticeJob, type StepContext } from './index.js';

/**
 * The `sms-poll` queue: one job per notice runs `pollSms` at each check of the SMS plan, moved back
 * to delayed in between (a job of an earlier version, one per check, does the same); its workers
 * share the provider's status-call limit.
 */
export function pollSmsProcessor(engine: NoticeEngine, ctx: StepContext): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, ctx, () => engine.pollSms(noticeOfJob(job)));
}
