/**
 * Accept: `POST /v1/notices` under autocannon, against the baseline route (one BullMQ add per
 * request) and the floor route (the creation script and two jobs, nothing else: what the design
 * makes every acceptance cost), each in its own process on the same Redis, no worker running.
 * Rounds rotate which side goes first, and the median round counts, so that a noisy moment of the
 * machine falls on every side alike.
 */
import autocannon from 'autocannon';
import { API_KEY, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { freePort, httpReady, NodeProcess, processCpuMs } from './processes.js';
import { countCommands, deleteKeys, top } from './redis-stats.js';
import { median } from './stats.js';

export interface AcceptSide {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  rounds: { requestsPerSecond: number; p50Ms: number; p99Ms: number; non2xx: number; errors: number }[];
  redisCommandsPerRequest: number;
  /** The web process's CPU time per answered request (/proc, net of its idle rate), median of the rounds. */
  webCpuUsPerRequest: number;
  busiestCommands: Record<string, number>;
}

export interface AcceptResult {
  connections: number;
  roundSeconds: number;
  herald: AcceptSide;
  baseline: AcceptSide;
  floor: AcceptSide;
}

type Side = 'herald' | 'baseline' | 'floor';
const ORDERS: Side[][] = [
  ['baseline', 'floor', 'herald'],
  ['herald', 'baseline', 'floor'],
  ['floor', 'herald', 'baseline'],
];

export async function measureAccept(
  ctx: BenchContext,
  opts: { connections: number; roundSeconds: number; rounds: number },
): Promise<AcceptResult> {
  const herald = new HeraldDeployment(ctx, `${ctx.runPrefix}-accept`);
  const baselinePrefix = `${ctx.runPrefix}-accept-baseline`;
  const baselinePort = await freePort();
  const baseline = new NodeProcess('dist/bench/baseline-server.js', {
    REDIS_URL: ctx.redisUrl,
    BENCH_PREFIX: baselinePrefix,
    PORT: String(baselinePort),
  }).start();
  try {
    await herald.startWeb();
    await httpReady(`http://127.0.0.1:${baselinePort}/healthz`, baseline);
    // A far deadline: the notices only wait; the body is the same for both sides.
    const body = JSON.stringify(noticeBody({ email: 'delivered@example.com', phone: '+12025550100', deadlineInSeconds: 3600 }));
    const headers = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
    const targets = {
      herald: `${herald.url}/v1/notices`,
      baseline: `http://127.0.0.1:${baselinePort}/v1/baseline`,
      floor: `http://127.0.0.1:${baselinePort}/v1/floor`,
    };
    const run = (url: string, duration: number) =>
      autocannon({ url, method: 'POST', body, headers, connections: opts.connections, duration, timeout: 10 });

    ctx.log('accept: warming up');
    await run(targets.baseline, 5);
    await run(targets.floor, 5);
    await run(targets.herald, 5);

    const rounds: Record<Side, AcceptSide['rounds']> = { herald: [], baseline: [], floor: [] };
    const commands: Record<Side, { perRequest: number; webCpuUs: number; busiest: Record<string, number> }[]> = {
      herald: [],
      baseline: [],
      floor: [],
    };
    // The baseline and the floor route share one process; their rounds never overlap.
    const pidOf = (side: Side) => (side === 'herald' ? herald.web?.pid : baseline.pid);
    for (let round = 0; round < opts.rounds; round += 1) {
      for (const side of ORDERS[round % ORDERS.length]!) {
        let result: Awaited<ReturnType<typeof run>> | undefined;
        const counted = await countCommands(
          ctx.redis,
          async () => {
            result = await run(targets[side], opts.roundSeconds);
          },
          { idleMs: 1000, processCpu: () => processCpuMs(pidOf(side)) },
        );
        const r = result!;
        rounds[side].push({
          requestsPerSecond: r.requests.average,
          p50Ms: r.latency.p50,
          p99Ms: r.latency.p99,
          non2xx: r.non2xx,
          errors: r.errors,
        });
        const answered = Math.max(1, r['2xx']);
        commands[side].push({
          perRequest: counted.total / answered,
          webCpuUs: (counted.processCpuMs * 1000) / answered,
          busiest: top(counted.byCommand, answered),
        });
        ctx.log(
          `accept: ${side} round ${round + 1}: ${Math.round(r.requests.average)} req/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms, ` +
            `web ${commands[side].at(-1)!.webCpuUs.toFixed(0)} µs per request, ${r.non2xx} non-2xx, ${r.errors} errors`,
        );
      }
    }
    const side = (name: Side): AcceptSide => ({
      requestsPerSecond: median(rounds[name].map((r) => r.requestsPerSecond)),
      p50Ms: median(rounds[name].map((r) => r.p50Ms)),
      p99Ms: median(rounds[name].map((r) => r.p99Ms)),
      rounds: rounds[name],
      redisCommandsPerRequest: median(commands[name].map((c) => c.perRequest)),
      webCpuUsPerRequest: median(commands[name].map((c) => c.webCpuUs)),
      busiestCommands: commands[name].at(-1)!.busiest,
    });
    return {
      connections: opts.connections,
      roundSeconds: opts.roundSeconds,
      herald: side('herald'),
      baseline: side('baseline'),
      floor: side('floor'),
    };
  } finally {
    await baseline.stop();
    await herald.close();
    await deleteKeys(ctx.redis, baselinePrefix);
    await deleteKeys(ctx.redis, `${baselinePrefix}-floor`);
  }
}
