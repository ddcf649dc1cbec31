import type { Processor } from 'bullmq';
import type { NoticeEngine } from '../src/notice/engine.js';
import { noticeOfJob, runStep, type NoticeJob, type StepContext } from './index.js';

/** The `sms-send` queue: one engine step, `sendSms`, per job. */
export function sendSmsProcessor(engine: NoticeEngine, ctx: StepContext): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, ctx, () => engine.sendSms(noticeOfJob(job)));
}
