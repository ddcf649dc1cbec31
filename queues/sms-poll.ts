import type { Processor } from 'bullmq';
import type { Clock } from '../src/clock.js';
import type { NoticeEngine } from '../src/notice/engine.js';
import { runStep, type NoticeJob } from './index.js';

/** The `sms-poll` queue: one engine step, `pollSms`, per job. */
export function pollSmsProcessor(engine: NoticeEngine, clock: Clock): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, clock, () => engine.pollSms(job.data.noticeId));
}
