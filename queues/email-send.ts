import type { Processor } from 'bullmq';
import type { NoticeEngine } from '../src/notice/engine.js';
import { noticeOfJob, runStep, type NoticeJob, type StepContext } from './index.js';

/** The `email-send` queue: one engine step, `sendEmail`, per job. */
export function sendEmailProcessor(engine: NoticeEngine, ctx: StepContext): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, ctx, () => engine.sendEmail(noticeOfJob(job)));
}
