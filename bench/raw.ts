/** The raw BullMQ baseline: no-op jobs (or jobs that POST their body) on one queue, worked by raw-worker processes. */
import { Queue, type DefaultJobOptions, type JobsOptions } from 'bullmq';
import { DEFAULT_JOB_OPTIONS } from '../queues/index.js';
import type { BenchContext } from './herald.js';
import { NodeProcess, processCpuMs, until } from './processes.js';
import { deleteKeys } from './redis-stats.js';

export class RawDeployment {
  readonly queue: Queue;
  workers: NodeProcess[] = [];

  constructor(
    private readonly ctx: BenchContext,
    readonly prefix: string,
    /** The queue's job options: Herald's notice queues' unless given. */
    defaultJobOptions: DefaultJobOptions = DEFAULT_JOB_OPTIONS,
  ) {
    this.queue = new Queue('noop', { connection: ctx.redis, prefix: `${prefix}:{q}`, defaultJobOptions });
  }

  /** Starts worker processes (`env`: more of their environment, BENCH_POST_URL say) and waits for them to register. */
  async startWorkers(count: number, extraEnv: Record<string, string> = {}): Promise<void> {
    const env = {
      REDIS_URL: this.ctx.redisUrl,
      BENCH_PREFIX: this.prefix,
      BENCH_QUEUE: 'noop',
      HERALD_WORKER_CONCURRENCY: '20',
      ...extraEnv,
    };
    for (let i = 0; i < count; i += 1) this.workers.push(new NodeProcess('dist/bench/raw-worker.js', env).start());
    await until(async () => (await this.queue.getWorkersCount()) >= count, 30_000, `${count} raw workers to register`, 100);
  }

  /** Adds jobs in batches (while paused, for a throughput run). */
  async addBulk(
    count: number,
    data: (i: number) => Record<string, unknown>,
    opts: (i: number) => JobsOptions = () => ({}),
  ): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1000) {
      const batch = Array.from({ length: Math.min(1000, count - i) }, (_, k) => ({ name: 'noop', data: data(i + k), opts: opts(i + k) }));
      for (const job of await this.queue.addBulk(batch)) ids.push(job.id!);
    }
    return ids;
  }

  /** CPU time (ms) the worker processes have used so far. */
  processCpuMs(): number {
    return this.workers.reduce((sum, p) => sum + processCpuMs(p.pid), 0);
  }

  async drained(): Promise<boolean> {
    const counts = await this.queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
    return Object.values(counts).every((n) => n === 0);
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
    await this.queue.close();
    await deleteKeys(this.ctx.redis, this.prefix);
  }
}
