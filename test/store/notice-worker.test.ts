import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DelayedError, Queue, Worker, type Job, type Processor } from 'bullmq';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { systemClock } from '../../src/clock.js';
import { checkAt, done, type StepOutcome } from '../../src/notice/outcome.js';
import { runStep, type NoticeJob, type NoticeStates } from '../../queues/index.js';
import type { NoticeState } from '../../src/notice/states.js';
import { NoticeWorker } from '../../queues/notice-worker.js';
import { NOTICE_STEPS } from '../../queues/processors.js';
import type { NoticeEngine } from '../../src/notice/engine.js';
import { deleteKeys, plainRedis, testPrefix, waitFor } from '../helpers/env.js';

const prefix = testPrefix('notice-worker');
const connection = { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', maxRetriesPerRequest: null };
let redis: Redis;
let queue: Queue<NoticeJob>;
let worker: Worker<NoticeJob> | undefined;

beforeAll(async () => {
  redis = plainRedis();
  queue = new Queue<NoticeJob>('moves', { connection, prefix: `${prefix}:{q}` });
});
afterEach(async () => {
  await worker?.close();
  worker = undefined;
  await queue.obliterate({ force: true });
});
afterAll(async () => {
  await queue.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** What a worker did: each job it started, and each job its own fetch (`moveToActive`) brought. */
function watched<W extends new (...args: any[]) => Worker<NoticeJob>>(Base: W) {
  return class extends Base {
    readonly started: string[] = [];
    readonly fetched: (string | undefined)[] = [];
    protected override async moveToActive(token: string, name?: string): Promise<Job<NoticeJob>> {
      const job = await super.moveToActive(token, name);
      this.fetched.push(job?.id);
      return job;
    }
  };
}

/**
 * `a` moves itself back to delayed once (for 200 ms) before it completes; `b` and `c` complete
 * at once. One slot: what takes `b` after `a` moved is the question.
 */
async function runThree(Base: typeof Worker<NoticeJob> | typeof NoticeWorker) {
  await queue.addBulk(['a', 'b', 'c'].map((id) => ({ name: 'step', data: {}, opts: { jobId: id } })));
  const Watched = watched(Base as new (...args: any[]) => Worker<NoticeJob>);
  const processor: Processor<NoticeJob> = async (job, token) => {
    watching.started.push(job.id!);
    if (job.id === 'a' && job.attemptsStarted === 1) {
      await job.moveToDelayed(Date.now() + 200, token);
      throw new DelayedError('back in 200 ms');
    }
    return 'done';
  };
  const watching = new Watched('moves', processor, { connection, prefix: `${prefix}:{q}`, concurrency: 1 }) as InstanceType<typeof Watched>;
  worker = watching;
  await waitFor(async () => (await queue.getCompletedCount()) === 3, 10_000, 'the three jobs to complete');
  return watching;
}

describe('the NoticeWorker', () => {
  it("hands a job that moved itself back to delayed the slot's next job from the same call, where BullMQ's worker fetches it in a call of its own", async () => {
    const plain = await runThree(Worker);
    expect(plain.started.slice(0, 2)).toEqual(['a', 'b']);
    expect(plain.fetched).toContain('b');
    await plain.close();
    worker = undefined;
    await queue.obliterate({ force: true });

    const moving = await runThree(NoticeWorker);
    expect(moving.started).toEqual(['a', 'b', 'c', 'a']);
    // `b` came with `a`'s move, `c` with `b`'s finish: neither from a fetch of the worker's own.
    expect(moving.fetched).not.toContain('b');
    expect(moving.fetched).not.toContain('c');
  });

  it("writes the job's data with its move back, and keeps the planned check it comes back for", async () => {
    const ctx = { clock: systemClock, log: pino({ level: 'silent' }), retryBaseMs: 5 };
    let runs = 0;
    const step = async (): Promise<StepOutcome> => {
      runs += 1;
      if (runs === 1) return checkAt(Date.now() + 60_000, 'next email check', 'email');
      return done('ok');
    };
    worker = new NoticeWorker('moves', (job, token) => runStep(job, token, ctx, step), {
      connection,
      prefix: `${prefix}:{q}`,
    });
    await queue.add('step', {}, { jobId: 'hint' });
    await waitFor(async () => (await queue.getJobState('hint')) === 'delayed', 10_000, 'the job to move back');
    expect(JSON.parse((await redis.hget(`${prefix}:{q}:moves:hint`, 'data'))!)).toEqual({ check: 'email' });
    await (await queue.getJob('hint'))!.promote();
    await waitFor(async () => (await queue.getJobState('hint')) === 'completed', 10_000, 'the job to complete');
  });

  it('leaves no job running when it closes while its jobs move back', async () => {
    const processor: Processor<NoticeJob> = async (job, token) => {
      await job.moveToDelayed(Date.now() + 20, token);
      throw new DelayedError('again');
    };
    worker = new NoticeWorker('moves', processor, { connection, prefix: `${prefix}:{q}`, concurrency: 4 });
    await queue.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: 'step', data: {}, opts: { jobId: `loop-${i}` } })));
    await waitFor(async () => (await queue.getDelayedCount()) > 0, 10_000, 'jobs to move back');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await worker.close();
    worker = undefined;
    expect(await queue.getActiveCount()).toBe(0);
    expect((await queue.getDelayedCount()) + (await queue.getWaitingCount())).toBe(20);
  });
});

describe("the notice's job", () => {
  it('tells its run the planned check it came back for', async () => {
    const asked: unknown[][] = [];
    const engine = { runNotice: async (...args: unknown[]) => (asked.push(args), done('ran')) } as unknown as NoticeEngine;
    await NOTICE_STEPS.deadline(engine, 'ntc_x', { check: 'sms' }, true);
    await NOTICE_STEPS.deadline(engine, 'ntc_y', {}, false);
    expect(asked).toEqual([
      ['ntc_x', 'sms', true],
      ['ntc_y', undefined, false],
    ]);
  });
});

describe('a job that comes back only while its notice stays undecided', () => {
  const stateKey = (id: string) => `${prefix}:state:${id}`;
  /** The notice's state in a key of its own; `alone` counts the reads sent on their own. */
  function states() {
    const reads = { alone: 0 };
    const notices: NoticeStates = {
      stateRead: (id) => ['hget', stateKey(id), 'state'],
      statesOf: async (ids) => {
        reads.alone += 1;
        return Promise.all(ids.map(async (id) => ((await redis.hget(stateKey(id), 'state')) ?? undefined) as NoticeState | undefined));
      },
    };
    return { reads, notices };
  }
  /** Runs `id`'s job once: its notice becomes `becomes` during the run, which asks to come back in a minute. */
  async function runOnce(Base: typeof Worker<NoticeJob> | typeof NoticeWorker, id: string, becomes: NoticeState) {
    await redis.hset(stateKey(id), 'state', 'email_sent');
    const { reads, notices } = states();
    const ctx = { clock: systemClock, log: pino({ level: 'silent' }), retryBaseMs: 5, states: notices };
    const runs: number[] = [];
    const step = async (): Promise<StepOutcome> => {
      runs.push(Date.now());
      if (runs.length > 1) return done('ran again');
      // A webhook's early fallback lands while the check runs: its ask finds the job running.
      await redis.hset(stateKey(id), 'state', becomes);
      const back = checkAt(Date.now() + 60_000, 'next email check', 'email');
      return back.kind === 'retry' ? { ...back, ifUndecided: true } : back;
    };
    worker = new Base('moves', (job, token) => runStep(job, token, ctx, step), { connection, prefix: `${prefix}:{q}` });
    await queue.add('step', { noticeId: id }, { jobId: id });
    await waitFor(
      async () => runs.length === 2 || (await queue.getJobState(id)) === 'delayed',
      10_000,
      'the job to run again or move back',
    );
    return { reads, runs };
  }

  it("reads the notice's state with its move back, in the move's round trip, and comes back at once for a notice decided meanwhile", async () => {
    const { reads, runs } = await runOnce(NoticeWorker, 'decided', 'sms_pending');
    await waitFor(async () => (await queue.getJobState('decided')) === 'completed', 10_000, 'the job to run again');
    expect(runs).toHaveLength(2);
    expect(runs[1]! - runs[0]!).toBeLessThan(60_000);
    expect(reads.alone).toBe(0);
  });

  it('stays delayed until its time for a notice still undecided', async () => {
    const { reads, runs } = await runOnce(NoticeWorker, 'undecided', 'email_sent');
    expect(await queue.getJobState('undecided')).toBe('delayed');
    expect(await queue.getJob('undecided').then((job) => job?.delay)).toBeGreaterThan(50_000);
    expect(runs).toHaveLength(1);
    expect(reads.alone).toBe(0);
  });

  it('comes back at once for a notice finished meanwhile (its run then ends the job)', async () => {
    const { runs } = await runOnce(NoticeWorker, 'finished', 'email_delivered');
    await waitFor(async () => (await queue.getJobState('finished')) === 'completed', 10_000, 'the job to run again');
    expect(runs).toHaveLength(2);
  });

  it("reads the state on its own after the move under BullMQ's plain worker", async () => {
    const { reads, runs } = await runOnce(Worker, 'plain', 'sms_pending');
    await waitFor(async () => (await queue.getJobState('plain')) === 'completed', 10_000, 'the job to run again');
    expect(runs).toHaveLength(2);
    expect(reads.alone).toBe(1);
  });
});
