import type { Processor } from 'bullmq';
import type { Clock } from '../src/clock.js';
import type { NoticeEngine } from '../src/notice/engine.js';
import { runStep, type NoticeJob } from './index.js';

/** The `sms-poll` queue: one engine step, `pollSms`, per job; its workers share the provider's status-call limit. */
export function pollSmsProcessor(engine: NoticeEngine, clock: Clock, pause?: (ms: number) => Promise<void>): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, clock, () => engine.pollSms(job.data.noticeId), pause);
}
