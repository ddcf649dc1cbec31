/**
 * Batch accept: notices accepted per second by `POST /v1/notices/batch` (500 notices a request)
 * against single `POST /v1/notices` requests, both under autocannon against one Herald web
 * process on the same Redis, no worker running; and what each notice costs the web process
 * (its CPU time, from /proc) and the Redis server (`INFO cpu`), net of their idle rates. Each
 * round sends a fixed number of notices, sized from the warm-up so that a round lasts about
 * `roundSeconds`, and ends once every request is answered: no notice is stored uncounted or
 * counted unstored. Rounds alternate which side goes first, and the median round counts.
 */
import autocannon from 'autocannon';
import { API_KEY, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { processCpuMs, sleep } from './processes.js';
import { countCommands, top } from './redis-stats.js';
import { median } from './stats.js';

export interface BatchRound {
  notices: number;
  seconds: number;
  noticesPerSecond: number;
  /** Per request (a single notice, or a batch). */
  p50Ms: number;
  p99Ms: number;
  webCpuUsPerNotice: number;
  redisCpuUsPerNotice: number;
  redisCommandsPerNotice: number;
}

export interface BatchSide {
  /** Notices per request. */
  size: number;
  connections: number;
  noticesPerSecond: number;
  webCpuUsPerNotice: number;
  redisCpuUsPerNotice: number;
  redisCommandsPerNotice: number;
  p50Ms: number;
  p99Ms: number;
  rounds: BatchRound[];
  busiestCommands: Record<string, number>;
}

export interface BatchResult {
  roundSeconds: number;
  single: BatchSide;
  batch: BatchSide;
}

type Side = 'single' | 'batch';
const ORDERS: Side[][] = [
  ['single', 'batch'],
  ['batch', 'single'],
];

export async function measureBatch(
  ctx: BenchContext,
  opts: { batchSize: number; singleConnections: number; batchConnections: number; roundSeconds: number; rounds: number },
): Promise<BatchResult> {
  const herald = new HeraldDeployment(ctx, `${ctx.runPrefix}-batch`, { HERALD_BATCH_MAX: String(Math.max(1000, opts.batchSize)) });
  try {
    await herald.startWeb();
    const web = herald.web!;
    // A far deadline: the notices only wait; the same notice on both sides.
    const notice = noticeBody({ email: 'delivered@example.com', phone: '+12025550100', deadlineInSeconds: 3600 });
    const headers = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
    const bodies: Record<Side, string> = {
      single: JSON.stringify(notice),
      batch: JSON.stringify({ notices: Array.from({ length: opts.batchSize }, () => notice) }),
    };
    const paths: Record<Side, string> = { single: '/v1/notices', batch: '/v1/notices/batch' };
    const size: Record<Side, number> = { single: 1, batch: opts.batchSize };
    const connections: Record<Side, number> = { single: opts.singleConnections, batch: opts.batchConnections };

    /**
     * One load of `side`, for `duration` seconds or `amount` requests: the notices the answers
     * accepted, and the seconds from the start to the last answer (autocannon itself returns at
     * its next sampling tick after that).
     */
    const load = async (side: Side, limit: { duration: number } | { amount: number }) => {
      let accepted = 0;
      let refused = 0;
      const started = Date.now();
      let last = started;
      const result = await autocannon({
        url: herald.url,
        connections: connections[side],
        timeout: 30,
        sampleInt: 100,
        ...limit,
        requests: [
          {
            method: 'POST',
            path: paths[side],
            headers,
            body: bodies[side],
            onResponse: (status, body) => {
              last = Date.now();
              if (side === 'single') {
                if (status === 202) accepted += 1;
                else refused += 1;
                return;
              }
              if (status !== 200) {
                refused += size.batch;
                return;
              }
              for (const item of (JSON.parse(body) as { results: { status: number }[] }).results) {
                if (item.status === 202) accepted += 1;
                else refused += 1;
              }
            },
          },
        ],
      });
      // A figure over refused notices would mean nothing.
      if (refused > 0 || result.errors > 0) {
        throw new Error(`batch: ${side} load: ${accepted} notices accepted, ${refused} refused, ${result.errors} request errors`);
      }
      return { result, accepted, seconds: (last - started) / 1000 };
    };

    ctx.log('batch: warming up');
    const warm: Record<Side, number> = { single: 0, batch: 0 };
    for (const side of ['single', 'batch'] as const) {
      const { accepted, seconds } = await load(side, { duration: 5 });
      warm[side] = accepted / seconds;
    }
    // autocannon returns at the end of its duration with requests still in flight (a batch's
    // several hundred ms of work each): the web finishes them before the first idle reading.
    await sleep(3000);
    // Requests per round: about roundSeconds at the warm-up's rate, at least a few per connection.
    const amount: Record<Side, number> = {
      single: Math.max(10 * opts.singleConnections, Math.round((warm.single * opts.roundSeconds) / size.single)),
      batch: Math.max(2 * opts.batchConnections, Math.round((warm.batch * opts.roundSeconds) / size.batch)),
    };
    ctx.log(
      `batch: warm-up ${Math.round(warm.single)} and ${Math.round(warm.batch)} notices/s; rounds of ${amount.single} single requests, ${amount.batch} batches`,
    );

    const rounds: Record<Side, BatchRound[]> = { single: [], batch: [] };
    const busiest: Record<Side, Record<string, number>> = { single: {}, batch: {} };
    for (let round = 0; round < opts.rounds; round += 1) {
      for (const side of ORDERS[round % ORDERS.length]!) {
        let outcome: Awaited<ReturnType<typeof load>> | undefined;
        const counted = await countCommands(
          ctx.redis,
          async () => {
            outcome = await load(side, { amount: amount[side] });
          },
          { idleMs: 1000, processCpu: () => processCpuMs(web.pid) },
        );
        const { result, accepted, seconds } = outcome!;
        const r: BatchRound = {
          notices: accepted,
          seconds,
          noticesPerSecond: accepted / seconds,
          p50Ms: result.latency.p50,
          p99Ms: result.latency.p99,
          webCpuUsPerNotice: (counted.processCpuMs * 1000) / accepted,
          redisCpuUsPerNotice: (counted.redisCpuMs * 1000) / accepted,
          redisCommandsPerNotice: counted.total / accepted,
        };
        rounds[side].push(r);
        busiest[side] = top(counted.byCommand, accepted);
        ctx.log(
          `batch: ${side} round ${round + 1}: ${Math.round(r.noticesPerSecond)} notices/s, per notice web ${r.webCpuUsPerNotice.toFixed(0)} µs, ` +
            `Redis ${r.redisCpuUsPerNotice.toFixed(0)} µs, ${r.redisCommandsPerNotice.toFixed(1)} commands; per request p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms`,
        );
      }
    }
    const summary = (side: Side): BatchSide => {
      const of = (pick: (r: BatchRound) => number) => median(rounds[side].map(pick));
      return {
        size: size[side],
        connections: connections[side],
        noticesPerSecond: of((r) => r.noticesPerSecond),
        webCpuUsPerNotice: of((r) => r.webCpuUsPerNotice),
        redisCpuUsPerNotice: of((r) => r.redisCpuUsPerNotice),
        redisCommandsPerNotice: of((r) => r.redisCommandsPerNotice),
        p50Ms: of((r) => r.p50Ms),
        p99Ms: of((r) => r.p99Ms),
        rounds: rounds[side],
        busiestCommands: busiest[side],
      };
    };
    return { roundSeconds: opts.roundSeconds, single: summary('single'), batch: summary('batch') };
  } finally {
    await herald.close();
  }
}
