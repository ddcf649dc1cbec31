/**
 * The scale figure of Redis Cluster: Redis CPU per notice of the busiest master of a
 * 3-master cluster (notice queues in 3 partitions), against one Redis node's in the same run, the
 * same notices through the same web and worker processes. Both are `redis-server`s of the
 * benchmark's own (no persistence, nothing else on them), so that their CPU time (`INFO cpu`,
 * the server's own user + system time) is Herald's alone. Where each server's time went is logged
 * too: `INFO commandstats` by command, and with `BENCH_SLOWLOG=1` a SLOWLOG profile by script and
 * kind of hash tag (shard, queue partition, `{q}`, ...), whose logging inflates the CPU figures.
 * `BENCH_REDIS_PORTS=<first>-<last>` keeps these servers' ports in that range (a cluster node's
 * bus listens 10000 above its port).
 *
 * Beside it, the same reading for raw BullMQ jobs on the same servers: what a cluster of these
 * servers on this machine gives BullMQ itself, the reference for Herald's figure.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { Queue } from 'bullmq';
import { DEFAULT_JOB_OPTIONS } from '../queues/index.js';
import { slotOf } from '../src/store/slots.js';
import { createNotices, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { freePort, NodeProcess, sleep, until } from './processes.js';
import { finishSlowlog, profileLines, scriptNames, startSlowlog } from './slowlog.js';

const run = promisify(execFile);

/** One `redis-server` of the benchmark's own. */
class BenchRedis {
  readonly dir = mkdtempSync(join(tmpdir(), 'herald-bench-redis-'));
  private child: ChildProcess | undefined;

  constructor(readonly port: number) {}

  async start(cluster: boolean): Promise<void> {
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      this.dir,
      '--logfile',
      '',
    ];
    if (cluster) args.push('--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf');
    this.child = spawn('redis-server', args, { stdio: 'ignore' });
    await until(async () => (await this.ask((r) => r.ping()).catch(() => '')) === 'PONG', 15_000, `redis-server on ${this.port}`, 50);
  }

  /** A connection of the caller's own, to close. */
  async connect(): Promise<Redis> {
    const redis = new Redis(this.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
    redis.on('error', () => undefined);
    await redis.connect();
    return redis;
  }

  async ask<T>(command: (redis: Redis) => Promise<T>): Promise<T> {
    const redis = new Redis(this.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      return await command(redis);
    } finally {
      redis.disconnect();
    }
  }

  /** Microseconds spent so far by command (`INFO commandstats`; a script's commands inside its EVALSHA's). */
  async commandUs(): Promise<Map<string, number>> {
    const info = await this.ask((r) => r.info('commandstats'));
    return new Map([...info.matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)].map((m) => [m[1]!, Number(m[2])]));
  }

  /** The server's CPU time so far (user + system, its own thread), in ms. */
  async cpuMs(): Promise<number> {
    const info = await this.ask((r) => r.info('cpu'));
    const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
    return (field('used_cpu_user') + field('used_cpu_sys')) * 1000;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface ClusterScaleRun {
  notices: number;
  /** Redis CPU ms per notice of the one node. */
  singleCpuMsPerNotice: number;
  /** Redis CPU ms per notice of each master, and of the busiest. */
  mastersCpuMsPerNotice: number[];
  busiestCpuMsPerNotice: number;
  /** Idle CPU ms per second subtracted (workers waiting, sweeps), single node and each master. */
  idle: { single: number; masters: number[] };
  partitions: number;
  /** Raw BullMQ jobs on the same servers: Redis CPU ms per job of the one node, each master and the busiest. */
  raw: { jobs: number; singleCpuMsPerJob: number; mastersCpuMsPerJob: number[]; busiestCpuMsPerJob: number };
}

/**
 * The same notices (half delivered, half falling back to SMS) through a web and a worker process
 * on one node, then on a 3-master cluster with HERALD_QUEUE_PARTITIONS=3.
 */
export async function clusterScale(ctx: BenchContext, notices: number): Promise<ClusterScaleRun> {
  const single = await onTopology(ctx, notices, 'single');
  const cluster = await onTopology(ctx, notices, 'cluster');
  return {
    notices,
    singleCpuMsPerNotice: single.perNotice[0]!,
    mastersCpuMsPerNotice: cluster.perNotice,
    busiestCpuMsPerNotice: Math.max(...cluster.perNotice),
    idle: { single: single.idlePerSecond[0]!, masters: cluster.idlePerSecond },
    partitions: PARTITIONS,
    raw: {
      jobs: RAW_JOBS,
      singleCpuMsPerJob: single.rawPerJob[0]!,
      mastersCpuMsPerJob: cluster.rawPerJob,
      busiestCpuMsPerJob: Math.max(...cluster.rawPerJob),
    },
  };
}

/** The raw jobs: added one by one at RAW_PER_SECOND (about the rate of the notices' own jobs), worked by one process. */
const RAW_JOBS = 6_000;
const RAW_PER_SECOND = 500;
/** The slot ranges of `redis-cli --cluster create` over three masters: a raw queue's hash tag lies in each. */
const EVEN_SPLIT = [0, 5461, 10923, 16384];

const PARTITIONS = 3;
const MASTERS = 3;
const PROFILE = process.env.BENCH_SLOWLOG === '1';
const PORT_RANGE = /^(\d+)-(\d+)$/.exec(process.env.BENCH_REDIS_PORTS ?? '');

/** The servers' ports: free ones in BENCH_REDIS_PORTS when set, else any free port low enough for a cluster bus. */
async function serverPorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  if (PORT_RANGE) {
    for (let port = Number(PORT_RANGE[1]); port <= Number(PORT_RANGE[2]) && ports.length < count; port += 1)
      if ((await portFree(port)) && (await portFree(port + 10_000))) ports.push(port);
    if (ports.length < count) throw new Error(`BENCH_REDIS_PORTS=${process.env.BENCH_REDIS_PORTS} has fewer than ${count} free ports`);
    return ports;
  }
  while (ports.length < count) {
    const port = await freePort();
    if (port < 55_000 && !ports.includes(port)) ports.push(port);
  }
  return ports;
}

/** Whether nothing listens on the port (a connection to it is refused). */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

async function onTopology(
  ctx: BenchContext,
  notices: number,
  topology: 'single' | 'cluster',
): Promise<{ perNotice: number[]; idlePerSecond: number[]; rawPerJob: number[] }> {
  const servers: BenchRedis[] = [];
  let client: Redis | Cluster | undefined;
  let herald: HeraldDeployment | undefined;
  try {
    const count = topology === 'single' ? 1 : MASTERS;
    for (const port of await serverPorts(count)) {
      const server = new BenchRedis(port);
      servers.push(server);
      await server.start(topology === 'cluster');
    }
    let env: Record<string, string>;
    if (topology === 'cluster') {
      await run(
        'redis-cli',
        ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '0', '--cluster-yes'],
        {
          timeout: 60_000,
        },
      );
      await until(
        async () =>
          (await Promise.all(servers.map((s) => s.ask((r) => r.cluster('INFO'))))).every((info) =>
            String(info).includes('cluster_state:ok'),
          ),
        30_000,
        'the cluster to be ok',
        100,
      );
      const seeds = servers.map((s) => `127.0.0.1:${s.port}`).join(',');
      env = { REDIS_CLUSTER_NODES: seeds, HERALD_QUEUE_PARTITIONS: String(PARTITIONS) };
      client = new Cluster(
        servers.map((s) => ({ host: '127.0.0.1', port: s.port })),
        { redisOptions: { maxRetriesPerRequest: null } },
      );
    } else {
      env = process.env.XP3 ? { HERALD_QUEUE_PARTITIONS: '3' } : {};
      client = new Redis(servers[0]!.port, '127.0.0.1', { maxRetriesPerRequest: null });
    }
    const local: BenchContext = { ...ctx, redisUrl: `redis://127.0.0.1:${servers[0]!.port}`, redis: client as Redis, env };
    herald = new HeraldDeployment(local, `${ctx.runPrefix}-scale-${topology}`);
    await herald.startWeb();
    await herald.startWorkers(1);
    const cpu = () => Promise.all(servers.map((s) => s.cpuMs()));
    // The benchmark's progress probe, every 250 ms while the notices run and in the idle slices.
    const deployment = herald;
    const finished = async () => (await deployment.live()) === 0 && (await deployment.drained());
    const probing = async (ms: number) => {
      for (const end = Date.now() + ms; Date.now() < end;) {
        await finished();
        await sleep(250);
      }
    };
    // Idle: workers blocked on their queues, sweeps on their schedules, the probe; the quietest
    // of five one-second slices per server (other work on the machine only ever adds to it).
    await sleep(2000);
    const idlePerSecond = servers.map(() => Number.POSITIVE_INFINITY);
    for (let slice = 0; slice < 5; slice += 1) {
      const sliceFrom = await cpu();
      const sliceAt = Date.now();
      await probing(1000);
      const sliceTo = await cpu();
      const ms = Date.now() - sliceAt;
      sliceTo.forEach((to, i) => (idlePerSecond[i] = Math.min(idlePerSecond[i]!, ((to - sliceFrom[i]!) / ms) * 1000)));
    }

    const usFrom = await Promise.all(servers.map((s) => s.commandUs()));
    const slowlogs = PROFILE
      ? await Promise.all(servers.map((s) => s.connect().then(async (r) => ({ r, saved: await startSlowlog(r) }))))
      : [];
    const from = await cpu();
    const startedAt = Date.now();
    await createNotices(herald.url, notices, (i) => {
      return noticeBody({
        email: i % 2 === 0 ? 'delivered+0ms@example.com' : 'never@example.com',
        phone: '+12025550100',
        deadlineInSeconds: 8,
      });
    });
    await until(finished, 300_000, `every notice on ${topology} to finish`, 250);
    const to = await cpu();
    const seconds = (Date.now() - startedAt) / 1000;
    const perNotice = to.map((ms, i) => Math.max(0, ms - from[i]! - idlePerSecond[i]! * seconds) / notices);
    ctx.log(
      `cluster scale, ${topology}: Redis CPU ms per notice ${perNotice.map((x) => x.toFixed(3)).join(', ')} over ${seconds.toFixed(1)} s`,
    );
    const usTo = await Promise.all(servers.map((s) => s.commandUs()));
    usTo.forEach((after, i) => {
      const spent = [...after]
        .map(([command, us]) => [command, (us - (usFrom[i]!.get(command) ?? 0)) / notices] as const)
        .filter(([, us]) => us > 0);
      const busiest = spent.sort(([, a], [, b]) => b - a).slice(0, 8);
      ctx.log(
        `cluster scale, ${topology}, server ${i}: commandstats µs per notice ${busiest.map(([c, us]) => `${c} ${us.toFixed(1)}`).join(', ')}`,
      );
    });
    if (PROFILE) {
      const names = await scriptNames(ctx.redisUrl);
      for (const [i, { r, saved }] of slowlogs.entries()) {
        const profile = await finishSlowlog(r, names, saved, { byTag: true });
        r.disconnect();
        ctx.log(`cluster scale, ${topology}, server ${i}: SLOWLOG profile, ${profileLines(profile, notices, 30).join('\n')}`);
      }
    }
    await herald.close();
    herald = undefined;
    const rawPerJob = await rawJobs(ctx, servers, client, topology);
    ctx.log(`cluster scale, ${topology}: Redis CPU ms per raw BullMQ job ${rawPerJob.map((x) => x.toFixed(4)).join(', ')}`);
    return { perNotice, idlePerSecond, rawPerJob };
  } finally {
    await herald?.close().catch((error: unknown) => ctx.log(`closing the ${topology} deployment: ${String(error)}`));
    client?.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
  }
}

/**
 * Redis CPU ms per raw BullMQ job (added, then worked by a no-op processor) on each server: one
 * queue per master of the cluster (on one node, the same three queues), the jobs spread evenly
 * over them, the idle CPU of each server subtracted as for the notices.
 */
async function rawJobs(
  ctx: BenchContext,
  servers: BenchRedis[],
  client: Redis | Cluster,
  topology: 'single' | 'cluster',
): Promise<number[]> {
  const prefixes = EVEN_SPLIT.slice(0, -1).map((from, i) => {
    let k = 0;
    while (!(slotOf(`{r${k}}`) >= from && slotOf(`{r${k}}`) < EVEN_SPLIT[i + 1]!)) k += 1;
    return `${ctx.runPrefix}-raw-${topology}:{r${k}}`;
  });
  const queues = prefixes.map((prefix) => new Queue('noop', { connection: client, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS }));
  const worker = new NodeProcess('dist/bench/raw-worker.js', {
    REDIS_URL: `redis://127.0.0.1:${servers[0]!.port}`,
    BENCH_PREFIXES: prefixes.join(','),
    HERALD_WORKER_CONCURRENCY: '20',
    ...(topology === 'cluster' ? { REDIS_CLUSTER_NODES: servers.map((s) => `127.0.0.1:${s.port}`).join(',') } : {}),
  }).start();
  try {
    await until(
      async () => (await Promise.all(queues.map((q) => q.getWorkersCount()))).every((n) => n >= 1),
      30_000,
      'the raw worker',
      100,
    );
    const cpu = () => Promise.all(servers.map((s) => s.cpuMs()));
    const drained = async () =>
      (await Promise.all(queues.map((q) => q.getJobCounts('wait', 'active', 'delayed')))).every((c) =>
        Object.values(c).every((n) => n === 0),
      );
    await sleep(1000);
    const idleFrom = await cpu();
    const idleAt = Date.now();
    await sleep(2000);
    const idleTo = await cpu();
    const idlePerMs = idleTo.map((to, i) => (to - idleFrom[i]!) / (Date.now() - idleAt));
    const from = await cpu();
    const startedAt = Date.now();
    for (let i = 0; i < RAW_JOBS; i += 1) {
      // One add at a time, on schedule: the jobs arrive spread out, as the notices' do.
      const due = startedAt + (i * 1000) / RAW_PER_SECOND;
      if (due > Date.now()) await sleep(due - Date.now());
      await queues[i % queues.length]!.add('noop', {});
    }
    await until(drained, 120_000, `the raw jobs on ${topology} to finish`, 100);
    const to = await cpu();
    const ms = Date.now() - startedAt;
    return to.map((t, i) => Math.max(0, t - from[i]! - idlePerMs[i]! * ms) / RAW_JOBS);
  } finally {
    await worker.stop();
    await Promise.all(queues.map((q) => q.close()));
  }
}
