import type { Processor } from 'bullmq';
import type { Clock } from '../src/clock.js';
import type { NoticeEngine } from '../src/notice/engine.js';
import { runStep, type NoticeJob } from './index.js';

/** The `email-send` queue: one engine step, `sendEmail`, per job. */
export function sendEmailProcessor(engine: NoticeEngine, clock: Clock): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, clock, () => engine.sendEmail(job.data.noticeId));
}
