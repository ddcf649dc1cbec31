import type { Processor } from 'bullmq';
import type { Clock } from '../src/clock.js';
import type { NoticeEngine } from '../src/notice/engine.js';
import { runStep, type NoticeJob } from './index.js';

/** The `deadline` queue: one engine step, `runDeadline`, per job. */
export function runDeadlineProcessor(engine: NoticeEngine, clock: Clock): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, clock, () => engine.runDeadline(job.data.noticeId));
}
