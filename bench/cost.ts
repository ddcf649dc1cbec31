/**
 * Cost per notice: Redis commands (INFO commandstats, net of the idle rate), provider calls
 * (the emulator's request log), from the first POST until the last job of the last notice
 * ran, with one worker process. The baseline is a raw BullMQ job added and worked the same way.
 */
import pino from 'pino';
import { openArchive } from '../src/archive/open.js';
import { AddressLookup } from '../src/notice/address-lookup.js';
import { indexUnretired, retireNoticesOnce } from '../src/retention/retire.js';
import { DAY, systemClock } from '../src/clock.js';
import { createNotices, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { ownCpuMs, until } from './processes.js';
import { RawDeployment } from './raw.js';
import { countCommands, keysMemory, perItem, top, type CountedWork } from './redis-stats.js';
import type { SlowlogProfile } from './slowlog.js';

/** `BENCH_SLOWLOG=1`: profile each cost run with SLOWLOG (bench/slowlog.ts). */
const PROFILE = process.env.BENCH_SLOWLOG === '1';

export interface CostRun {
  items: number;
  redisCommandsPerItem: number;
  /** Round trips to Redis per item (requests, and the requests pipelined with them, read at once), net of the idle rate. */
  redisRoundTripsPerItem: number;
  /** CPU time of the Redis server per item, µs, net of its idle rate. */
  redisCpuUsPerItem: number;
  /**
   * CPU time per item, µs, net of the idle rate, of Herald's web and worker processes; for the
   * raw job, of its worker process and of the benchmark's process, which adds the jobs.
   */
  processCpuUsPerItem: number;
  /** Commands per second while idle (workers waiting, the probe running), subtracted. */
  idleCommandsPerSecond: number;
  seconds: number;
  busiestCommands: Record<string, number>;
  providerCallsPerItem?: Record<string, number>;
  /** Herald only: Redis memory of the finished notices, before and after retirement. */
  memory?: FinishedMemory;
  /** `BENCH_SLOWLOG=1` only: where Redis's time went, by script and command. */
  profile?: SlowlogProfile;
}

/**
 * Redis memory per finished notice, from MEMORY USAGE of the run's keys: `noticeBytes` counts the
 * keys and index members that are the notice's own (hash, events list, content, its members of
 * the shard indexes); the log stream (kept `HERALD_LOG_KEEP_HOT`) and BullMQ's kept finished
 * jobs (the last 1,000 per queue) are shared and only in `byKind`.
 */
export interface FinishedMemory {
  hot: { noticeBytes: number; byKind: Record<string, number> };
  retired: { noticeBytes: number; byKind: Record<string, number> };
}

const NOTICE_KINDS = ['{s}:notice', '{s}:events', '{s}:content', '{s}:created', '{s}:due', '{s}:content-expiry', '{s}:retire', '{s}:idem'];

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
      {
        idleMs: 3000,
        probe: async () => (await herald.live()) === 0 && (await herald.drained()),
        probeEveryMs: 250,
        processCpu: () => herald.processCpuMs(),
        profile: PROFILE ? ctx.redisUrl : undefined,
      },
    );
    const calls: Record<string, number> = {};
    for (const request of ctx.sandbox.requests()) if (request.at >= started) calls[request.operation] = (calls[request.operation] ?? 0) + 1;
    calls.total = Object.values(calls).reduce((a, b) => a + b, 0);
    const memory = await retirementMemory(ctx, herald, notices);
    return {
      ...costPerItem(counted, notices),
      memory,
      providerCallsPerItem: Object.fromEntries(Object.entries(calls).map(([op, n]) => [op, Math.round((n / notices) * 100) / 100])),
    };
  } finally {
    await herald.close();
  }
}

/**
 * Reads the finished notices' memory, retires them all through the worker's own steps (made due
 * now, then swept until none waits), and reads it again.
 */
async function retirementMemory(ctx: BenchContext, herald: HeraldDeployment, notices: number): Promise<FinishedMemory> {
  const reading = async () => {
    const byKind = perItem((await keysMemory(ctx.redis, herald.prefix)).byKind, notices);
    return { noticeBytes: NOTICE_KINDS.reduce((sum, kind) => sum + (byKind[kind] ?? 0), 0), byKind };
  };
  const hot = await reading();
  const archive = openArchive(herald.config, ctx.redis);
  const keys = herald.store.keys;
  try {
    // Due now rather than HERALD_NOTICE_KEEP_HOT (a day) after each notice finished, once the
    // log mirror has indexed every one (notices are no longer in a `created` index to find them by).
    const indexed = async () =>
      (await Promise.all(keys.allShards().map((shard) => ctx.redis.zcard(keys.retire(shard))))).reduce((a, b) => a + b, 0);
    await until(async () => (await indexed()) >= notices, 60_000, 'every finished notice to be indexed for retirement', 250);
    const now = Date.now();
    await indexUnretired(ctx.redis, keys, now);
    for (const shard of keys.allShards()) {
      const ids = await ctx.redis.zrange(keys.retire(shard), 0, '-1');
      if (ids.length > 0) await ctx.redis.zadd(keys.retire(shard), 'XX', ...ids.flatMap((id) => [now, id]));
    }
    const deps = {
      redis: ctx.redis,
      store: herald.store,
      archive,
      clock: systemClock,
      log: pino({ level: 'warn' }),
      retryMs: 0,
      statsRetentionMs: 31 * DAY,
      addressLookup: new AddressLookup(herald.config.addressKeys),
    };
    await until(
      async () => {
        await retireNoticesOnce(deps);
        const waiting = await Promise.all(keys.allShards().map((shard) => ctx.redis.zcard(keys.retire(shard))));
        return waiting.every((n) => n === 0);
      },
      120_000,
      'every finished notice to be retired',
      250,
    );
  } finally {
    await archive.close();
  }
  return { hot, retired: await reading() };
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
      {
        idleMs: 3000,
        probe: () => raw.drained(),
        probeEveryMs: 250,
        processCpu: () => raw.processCpuMs() + ownCpuMs(),
        profile: PROFILE ? ctx.redisUrl : undefined,
      },
    );
    return costPerItem(counted, jobs);
  } finally {
    await raw.close();
  }
}

/** A counted run's figures per item: commands and CPU net of the idle rates, the busiest commands. */
export function costPerItem(counted: CountedWork, items: number): CostRun {
  return {
    items,
    redisCommandsPerItem: counted.total / items,
    redisRoundTripsPerItem: counted.reads / items,
    redisCpuUsPerItem: (counted.redisCpuMs * 1000) / items,
    processCpuUsPerItem: (counted.processCpuMs * 1000) / items,
    idleCommandsPerSecond: counted.idlePerSecond,
    seconds: counted.durationMs / 1000,
    busiestCommands: top(counted.byCommand, items, 40),
    profile: counted.profile,
  };
}
