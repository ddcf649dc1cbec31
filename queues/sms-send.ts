import type { Processor } from 'bullmq';
import type { Clock } from '../src/clock.js';
import type { NoticeEngine } from '../src/notice/engine.js';
import { runStep, type NoticeJob } from './index.js';

/** The `sms-send` queue: one engine step, `sendSms`, per job. */
export function sendSmsProcessor(engine: NoticeEngine, clock: Clock): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, clock, () => engine.sendSms(job.data.noticeId));
}
