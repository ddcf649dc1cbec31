/**
 * Lifecycle throughput: notices per second through the whole pipeline, against raw BullMQ
 * no-op jobs per second with the same worker processes and concurrency. Each run loads its
 * work while the queues are paused and times the drain after `resume`, so that neither the
 * HTTP load nor process start-up is in the figure.
 */
import { HeraldDeployment, createNotices, type BenchContext } from './herald.js';
import { noticeBody } from './herald.js';
import { sleep, until } from './processes.js';
import { RawDeployment } from './raw.js';

export interface ThroughputRun {
  workers: number;
  items: number;
  seconds: number;
  perSecond: number;
}

export interface LifecycleRun extends ThroughputRun {
  /** Provider calls the emulator saw during the timed part, per notice, by operation. */
  providerCallsPerNotice: Record<string, number>;
  /** Notices that did not take the path the run is about (should be none). */
  offPath: number;
}

/** The delivered path: an email delivered at once, observed at the first check after its send. */
export async function deliveredThroughput(ctx: BenchContext, workers: number, notices: number): Promise<LifecycleRun> {
  const herald = new HeraldDeployment(ctx, `${ctx.runPrefix}-delivered-${workers}w`);
  try {
    await readyAndPaused(ctx, herald, workers);
    // Checks every 2 s from 1 s on: a notice is observed within 2 s of its send, whenever that is.
    await createNotices(herald.url, notices, () =>
      noticeBody({
        email: 'delivered+0ms@example.com',
        phone: '+12025550100',
        deadlineInSeconds: 60,
        policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 2 },
      }),
    );
    const started = Date.now();
    await herald.resume();
    await until(async () => (await herald.live()) === 0, 300_000, 'every delivered notice to complete', 50);
    const seconds = (Date.now() - started) / 1000;
    return {
      workers,
      items: notices,
      seconds,
      perSecond: notices / seconds,
      providerCallsPerNotice: providerCalls(ctx, started, notices),
      offPath: ctx.sandbox.accepted.sms,
    };
  } finally {
    await herald.close();
  }
}

/**
 * The fallback path: the email is sent, then at the deadline read once more, the fallback
 * decided, the SMS sent and observed delivered. A notice's one job sends its email before the
 * deadline and comes back at it, so the run is timed in two parts: the sends (the queues resumed
 * until every email is sent, then paused), and, once every deadline has passed, the rest (the
 * queues resumed until every notice is done); the wait between them is not in the figure.
 */
export async function fallbackThroughput(ctx: BenchContext, workers: number, notices: number): Promise<LifecycleRun> {
  const herald = new HeraldDeployment(ctx, `${ctx.runPrefix}-fallback-${workers}w`);
  try {
    await readyAndPaused(ctx, herald, workers);
    // The deadline is the only check (the first check would come after it), far enough for every send to go before it.
    const deadlineInSeconds = 20;
    const created = Date.now();
    await createNotices(herald.url, notices, () =>
      noticeBody({ email: 'never@example.com', phone: '+12025550100', deadlineInSeconds, policy: { firstCheckAfterSeconds: 3600 } }),
    );
    const started = Date.now();
    await herald.resume();
    await until(async () => ctx.sandbox.accepted.emails >= notices, 300_000, 'every email to be sent', 20);
    const sent = Date.now();
    await herald.pause();
    if (sent >= created + deadlineInSeconds * 1000)
      throw new Error(`the sends took past the first deadline (${sent - started} ms): lower the count`);
    // Every deadline passed (the last notice was created just before `started`): all of them due at once.
    await sleep(Math.max(0, started + deadlineInSeconds * 1000 + 1000 - Date.now()));
    const resumed = Date.now();
    await herald.resume();
    await until(async () => (await herald.live()) === 0, 300_000, 'every fallback notice to complete', 50);
    const seconds = (sent - started + Date.now() - resumed) / 1000;
    return {
      workers,
      items: notices,
      seconds,
      perSecond: notices / seconds,
      providerCallsPerNotice: providerCalls(ctx, started, notices),
      offPath: notices - ctx.sandbox.sms().filter((m) => m.status === 'delivered').length,
    };
  } finally {
    await herald.close();
  }
}

/** Raw BullMQ: no-op jobs with Herald's job options, drained by `workers` processes of concurrency 20. */
export async function rawThroughput(ctx: BenchContext, workers: number, jobs: number): Promise<ThroughputRun> {
  const raw = new RawDeployment(ctx, `${ctx.runPrefix}-raw-${workers}w`);
  try {
    await raw.startWorkers(workers);
    await raw.queue.pause();
    await raw.addBulk(jobs, (i) => ({ noticeId: `raw-${i}` }));
    const started = Date.now();
    await raw.queue.resume();
    await until(() => raw.drained(), 300_000, 'the raw queue to drain', 20);
    const seconds = (Date.now() - started) / 1000;
    return { workers, items: jobs, seconds, perSecond: jobs / seconds };
  } finally {
    await raw.close();
  }
}

/** Starts web and workers with every notice queue paused, and clears the emulators' records. */
async function readyAndPaused(ctx: BenchContext, herald: HeraldDeployment, workers: number): Promise<void> {
  await herald.startWeb();
  await herald.startWorkers(workers);
  await herald.pause();
  ctx.sandbox.reset();
}

function providerCalls(ctx: BenchContext, since: number, notices: number): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const request of ctx.sandbox.requests()) {
    if (request.at < since) continue;
    calls[request.operation] = (calls[request.operation] ?? 0) + 1;
  }
  calls.total = Object.values(calls).reduce((a, b) => a + b, 0);
  return Object.fromEntries(Object.entries(calls).map(([op, n]) => [op, Math.round((n / notices) * 100) / 100]));
}
