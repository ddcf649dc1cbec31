/**
 * `npm run bench`: measures Herald against baselines measured in the same run, prints one
 * table and writes bench/results.json and, after a full run, the last-run section of
 * docs/BENCHMARKS.md. It starts what it needs (the sandbox emulators with no
 * added latency, in this process; web, worker and baseline processes) on the Redis at
 * REDIS_URL under a key prefix of its own, and deletes those keys at the end. It asserts
 * nothing: figures are reported, targets marked met or missed. For a quick look, BENCH_SCALE
 * (default 1) scales the item counts of the throughput and cost runs and BENCH_PENDING (default
 * 10000) sets the number of pending notices; BENCH_PENDING_WORKERS (default 1) their workers;
 * BENCH_ONLY (a comma-separated list of accept, batch, lifecycle, cost, pending, cluster, webhooks, events) runs only those parts.
 * `batch` sets `POST /v1/notices/batch` against single requests; `webhooks` counts provider calls per
 * notice with the providers' webhooks on and off; `events` delivers events to callers to a local listener.
 * `cluster` starts redis-servers of its own: one node and a 3-master Redis Cluster, on ports in
 * BENCH_REDIS_PORTS (`<first>-<last>`) when set. BENCH_PIN=1 runs the cost part with the Redis at
 * REDIS_URL (a local redis-server) on a core of its own (bench/pin.ts).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { planChecks } from '../src/notice/planner.js';
import { measureAccept } from './accept.js';
import { measureBatch } from './batch.js';
import { clusterScale } from './cluster.js';
import { noticeCost, rawJobCost } from './cost.js';
import { floorCost } from './floor.js';
import { PIN, withRedisPinned } from './pin.js';
import type { BenchContext } from './herald.js';
import { measureEvents } from './events.js';
import { deliveredThroughput, fallbackThroughput, rawThroughput } from './lifecycle.js';
import { heraldPending, rawPending, STEADY_LEAD_IN_MS, STEADY_WINDOW_MS, type PendingRun } from './pending.js';
import { deleteKeys } from './redis-stats.js';
import { ratioOf, table, type Row } from './report.js';
import { startBenchSandbox } from './sandbox.js';
import { webhookCalls } from './webhooks.js';
import { profileLines } from './slowlog.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const scale = Number(process.env.BENCH_SCALE ?? 1);
if (!(scale > 0)) throw new Error(`BENCH_SCALE="${process.env.BENCH_SCALE}" must be a positive number`);
const n = (count: number) => Math.max(100, Math.round(count * scale));
const DEFAULT_PENDING = 10_000;
const PENDING = Number(process.env.BENCH_PENDING ?? DEFAULT_PENDING);
/** The committed record of the last full run: its section between the markers is rewritten. */
const RESULTS_FILE = 'docs/BENCHMARKS.md';
const PENDING_WORKERS = Number(process.env.BENCH_PENDING_WORKERS ?? 1);
/** Notices per request of the batch figure, and its connections (each holds a batch in flight). */
const BATCH_SIZE = 500;
const BATCH_CONNECTIONS = 4;
/** The steady load's share of the rate Herald cleared the burst at. */
const STEADY_SHARE = 0.6;
const PARTS = ['accept', 'batch', 'lifecycle', 'cost', 'pending', 'cluster', 'webhooks', 'events'] as const;
const only = (process.env.BENCH_ONLY ?? PARTS.join(',')).split(',').map((part) => part.trim());
const unknownParts = only.filter((part) => !(PARTS as readonly string[]).includes(part));
if (unknownParts.length > 0)
  throw new Error(`BENCH_ONLY names unknown parts (${unknownParts.join(', ')}); the parts are ${PARTS.join(', ')}`);
const runs = (part: (typeof PARTS)[number]) => only.includes(part);

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
// Every deployment's stores on this connection watch its reconnects (src/store/replicas.ts), a listener each.
redis.setMaxListeners(0);
const sandbox = await startBenchSandbox();
const runPrefix = `hb${randomBytes(2).toString('hex')}`;
const started = Date.now();
const loadAtStart = loadavg();
const ctx: BenchContext = {
  redisUrl,
  redis,
  sandbox,
  runPrefix,
  log: (message) => console.error(`[bench ${((Date.now() - started) / 1000).toFixed(0)}s] ${message}`),
};

const cleanUp = async () => {
  await deleteKeys(redis, `${runPrefix}*`).catch(() => undefined);
};
process.once('SIGINT', () => {
  void cleanUp().finally(() => process.exit(130));
});

try {
  ctx.log(`prefix ${runPrefix}, Redis ${redisUrl}, scale ${scale}`);
  const accept = runs('accept') ? await measureAccept(ctx, { connections: 50, roundSeconds: 6, rounds: 3 }) : undefined;
  const batch = runs('batch')
    ? await measureBatch(ctx, {
        batchSize: BATCH_SIZE,
        singleConnections: 50,
        batchConnections: BATCH_CONNECTIONS,
        roundSeconds: 6,
        rounds: 3,
      })
    : undefined;

  const lifecycle = runs('lifecycle')
    ? {
        raw1: await rawThroughput(ctx, 1, n(20_000)),
        delivered1: await deliveredThroughput(ctx, 1, n(3_000)),
        fallback1: await fallbackThroughput(ctx, 1, n(2_000)),
        raw2: await rawThroughput(ctx, 2, n(20_000)),
        delivered2: await deliveredThroughput(ctx, 2, n(3_000)),
        fallback2: await fallbackThroughput(ctx, 2, n(2_000)),
      }
    : undefined;
  for (const [name, run] of Object.entries(lifecycle ?? {}))
    ctx.log(`lifecycle ${name}: ${run.perSecond.toFixed(0)}/s over ${run.items} in ${run.seconds.toFixed(1)} s`);

  // Other clients of a shared Redis, and other work on the machine, can only add to the counts
  // and CPU times: of two runs, the one that cost Redis less CPU is the closer one.
  const lower = async <
    T extends { redisCommandsPerItem: number; redisRoundTripsPerItem: number; redisCpuUsPerItem: number; processCpuUsPerItem: number },
  >(
    run: () => Promise<T>,
  ): Promise<T & { repeats: { commands: number; roundTrips: number; redisCpuUs: number; processCpuUs: number }[] }> => {
    const runs = [await run(), await run()];
    const best = runs.reduce((a, b) => (b.redisCpuUsPerItem < a.redisCpuUsPerItem ? b : a));
    const round = (x: number) => Math.round(x * 10) / 10;
    return {
      ...best,
      repeats: runs.map((r) => ({
        commands: round(r.redisCommandsPerItem),
        roundTrips: round(r.redisRoundTripsPerItem),
        redisCpuUs: round(r.redisCpuUsPerItem),
        processCpuUs: round(r.processCpuUsPerItem),
      })),
    };
  };
  const costRuns = async () => ({
    delivered: await lower(() => noticeCost(ctx, 'delivered', n(1_000))),
    fallback: await lower(() => noticeCost(ctx, 'fallback', n(1_000))),
    raw: await lower(() => rawJobCost(ctx, n(2_000))),
    // The same notices at the floor of the design (bench/floor.ts): what end to end is measured against.
    floorDelivered: await lower(() => floorCost(ctx, 'delivered', n(1_000))),
    floorFallback: await lower(() => floorCost(ctx, 'fallback', n(1_000))),
  });
  // BENCH_PIN=1: Redis on a core of its own during the cost part (bench/pin.ts).
  const cost = runs('cost') ? await (PIN ? withRedisPinned(redis, costRuns) : costRuns()) : undefined;
  for (const [name, run] of Object.entries(cost ?? {})) {
    ctx.log(`cost ${name}: ${JSON.stringify(run.repeats)} per item (idle ${run.idleCommandsPerSecond.toFixed(0)} commands/s subtracted)`);
    ctx.log(`cost ${name}: busiest ${JSON.stringify(run.busiestCommands)}`);
    if (run.profile) ctx.log(`cost ${name}: SLOWLOG profile (lower-CPU run), ${profileLines(run.profile, run.items).join('\n')}`);
    if (run.memory) {
      ctx.log(`cost ${name}: memory per finished notice, kept hot: ${JSON.stringify(run.memory.hot.byKind)}`);
      ctx.log(`cost ${name}: memory per finished notice, retired: ${JSON.stringify(run.memory.retired.byKind)}`);
    }
  }

  const pending = runs('pending')
    ? {
        herald: await heraldPending(ctx, PENDING, PENDING_WORKERS),
        raw: await rawPending(ctx, PENDING, PENDING_WORKERS),
      }
    : undefined;
  // A steady load at 60 % of the rate Herald cleared the burst at, both sides on that schedule:
  // the precision where Herald keeps up (the burst's clearing rate is what it keeps up with).
  const steadyRate = pending ? STEADY_SHARE * pending.herald.clearingPerSecond : 0;
  const steadyItems = Math.max(10, Math.round((steadyRate * STEADY_WINDOW_MS) / 1000));
  const steadyPending = pending
    ? {
        herald: await heraldPending(ctx, steadyItems, PENDING_WORKERS, STEADY_WINDOW_MS, STEADY_LEAD_IN_MS),
        raw: await rawPending(ctx, steadyItems, PENDING_WORKERS, STEADY_WINDOW_MS, STEADY_LEAD_IN_MS),
      }
    : undefined;
  if (pending)
    ctx.log(`pending: the burst cleared at ${pending.herald.clearingPerSecond.toFixed(0)}/s; steady load ${steadyRate.toFixed(0)}/s`);

  const scaleOut = runs('cluster') ? await clusterScale(ctx, n(2_000)) : undefined;

  // The same notices read by polling alone, then with the providers' webhooks pushed to the web.
  const webhooks = runs('webhooks')
    ? {
        deliveredOff: await webhookCalls(ctx, 'delivered', false, n(300)),
        deliveredOn: await webhookCalls(ctx, 'delivered', true, n(300)),
        fallbackOff: await webhookCalls(ctx, 'fallback', false, n(300)),
        fallbackOn: await webhookCalls(ctx, 'fallback', true, n(300)),
      }
    : undefined;
  for (const [name, run] of Object.entries(webhooks ?? {})) {
    ctx.log(
      `webhooks ${name}: provider calls per notice ${JSON.stringify(run.providerCallsPerItem)}, webhook requests ${run.webhookRequestsPerItem}, checks saved ${run.checksSavedPerItem}`,
    );
  }

  const events = runs('events')
    ? await measureEvents(ctx, { events: n(3_000), steadyShare: STEADY_SHARE, windowMs: STEADY_WINDOW_MS, leadInMs: STEADY_LEAD_IN_MS })
    : undefined;
  if (events) {
    for (const side of ['herald', 'raw'] as const) {
      const { burst, steady } = events[side];
      ctx.log(
        `events ${side}: burst ${burst.perSecond.toFixed(0)}/s, ${burst.redisCommandsPerEvent.toFixed(1)} commands, ${burst.duplicates} duplicates, busiest ${JSON.stringify(burst.busiestCommands)}; ` +
          `steady ${steady.perSecond.toFixed(0)}/s over ${steady.windowSeconds} s (${steady.keptUp ? 'kept up' : 'fell behind'}), lag ${JSON.stringify(steady.lag)}, drained ${steady.drainMs} ms after the load`,
      );
      if (steady.split) {
        const part = (d: { p50: number; p99: number }) => `p50 ${d.p50} ms, p99 ${d.p99} ms`;
        ctx.log(
          `events ${side}: lag of ${steady.split.jobs} kept delivery jobs: entry to queued ${part(steady.split.queued)}; queued to started ${part(steady.split.started)}; started to arrival ${part(steady.split.arrived)}`,
        );
      }
    }
  }

  // What the plans of the cost runs ask of the providers: the floor a notice cannot go under.
  const plan = planChecks(0, 8_000, undefined, { minPollIntervalMs: 1_000, maxChecks: 40 });
  const emailChecks = plan.ok ? plan.checks.length : Number.NaN;
  const plannedDelivered = 2;
  const plannedFallback = 1 + emailChecks + 2;

  const rows: Row[] = [];
  if (accept) {
    rows.push(
      {
        figure: 'Accept throughput, 50 connections',
        herald: accept.herald.requestsPerSecond,
        baseline: accept.baseline.requestsPerSecond,
        baselineIs: 'route with one BullMQ add',
        unit: 'req/s',
        target: '≥ 0.5×',
        met: accept.herald.requestsPerSecond / accept.baseline.requestsPerSecond >= 0.5,
      },
      { figure: 'Accept latency p50', herald: accept.herald.p50Ms, baseline: accept.baseline.p50Ms, baselineIs: 'same', unit: 'ms' },
      {
        figure: 'Accept latency p99',
        herald: accept.herald.p99Ms,
        baseline: accept.baseline.p99Ms,
        baselineIs: 'same',
        unit: 'ms',
        target: '≤ 15 ms',
        met: accept.herald.p99Ms <= 15,
      },
      {
        figure: 'Accept throughput, floor route',
        herald: accept.floor.requestsPerSecond,
        baseline: accept.baseline.requestsPerSecond,
        baselineIs: 'route with one BullMQ add',
        unit: 'req/s',
      },
      {
        figure: 'Accept latency p99, floor route',
        herald: accept.floor.p99Ms,
        baseline: accept.baseline.p99Ms,
        baselineIs: 'same',
        unit: 'ms',
      },
      {
        figure: 'Web CPU per accepted request',
        herald: accept.herald.webCpuUsPerRequest,
        baseline: accept.baseline.webCpuUsPerRequest,
        baselineIs: 'same',
        unit: 'µs',
      },
      {
        figure: 'Web CPU per accepted request, floor route',
        herald: accept.floor.webCpuUsPerRequest,
        baseline: accept.baseline.webCpuUsPerRequest,
        baselineIs: 'same',
        unit: 'µs',
      },
      {
        figure: 'Redis commands per accepted request',
        herald: accept.herald.redisCommandsPerRequest,
        baseline: accept.baseline.redisCommandsPerRequest,
        baselineIs: 'same',
        unit: '',
      },
    );
  }
  if (batch) {
    rows.push(
      {
        figure: `Batch accept, ${BATCH_SIZE} notices per request, ${BATCH_CONNECTIONS} connections`,
        herald: batch.batch.noticesPerSecond,
        baseline: batch.single.noticesPerSecond,
        baselineIs: 'single requests, 50 connections',
        unit: 'notices/s',
        target: '≥ 1.5×',
        met: batch.batch.noticesPerSecond >= 1.5 * batch.single.noticesPerSecond,
      },
      {
        figure: `Web CPU per notice, batch of ${BATCH_SIZE}`,
        herald: batch.batch.webCpuUsPerNotice,
        baseline: batch.single.webCpuUsPerNotice,
        baselineIs: 'single request',
        unit: 'µs',
        target: '≤ ⅓×',
        met: batch.batch.webCpuUsPerNotice <= batch.single.webCpuUsPerNotice / 3,
      },
      {
        figure: `Redis CPU per notice, batch of ${BATCH_SIZE}`,
        herald: batch.batch.redisCpuUsPerNotice,
        baseline: batch.single.redisCpuUsPerNotice,
        baselineIs: 'single request',
        unit: 'µs',
      },
      {
        figure: `Redis commands per notice, batch of ${BATCH_SIZE}`,
        herald: batch.batch.redisCommandsPerNotice,
        baseline: batch.single.redisCommandsPerNotice,
        baselineIs: 'single request',
        unit: '',
      },
      {
        figure: `Batch latency p99, a request of ${BATCH_SIZE}`,
        herald: batch.batch.p99Ms,
        baseline: batch.single.p99Ms,
        baselineIs: 'a single request',
        unit: 'ms',
      },
    );
  }
  if (lifecycle) {
    rows.push(
      {
        figure: 'Delivered path, 1 worker',
        herald: lifecycle.delivered1.perSecond,
        baseline: lifecycle.raw1.perSecond,
        baselineIs: 'raw no-op jobs/s, 1 worker',
        unit: '/s',
        target: '≥ 0.25×',
        met: lifecycle.delivered1.perSecond / lifecycle.raw1.perSecond >= 0.25,
      },
      {
        figure: 'Fallback path, 1 worker',
        herald: lifecycle.fallback1.perSecond,
        baseline: lifecycle.raw1.perSecond,
        baselineIs: 'raw no-op jobs/s, 1 worker',
        unit: '/s',
      },
      {
        figure: 'Delivered path, 2 workers',
        herald: lifecycle.delivered2.perSecond,
        baseline: lifecycle.raw2.perSecond,
        baselineIs: 'raw no-op jobs/s, 2 workers',
        unit: '/s',
        target: '≥ 0.25×',
        met: lifecycle.delivered2.perSecond / lifecycle.raw2.perSecond >= 0.25,
      },
      {
        figure: 'Fallback path, 2 workers',
        herald: lifecycle.fallback2.perSecond,
        baseline: lifecycle.raw2.perSecond,
        baselineIs: 'raw no-op jobs/s, 2 workers',
        unit: '/s',
      },
      {
        figure: 'Scale-out 1→2 workers, delivered',
        herald: lifecycle.delivered2.perSecond / lifecycle.delivered1.perSecond,
        baseline: lifecycle.raw2.perSecond / lifecycle.raw1.perSecond,
        baselineIs: 'raw 1→2',
        unit: '×',
      },
      {
        figure: 'Scale-out 1→2 workers, fallback',
        herald: lifecycle.fallback2.perSecond / lifecycle.fallback1.perSecond,
        baseline: lifecycle.raw2.perSecond / lifecycle.raw1.perSecond,
        baselineIs: 'raw 1→2',
        unit: '×',
      },
    );
  }
  if (cost) {
    rows.push(
      {
        figure: 'Redis CPU per delivered notice',
        herald: cost.delivered.redisCpuUsPerItem,
        baseline: cost.raw.redisCpuUsPerItem,
        baselineIs: 'raw job, add + run',
        unit: 'µs',
        target: '≤ 5×',
        met: cost.delivered.redisCpuUsPerItem <= 5 * cost.raw.redisCpuUsPerItem,
      },
      {
        figure: 'Redis CPU per fallback notice',
        herald: cost.fallback.redisCpuUsPerItem,
        baseline: cost.raw.redisCpuUsPerItem,
        baselineIs: 'raw job, add + run',
        unit: 'µs',
        target: '≤ 12×',
        met: cost.fallback.redisCpuUsPerItem <= 12 * cost.raw.redisCpuUsPerItem,
      },
      {
        figure: "Redis CPU per delivered notice, the design's floor",
        herald: cost.floorDelivered.redisCpuUsPerItem,
        baseline: cost.raw.redisCpuUsPerItem,
        baselineIs: 'raw job, add + run',
        unit: 'µs',
      },
      {
        figure: "Redis CPU per fallback notice, the design's floor",
        herald: cost.floorFallback.redisCpuUsPerItem,
        baseline: cost.raw.redisCpuUsPerItem,
        baselineIs: 'raw job, add + run',
        unit: 'µs',
      },
      {
        figure: 'Redis CPU per delivered notice, end to end',
        herald: cost.delivered.redisCpuUsPerItem,
        baseline: cost.floorDelivered.redisCpuUsPerItem,
        baselineIs: "the design's floor, same notices",
        unit: 'µs',
        target: '≤ 1.3×',
        met: cost.delivered.redisCpuUsPerItem <= 1.3 * cost.floorDelivered.redisCpuUsPerItem,
      },
      {
        figure: 'Redis CPU per fallback notice, end to end',
        herald: cost.fallback.redisCpuUsPerItem,
        baseline: cost.floorFallback.redisCpuUsPerItem,
        baselineIs: "the design's floor, same notices",
        unit: 'µs',
        target: '≤ 1.3×',
        met: cost.fallback.redisCpuUsPerItem <= 1.3 * cost.floorFallback.redisCpuUsPerItem,
      },
      {
        figure: 'Web + worker CPU per delivered notice',
        herald: cost.delivered.processCpuUsPerItem,
        baseline: cost.raw.processCpuUsPerItem,
        baselineIs: 'raw job: adder + worker',
        unit: 'µs',
        target: '≤ 25×',
        met: cost.delivered.processCpuUsPerItem <= 25 * cost.raw.processCpuUsPerItem,
      },
      {
        figure: 'Web + worker CPU per fallback notice',
        herald: cost.fallback.processCpuUsPerItem,
        baseline: cost.raw.processCpuUsPerItem,
        baselineIs: 'raw job: adder + worker',
        unit: 'µs',
        target: '≤ 50×',
        met: cost.fallback.processCpuUsPerItem <= 50 * cost.raw.processCpuUsPerItem,
      },
      {
        figure: 'Redis commands per delivered notice',
        herald: cost.delivered.redisCommandsPerItem,
        baseline: cost.raw.redisCommandsPerItem,
        baselineIs: 'raw job, add + run',
        unit: '',
      },
      {
        figure: 'Redis commands per fallback notice',
        herald: cost.fallback.redisCommandsPerItem,
        baseline: cost.raw.redisCommandsPerItem,
        baselineIs: 'raw job, add + run',
        unit: '',
      },
      {
        figure: "Redis commands per delivered notice, the design's floor",
        herald: cost.floorDelivered.redisCommandsPerItem,
        baseline: cost.raw.redisCommandsPerItem,
        baselineIs: 'raw job, add + run',
        unit: '',
      },
      {
        figure: "Redis commands per fallback notice, the design's floor",
        herald: cost.floorFallback.redisCommandsPerItem,
        baseline: cost.raw.redisCommandsPerItem,
        baselineIs: 'raw job, add + run',
        unit: '',
      },
      {
        figure: 'Redis round trips per delivered notice',
        herald: cost.delivered.redisRoundTripsPerItem,
        baseline: cost.floorDelivered.redisRoundTripsPerItem,
        baselineIs: "the design's floor, same notices",
        unit: '',
      },
      {
        figure: 'Redis round trips per fallback notice',
        herald: cost.fallback.redisRoundTripsPerItem,
        baseline: cost.floorFallback.redisRoundTripsPerItem,
        baselineIs: "the design's floor, same notices",
        unit: '',
      },
      {
        figure: 'Redis memory of a finished notice, retired',
        herald: cost.delivered.memory!.retired.noticeBytes,
        baseline: cost.delivered.memory!.hot.noticeBytes,
        baselineIs: 'the same, before retirement',
        unit: 'B',
      },
      {
        figure: 'Provider calls per delivered notice',
        herald: cost.delivered.providerCallsPerItem?.total ?? Number.NaN,
        baseline: plannedDelivered,
        baselineIs: 'planned: send + 1 check',
        unit: '',
      },
      {
        figure: 'Provider calls per fallback notice',
        herald: cost.fallback.providerCallsPerItem?.total ?? Number.NaN,
        baseline: plannedFallback,
        baselineIs: `planned: send + ${emailChecks} checks + SMS + 1 check`,
        unit: '',
      },
    );
  }
  if (pending && steadyPending) {
    rows.push(
      {
        figure: 'Redis memory per pending notice, log archived',
        herald: pending.herald.bytesPerItem,
        baseline: pending.raw.bytesPerItem,
        baselineIs: 'raw delayed job, body as data',
        unit: 'B',
        target: '≤ 3000 B',
        met: pending.herald.bytesPerItem <= 3000,
      },
      {
        figure: 'Redis memory per pending notice, log still hot',
        herald: pending.herald.hot?.bytesPerItem ?? 0,
        baseline: pending.raw.bytesPerItem,
        baselineIs: 'raw delayed job, body as data',
        unit: 'B',
      },
      {
        figure: `Burst clearing rate (${pending.herald.items} deadlines in ${pending.herald.windowSeconds} s)`,
        herald: pending.herald.clearingPerSecond,
        baseline: pending.raw.clearingPerSecond,
        baselineIs: 'raw delayed jobs started per second',
        unit: '/s',
      },
      ...latenessRows(pending, 'burst'),
      ...latenessRows(steadyPending, 'steady'),
    );
  }

  if (scaleOut) {
    rows.push(
      {
        figure: 'Redis CPU per notice, busiest of 3 cluster masters',
        herald: scaleOut.busiestCpuMsPerNotice,
        baseline: scaleOut.singleCpuMsPerNotice,
        baselineIs: 'one Redis node, same notices',
        unit: 'ms',
        target: '≤ 0.45×',
        met: scaleOut.busiestCpuMsPerNotice <= 0.45 * scaleOut.singleCpuMsPerNotice,
      },
      {
        figure: 'Redis CPU per raw BullMQ job, busiest of 3 cluster masters',
        herald: scaleOut.raw.busiestCpuMsPerJob,
        baseline: scaleOut.raw.singleCpuMsPerJob,
        baselineIs: 'one Redis node, same jobs',
        unit: 'ms',
      },
    );
  }

  if (webhooks) {
    rows.push(
      {
        figure: 'Provider calls per delivered notice, webhooks on',
        herald: webhooks.deliveredOn.providerCallsPerItem.total ?? Number.NaN,
        baseline: webhooks.deliveredOff.providerCallsPerItem.total ?? Number.NaN,
        baselineIs: 'webhooks off: polling only',
        unit: '',
      },
      {
        figure: 'Email status reads per delivered notice, webhooks on',
        herald: webhooks.deliveredOn.providerCallsPerItem['postmark.details'] ?? 0,
        baseline: webhooks.deliveredOff.providerCallsPerItem['postmark.details'] ?? 0,
        baselineIs: 'webhooks off: polling only',
        unit: '',
      },
      // The email of a fallback notice is never delivered, so no webhook saves its checks; how many of those
      // a loaded machine skips (a late check skips those it overtook) varies from run to run. The SMS reads are the point.
      {
        figure: 'SMS status reads per fallback notice, webhooks on',
        herald: webhooks.fallbackOn.providerCallsPerItem['twilio.fetch'] ?? 0,
        baseline: webhooks.fallbackOff.providerCallsPerItem['twilio.fetch'] ?? 0,
        baselineIs: 'webhooks off: polling only',
        unit: '',
      },
      {
        figure: 'Provider calls per fallback notice, webhooks on',
        herald: webhooks.fallbackOn.providerCallsPerItem.total ?? Number.NaN,
        baseline: webhooks.fallbackOff.providerCallsPerItem.total ?? Number.NaN,
        baselineIs: 'webhooks off: polling only',
        unit: '',
      },
    );
  }

  if (events) {
    const { herald, raw } = events;
    const steady = `(steady: ${Math.round(events.steadyRate)}/s over ${herald.steady.windowSeconds} s${herald.steady.keptUp ? '' : ', fell behind'})`;
    rows.push(
      {
        figure: `Event deliveries, 1 worker (burst of ${herald.burst.events})`,
        herald: herald.burst.perSecond,
        baseline: raw.burst.perSecond,
        baselineIs: 'BullMQ jobs that POST the body, 1 worker',
        unit: '/s',
      },
      {
        figure: 'Redis CPU per event delivered',
        herald: herald.burst.redisCpuUsPerEvent,
        baseline: raw.burst.redisCpuUsPerEvent,
        baselineIs: 'raw job: add + run + POST',
        unit: 'µs',
      },
      {
        figure: 'Worker CPU per event delivered',
        herald: herald.burst.processCpuUsPerEvent,
        baseline: raw.burst.processCpuUsPerEvent,
        baselineIs: 'raw job: adder + worker',
        unit: 'µs',
      },
      {
        figure: `Event deliveries ${steady}`,
        herald: herald.steady.perSecond,
        baseline: raw.steady.perSecond,
        baselineIs: 'raw jobs at the same rate',
        unit: '/s',
      },
      {
        figure: `Event lag p50 ${steady}`,
        herald: herald.steady.lag.p50,
        baseline: raw.steady.lag.p50,
        baselineIs: 'raw job: add to arrival',
        unit: 'ms',
      },
      {
        figure: `Event lag p99 ${steady}`,
        herald: herald.steady.lag.p99,
        baseline: raw.steady.lag.p99,
        baselineIs: 'raw job: add to arrival',
        unit: 'ms',
      },
    );
  }

  // Other work on the machine shows in every figure: the load averages say how much there was.
  const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
  const report = [
    `Herald benchmark — ${new Date().toISOString()}, ${cpus().length} cores, Node ${process.version}, Redis ${await redisVersion(redis)}, load average ${load(loadAtStart)} at the start, ${load(loadavg())} at the end` +
      (PIN ? "; the cost part with Redis on core 0 and the benchmark's processes on the others (BENCH_PIN=1)" : ''),
    table(rows),
  ];
  if (pending && steadyPending) {
    report.push(
      `Memory per pending notice by kind of key (MEMORY USAGE, B; this Redis's hash-max-listpack-value is ${await listpackValue(redis)}, ` +
        `128 or more keeps BullMQ's job hashes compact, see herald doctor): ${JSON.stringify(pending.herald.keyBytesByKind)}; ` +
        `with the log still hot: ${JSON.stringify(pending.herald.hot?.keyBytesByKind ?? {})}`,
      `Deadline lateness max: Herald ${pending.herald.lateness.max} ms, raw ${pending.raw.lateness.max} ms (${steadyPending.herald.lateness.max} ms and ${steadyPending.raw.lateness.max} ms under the steady load); ` +
        `memory by MEMORY USAGE of own keys: Herald ${pending.herald.keyBytesPerItem.toFixed(0)} B, raw ${pending.raw.keyBytesPerItem.toFixed(0)} B per item.`,
    );
  }
  console.log(`\n${report.join('\n\n')}`);

  const results = {
    date: new Date().toISOString(),
    commit: gitCommit(),
    machine: {
      cores: cpus().length,
      cpu: cpus()[0]?.model,
      node: process.version,
      redis: await redisVersion(redis),
      loadAtStart,
      loadAtEnd: loadavg(),
    },
    settings: {
      scale,
      parts: only,
      redisPinned: PIN,
      redisUrl,
      pendingWorkers: PENDING_WORKERS,
      workerConcurrency: 20,
      minPollIntervalMs: 1000,
      reconcileGraceMs: 600_000,
    },
    rows: rows.map((r) => ({ ...r, ratio: ratioOf(r) })),
    accept,
    batch,
    lifecycle,
    cost,
    pending,
    steadyPending,
    cluster: scaleOut,
    webhooks,
    events,
    durationSeconds: (Date.now() - started) / 1000,
  };
  writeFileSync(`${ROOT}bench/results.json`, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\nwrote bench/results.json (${results.durationSeconds.toFixed(0)} s)`);
  // Only a full run is a record: a scaled or partial one would pass smaller figures off as it.
  const full = only.length === PARTS.length && scale === 1 && PENDING === DEFAULT_PENDING && PENDING_WORKERS === 1;
  if (full) {
    writeLastRun(
      `${ROOT}${RESULTS_FILE}`,
      `${report.join('\n\n')}\n\nCommit ${results.commit ?? 'unknown'}; the whole run is in \`bench/results.json\`.`,
    );
    console.log(`wrote the last-run section of ${RESULTS_FILE}`);
  } else console.log(`not a full run (BENCH_ONLY, BENCH_SCALE, BENCH_PENDING or BENCH_PENDING_WORKERS set): ${RESULTS_FILE} left as it is`);
} finally {
  await cleanUp();
  await sandbox.close();
  await redis.quit();
}

/** Replaces the last-run section of the results file (between its markers) with `section`. */
function writeLastRun(file: string, section: string): void {
  const [start, end] = ['<!-- bench:last-run:start -->', '<!-- bench:last-run:end -->'];
  const text = readFileSync(file, 'utf8');
  const from = text.indexOf(start);
  const to = text.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${file} has no ${start} … ${end} section to write the run into`);
  writeFileSync(file, `${text.slice(0, from + start.length)}\n${section}\n${text.slice(to)}`);
}

function gitCommit(): string | null {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

async function redisVersion(client: Redis): Promise<string | undefined> {
  return /^redis_version:(\S+)/m.exec(await client.info('server'))?.[1];
}

/** The deadline-precision rows of one pending run: p50, p99 (target ≤ 500 ms) and the minimum (never early). */
function latenessRows(run: { herald: PendingRun; raw: PendingRun }, load: 'burst' | 'steady'): Row[] {
  const of = `(${load}: ${run.herald.items} in ${run.herald.windowSeconds} s)`;
  const row = (name: 'p50' | 'p99' | 'min', extra: Partial<Row> = {}): Row => ({
    figure: `Deadline lateness ${name} ${of}`,
    herald: run.herald.lateness[name],
    baseline: run.raw.lateness[name],
    baselineIs: name === 'min' ? 'raw' : 'raw delayed-job start',
    unit: 'ms',
    ...extra,
  });
  // Under the burst the lateness is the backlog's, reported with the clearing rate; under the
  // steady load Herald keeps up, and its lateness is set against BullMQ's own.
  const p99Target: Partial<Row> =
    load === 'steady' ? { target: '≤ 2× raw', met: run.herald.lateness.p99 <= 2 * Math.max(1, run.raw.lateness.p99) } : {};
  return [row('p50'), row('p99', p99Target), row('min', { target: '≥ 0 (never early)', met: run.herald.negative === 0 })];
}

/** The Redis setting that decides whether a BullMQ job hash is a listpack or a hash table. */
async function listpackValue(redis: Redis): Promise<string> {
  const reply = (await redis.config('GET', 'hash-max-listpack-value').catch(() => [])) as string[];
  return reply[1] ?? 'unknown';
}
