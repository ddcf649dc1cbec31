import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { systemClock } from '../../src/clock.js';
import { done, type StepOutcome } from '../../src/notice/outcome.js';
import { MAX_STEP_RUNS, noticeOfJob, runStep, type NoticeJob } from '../../queues/index.js';
import { deleteKeys, plainRedis, testPrefix, waitFor } from '../helpers/env.js';

let redis: Redis;
let queue: Queue<NoticeJob>;
let worker: Worker<NoticeJob>;
const prefix = testPrefix('runstep');
/** How many more times each notice's step throws before it succeeds. */
const failuresLeft = new Map<string, number>();
const runs = new Map<string, number>();

beforeAll(async () => {
  redis = plainRedis();
  const connection = { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', maxRetriesPerRequest: null };
  queue = new Queue<NoticeJob>('steps', { connection, prefix: `${prefix}:{q}` });
  const ctx = { clock: systemClock, log: pino({ level: 'silent' }), retryBaseMs: 5 };
  const step = async (id: string): Promise<StepOutcome> => {
    runs.set(id, (runs.get(id) ?? 0) + 1);
    const left = failuresLeft.get(id) ?? 0;
    if (left > 0) {
      failuresLeft.set(id, left - 1);
      throw new Error('Connection is closed.');
    }
    return done('ok');
  };
  worker = new Worker<NoticeJob>('steps', (job, token) => runStep(job, token, ctx, () => step(noticeOfJob(job))), {
    connection,
    prefix: `${prefix}:{q}`,
    concurrency: 4,
  });
  await worker.waitUntilReady();
});
afterAll(async () => {
  await worker.close();
  await queue.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

async function finished(jobId: string) {
  return waitFor(
    async () => {
      const job = await queue.getJob(jobId);
      return job?.finishedOn ? job : undefined;
    },
    10_000,
    `job ${jobId} to finish`,
  );
}

describe('runStep', () => {
  it('runs a step that threw again, with its job options holding no retry settings', async () => {
    failuresLeft.set('n-flaky', 2);
    await queue.add('step', { noticeId: 'n-flaky' }, { jobId: 'flaky' });
    const job = await finished('flaky');
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toBe('ok');
    expect(runs.get('n-flaky')).toBe(3);
    expect(job.data.errors).toBe(2);
    // What BullMQ stores for the job: none of its own retries (attempts 0 is BullMQ's default), no backoff.
    const stored = JSON.parse((await redis.hget(`${prefix}:{q}:steps:flaky`, 'opts'))!) as Record<string, unknown>;
    expect(stored.attempts ?? 0).toBe(0);
    expect(stored).not.toHaveProperty('backoff');
  });

  it('fails the job, with the error, after the last run', async () => {
    failuresLeft.set('n-broken', 100);
    await queue.add('step', { noticeId: 'n-broken' }, { jobId: 'broken' });
    const job = await finished('broken');
    expect(await job.getState()).toBe('failed');
    expect(job.failedReason).toBe('Connection is closed.');
    expect(runs.get('n-broken')).toBe(MAX_STEP_RUNS);
  });
});
