/**
 * Herald as the benchmark runs it: web and worker processes (compiled, as the Procfile runs
 * them) under a key prefix of their own, against the in-process sandbox emulators.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import autocannon from 'autocannon';
import { systemClock } from '../src/clock.js';
import { openScheduling, openStores } from '../src/compose.js';
import { loadConfig, type Config } from '../src/config.js';
import type { NoticeStore } from '../src/store/notices.js';
import { closeQueues, PartitionedQueue, QUEUE_NAMES, type HeraldQueues } from '../queues/index.js';
import { freePort, httpReady, NodeProcess, processCpuMs, until } from './processes.js';
import { deleteKeys } from './redis-stats.js';
import type { BenchSandbox } from './sandbox.js';

export const API_KEY = 'bench-api-key-0123456789';

/** The queues that carry notice jobs (not the scheduled sweeps). */
export const NOTICE_QUEUES = [QUEUE_NAMES.emailSend, QUEUE_NAMES.emailPoll, QUEUE_NAMES.deadline, QUEUE_NAMES.smsSend, QUEUE_NAMES.smsPoll];

export interface BenchContext {
  redisUrl: string;
  /** The benchmark's own connection: readings, probes, pause/resume, clean-up. */
  redis: Redis;
  sandbox: BenchSandbox;
  /** Every prefix of this run starts with it; all are deleted at the end. */
  runPrefix: string;
  /** More environment for Herald's processes (a Redis Cluster's seeds and partitions). */
  env?: Record<string, string>;
  log(message: string): void;
}

/**
 * The environment of Herald's processes in the benchmark. The poll floor is 1 s so that plans
 * fit in a benchmark's minutes; the reconciler's grace is 10 minutes so that figures measure
 * the job path alone (with the default 10 s, a backlog longer than that is also driven by the
 * reconciler, which is the point of it in production but blurs a throughput figure); the API
 * rate limit and the providers' status-call limits stay on but out of reach (the emulators
 * have no quota to protect), so their Redis calls are counted but they do not set the pace.
 */
export function heraldEnv(ctx: BenchContext, prefix: string, archiveDir: string): Record<string, string> {
  return {
    REDIS_URL: ctx.redisUrl,
    HERALD_PREFIX: prefix,
    HERALD_API_KEYS: API_KEY,
    HERALD_PROVIDERS: 'sandbox',
    POSTMARK_API_URL: ctx.sandbox.url,
    TWILIO_API_URL: ctx.sandbox.url,
    HERALD_MIN_POLL_INTERVAL_MS: '1000',
    HERALD_MAX_CHECKS_PER_NOTICE: '40',
    HERALD_RECONCILE_GRACE_MS: '600000',
    HERALD_WORKER_CONCURRENCY: '20',
    HERALD_RATE_LIMIT_PER_MINUTE: '1000000000',
    HERALD_EMAIL_STATUS_PER_SECOND: '10000',
    HERALD_SMS_STATUS_PER_SECOND: '10000',
    HERALD_ARCHIVE_URL: pathToFileURL(archiveDir).href,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    ...ctx.env,
  };
}

/** One Herald deployment under its own prefix: a web process and `workers` worker processes. */
export class HeraldDeployment {
  readonly archiveDir = mkdtempSync(join(tmpdir(), 'herald-bench-archive-'));
  /** The configuration Herald's processes load from `env`; the benchmark reads through it too. */
  readonly config: Config;
  readonly store: NoticeStore;
  readonly queues: HeraldQueues;
  web: NodeProcess | undefined;
  workers: NodeProcess[] = [];
  url = '';

  constructor(
    private readonly ctx: BenchContext,
    readonly prefix: string,
    /** More environment for this deployment's processes only. */
    private readonly extraEnv: Record<string, string> = {},
  ) {
    this.config = loadConfig(this.env);
    this.store = openStores(ctx.redis, this.config).store;
    this.queues = openScheduling(ctx.redis, this.store, systemClock, this.config.queuePartitions).queues;
  }

  get env(): Record<string, string> {
    return { ...heraldEnv(this.ctx, this.prefix, this.archiveDir), ...this.extraEnv };
  }

  async startWeb(): Promise<void> {
    const port = await freePort();
    this.web = new NodeProcess('dist/src/server.js', { ...this.env, PORT: String(port) }).start();
    this.url = `http://127.0.0.1:${port}`;
    await httpReady(`${this.url}/readyz`, this.web);
  }

  /** Starts worker processes and resolves once each has registered on every notice queue. */
  async startWorkers(count: number): Promise<void> {
    for (let i = 0; i < count; i += 1) this.workers.push(new NodeProcess('dist/src/worker.js', this.env).start());
    const expected = this.workers.length;
    await until(
      async () => {
        const dead = this.workers.find((w) => !w.running);
        if (dead) throw new Error(`a worker exited at start:\n${dead.output}`);
        const counts = await Promise.all(NOTICE_QUEUES.flatMap((name) => this.queue(name).all.map((q) => q.getWorkersCount())));
        return counts.every((n) => n >= expected);
      },
      120_000,
      `${expected} worker processes to register`,
      100,
    );
  }

  /** A notice queue (every partition of it). */
  queue(name: string): PartitionedQueue {
    const queue = Object.values(this.queues).find((q): q is PartitionedQueue => q instanceof PartitionedQueue && q.name === name);
    if (!queue) throw new Error(`no notice queue ${name}`);
    return queue;
  }

  async pause(names: readonly string[] = NOTICE_QUEUES): Promise<void> {
    for (const name of names) await this.queue(name).pause();
  }

  async resume(names: readonly string[] = NOTICE_QUEUES): Promise<void> {
    for (const name of names) await this.queue(name).resume();
  }

  /** True when no notice job waits, runs, or is delayed. */
  async drained(): Promise<boolean> {
    const counts = await Promise.all(
      NOTICE_QUEUES.map((name) => this.queue(name).getJobCounts('wait', 'active', 'delayed', 'prioritized')),
    );
    return counts.every((c) => Object.values(c).every((n) => n === 0));
  }

  /** CPU time (ms) the web and worker processes have used so far. */
  processCpuMs(): number {
    return [this.web, ...this.workers].reduce((sum, p) => sum + processCpuMs(p?.pid), 0);
  }

  /** Notices not yet in a terminal state. */
  live(): Promise<number> {
    return this.store.liveCount();
  }

  /** Stops every process, deletes the prefix's keys and the archive directory. */
  async close(): Promise<void> {
    await Promise.all([this.web?.stop(), ...this.workers.map((w) => w.stop())]);
    await closeQueues(this.queues);
    await deleteKeys(this.ctx.redis, this.prefix);
    rmSync(this.archiveDir, { recursive: true, force: true });
  }
}

/** A notice request body; `deadline` (absolute) wins over `deadlineInSeconds`. */
export function noticeBody(opts: {
  email: string;
  phone?: string;
  deadlineInSeconds?: number;
  deadline?: number;
  policy?: { firstCheckAfterSeconds?: number; minCheckIntervalSeconds?: number };
}): Record<string, unknown> {
  return {
    recipient: { id: 'bench-player', email: opts.email, ...(opts.phone ? { phone: opts.phone } : {}) },
    category: 'terms_change',
    content: {
      subject: 'Terms update',
      text: 'Our terms change on Monday. Please read the new terms before you join the next event.',
      sms: 'Terms change Monday: see your email.',
    },
    ...(opts.deadline !== undefined
      ? { deadline: new Date(opts.deadline).toISOString() }
      : { deadlineInSeconds: opts.deadlineInSeconds ?? 600 }),
    ...(opts.policy ? { policy: opts.policy } : {}),
    metadata: { event: 'winter-cup' },
  };
}

/**
 * POSTs `count` notices with `connections` requests in flight, the i-th with `body(i)`. The
 * load comes from autocannon, as in the accept figure: a `fetch` loop costs this process (which
 * also answers for the emulators) several times more CPU per request. Any answer but 202 stops
 * the benchmark: a figure over failed requests would mean nothing.
 */
export async function createNotices(
  url: string,
  count: number,
  body: (i: number) => Record<string, unknown>,
  connections = 50,
): Promise<void> {
  let next = 0;
  const result = await autocannon({
    url,
    amount: count,
    connections,
    timeout: 30,
    requests: [
      {
        method: 'POST',
        path: '/v1/notices',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        setupRequest: (request) => ({ ...request, body: JSON.stringify(body(next++)) }),
      },
    ],
  });
  if (result['2xx'] !== count || result.non2xx > 0 || result.errors > 0) {
    throw new Error(`creating ${count} notices: ${result['2xx']} answered 2xx, ${result.non2xx} other answers, ${result.errors} errors`);
  }
}

/**
 * POSTs `notices` in one `POST /v1/notices/batch`. Any answer but 200 with every notice accepted
 * (202) stops the benchmark, as in createNotices.
 */
export async function createNoticeBatch(url: string, notices: readonly Record<string, unknown>[]): Promise<void> {
  const response = await fetch(`${url}/v1/notices/batch`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ notices }),
  });
  const text = await response.text();
  const refused =
    response.status === 200
      ? (JSON.parse(text) as { results: { status: number }[] }).results.filter((r) => r.status !== 202).length
      : notices.length;
  if (refused > 0)
    throw new Error(`a batch of ${notices.length} notices: HTTP ${response.status}, ${refused} not accepted: ${text.slice(0, 300)}`);
}
