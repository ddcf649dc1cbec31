import type { Processor } from 'bullmq';
import type { NoticeEngine } from '../src/notice/engine.js';
import { noticeOfJob, runStep, type NoticeJob, type StepContext } from './index.js';

/** The `deadline` queue: `runDeadline` — the last read, the fallback decision, and the SMS send when nothing makes it wait. */
export function runDeadlineProcessor(engine: NoticeEngine, ctx: StepContext): Processor<NoticeJob> {
  return (job, token) => runStep(job, token, ctx, () => engine.runDeadline(noticeOfJob(job)));
}
