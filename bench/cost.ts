/**
 * Cost per notice: Redis commands (INFO commandstats, net of the idle rate), provider calls
 * (the emulator's request log), from the first POST until the last job of the last notice
 * ran, with one worker process. The baseline is a raw BullMQ job added and worked the same way.
 */
import { createNotices, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { until } from './processes.js';
import { RawDeployment } from './raw.js';
import { countCommands, top } from './redis-stats.js';

export interface CostRun {
  items: number;
  redisCommandsPerItem: number;
  /** Commands per second while idle (workers waiting, the probe running), subtracted. */
  idleCommandsPerSecond: number;
  seconds: number;
  busiestCommands: Record<string, number>;
  providerCallsPerItem?: Record<string, number>;
}

/**
 * The default poll plan of an 8 s deadline (checks at 2, 3.5, 5 and 6.5 s, then the deadline),
 * so that the fallback path pays the usual number of status checks before it decides.
 */
const DEADLINE_SECONDS = 8;

export async function noticeCost(ctx: BenchContext, path: 'delivered' | 'fallback', notices: number): Promise<CostRun> {
  const herald = new HeraldDeployment(ctx, `${ctx.runPrefix}-cost-${path}`);
  try {
    await herald.startWeb();
    await herald.startWorkers(1);
    ctx.sandbox.reset();
    const email = path === 'delivered' ? 'delivered+0ms@example.com' : 'never@example.com';
    let started = 0;
    const counted = await countCommands(
      ctx.redis,
      async () => {
        started = Date.now();
        await createNotices(herald.url, notices, () => noticeBody({ email, phone: '+12025550100', deadlineInSeconds: DEADLINE_SECONDS }));
        await until(
          async () => (await herald.live()) === 0 && (await herald.drained()),
          120_000,
          `every ${path} notice and its jobs to finish`,
          250,
        );
      },
      { idleMs: 3000, probe: async () => (await herald.live()) === 0 && (await herald.drained()), probeEveryMs: 250 },
    );
    const calls: Record<string, number> = {};
    for (const request of ctx.sandbox.requests()) if (request.at >= started) calls[request.operation] = (calls[request.operation] ?? 0) + 1;
    calls.total = Object.values(calls).reduce((a, b) => a + b, 0);
    return {
      items: notices,
      redisCommandsPerItem: counted.total / notices,
      idleCommandsPerSecond: counted.idlePerSecond,
      seconds: counted.durationMs / 1000,
      busiestCommands: top(counted.byCommand, notices, 40),
      providerCallsPerItem: Object.fromEntries(Object.entries(calls).map(([op, n]) => [op, Math.round((n / notices) * 100) / 100])),
    };
  } finally {
    await herald.close();
  }
}

/** A raw BullMQ job: one `add` (as a web process would), worked by one raw worker process. */
export async function rawJobCost(ctx: BenchContext, jobs: number): Promise<CostRun> {
  const raw = new RawDeployment(ctx, `${ctx.runPrefix}-cost-raw`);
  try {
    await raw.startWorkers(1);
    const counted = await countCommands(
      ctx.redis,
      async () => {
        for (let i = 0; i < jobs; i += 50) {
          await Promise.all(Array.from({ length: Math.min(50, jobs - i) }, (_, k) => raw.queue.add('noop', { noticeId: `raw-${i + k}` })));
        }
        await until(() => raw.drained(), 120_000, 'the raw jobs to finish', 250);
      },
      { idleMs: 3000, probe: () => raw.drained(), probeEveryMs: 250 },
    );
    return {
      items: jobs,
      redisCommandsPerItem: counted.total / jobs,
      idleCommandsPerSecond: counted.idlePerSecond,
      seconds: counted.durationMs / 1000,
      busiestCommands: top(counted.byCommand, jobs, 40),
    };
  } finally {
    await raw.close();
  }
}
