/**
 * The lifecycle baseline: a BullMQ worker process of no-op jobs, with the connection and
 * concurrency Herald's worker uses per queue. Env: REDIS_URL, BENCH_PREFIX, BENCH_QUEUE,
 * HERALD_WORKER_CONCURRENCY.
 */
import { Worker } from 'bullmq';
import { connectRedis } from '../src/store/redis.js';

const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'worker', 'bench-raw-worker');
redis.on('error', () => undefined);
const worker = new Worker(process.env.BENCH_QUEUE ?? 'noop', async () => undefined, {
  connection: redis,
  prefix: `${process.env.BENCH_PREFIX ?? 'bench'}:{q}`,
  concurrency: Number(process.env.HERALD_WORKER_CONCURRENCY ?? 20),
});
worker.on('error', () => undefined);
process.on('SIGTERM', () => {
  void worker
    .close()
    .then(() => redis.quit())
    .finally(() => process.exit(0));
});
