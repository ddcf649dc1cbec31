/**
 * The floor under the kept design, measured in the cost run's own conditions: the same number of
 * notices, accepted as fast, with the same plan (an 8 s deadline), one worker process. The
 * acceptance is the floor route's (bench/baseline-server.ts): the creation script and the
 * notice's one job, on the web's own connections, here in the benchmark's process; the worker
 * is bench/floor-worker.ts: the job's runs, the transitions of each, the moves back to delayed
 * and the log mirror, nothing else. What a notice costs Redis above this is what Herald's
 * steps add to what the design asks for (their reads, the status-read limits, the sweeps),
 * and what it costs at this floor is the design's own: a ratio of the two in one run says how
 * close the end to end is to what the design can reach, whatever the machine.
 */
import { systemClock } from '../src/clock.js';
import { composeWeb } from '../src/compose.js';
import { createLogger } from '../src/logger.js';
import { acceptSettings, prepareNotice, type AcceptRequest } from '../src/notice/accept.js';
import { newNoticeId } from '../src/notice/ids.js';
import { costPerItem, type CostRun } from './cost.js';
import { HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { NodeProcess, ownCpuMs, until } from './processes.js';
import { countCommands } from './redis-stats.js';

/** Accepts in flight at once, as the cost run's 50 connections. */
const IN_FLIGHT = 50;

export async function floorCost(ctx: BenchContext, path: 'delivered' | 'fallback', notices: number): Promise<CostRun> {
  const herald = new HeraldDeployment(ctx, `${ctx.runPrefix}-floor-${path}`);
  const web = composeWeb(herald.config, { clock: systemClock, logger: createLogger('bench-floor-web', 'silent') });
  try {
    herald.workers.push(new NodeProcess('dist/bench/floor-worker.js', { ...herald.env, FLOOR_PATH: path }).start());
    await until(
      async () => {
        const dead = herald.workers.find((w) => !w.running);
        if (dead) throw new Error(`the floor worker exited at start:\n${dead.output}`);
        const counts = await Promise.all(herald.queue('deadline').all.map((q) => q.getWorkersCount()));
        return counts.every((count) => count >= 1);
      },
      60_000,
      'the floor worker to register',
      100,
    );
    const { store, policies, scheduler } = web.deps;
    const body = noticeBody({ email: 'floor@example.com', phone: '+12025550100', deadlineInSeconds: 8 }) as unknown as AcceptRequest;
    const policy = await policies.get(body.recipient.id);
    const settings = acceptSettings(herald.config);
    const accept = async () => {
      const now = Date.now();
      const shard = store.newShard();
      const prepared = prepareNotice(body, policy, { now, shard, emailSuppressed: false, settings });
      const id = newNoticeId(shard, now);
      await store.create({ ...prepared.input, id, createdAt: now, due: now });
      await scheduler.accepted([{ noticeId: id, emailAt: now, deadline: prepared.deadline }]);
    };
    const failedJobs = async () =>
      (await Promise.all(herald.queue('deadline').all.map((q) => q.getJobs(['failed'], 0, 0)))).flat().map((job) => job.failedReason);
    const finished = async () => {
      const failed = await failedJobs();
      // A refused transition fails its job: the figure would then be of less than the floor.
      if (failed.length > 0) throw new Error(`a job of the ${path} floor failed (${failed[0]}): its figure would mean nothing`);
      return (await herald.live()) === 0 && (await herald.drained());
    };
    const counted = await countCommands(
      ctx.redis,
      async () => {
        let next = 0;
        await Promise.all(
          Array.from({ length: IN_FLIGHT }, async () => {
            while (next < notices) {
              next += 1;
              await accept();
            }
          }),
        );
        await until(finished, 120_000, `every ${path} notice of the floor and its job to finish`, 250);
      },
      {
        idleMs: 3000,
        probe: finished,
        probeEveryMs: 250,
        processCpu: () => herald.processCpuMs() + ownCpuMs(),
        profile: process.env.BENCH_SLOWLOG === '1' ? ctx.redisUrl : undefined,
      },
    );
    await finished();
    return costPerItem(counted, notices);
  } finally {
    await web.close();
    await herald.close();
  }
}
