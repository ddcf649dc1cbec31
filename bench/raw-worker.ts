/**
 * The lifecycle baseline: a BullMQ worker process of no-op jobs, with the connection and
 * concurrency Herald's worker uses per queue. Env: REDIS_URL, BENCH_PREFIX, BENCH_QUEUE,
 * HERALD_WORKER_CONCURRENCY; or, for the cluster scale figure, BENCH_PREFIXES (comma-separated:
 * a worker on each prefix's queue) and REDIS_CLUSTER_NODES (`host:port,…`: a Cluster client).
 */
import { Worker } from 'bullmq';
import { loadConfig } from '../src/config.js';
import { connectRedis } from '../src/store/redis.js';

// REDIS_URL and REDIS_CLUSTER_NODES read as Herald reads them.
const redis = connectRedis(loadConfig(process.env).redis, 'worker', 'bench-raw-worker');
redis.on('error', () => undefined);
const prefixes = (process.env.BENCH_PREFIXES ?? `${process.env.BENCH_PREFIX ?? 'bench'}:{q}`).split(',');
const workers = prefixes.map((prefix) => {
  const worker = new Worker(process.env.BENCH_QUEUE ?? 'noop', async () => undefined, {
    connection: redis,
    prefix,
    concurrency: Number(process.env.HERALD_WORKER_CONCURRENCY ?? 20),
  });
  worker.on('error', () => undefined);
  return worker;
});
process.on('SIGTERM', () => {
  void Promise.all(workers.map((worker) => worker.close()))
    .then(() => redis.quit())
    .finally(() => process.exit(0));
});
