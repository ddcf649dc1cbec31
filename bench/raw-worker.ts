/**
 * The lifecycle baseline: a BullMQ worker process of no-op jobs, with the connection and
 * concurrency Herald's worker uses per queue. Env: REDIS_URL, BENCH_PREFIX, BENCH_QUEUE,
 * HERALD_WORKER_CONCURRENCY; or, for the cluster scale figure, BENCH_PREFIXES (comma-separated:
 * a worker on each prefix's queue) and REDIS_CLUSTER_NODES (`host:port,…`: a Cluster client).
 * With BENCH_POST_URL, the event-delivery baseline: each job POSTs its data's `body` there (as
 * Herald's delivery does, over node:http's default keep-alive agent, unsigned) and finishes
 * once the answer is in.
 */
import { request } from 'node:http';
import { Worker, type Job } from 'bullmq';
import { loadConfig } from '../src/config.js';
import { connectRedis } from '../src/store/redis.js';

// REDIS_URL and REDIS_CLUSTER_NODES read as Herald reads them.
const redis = connectRedis(loadConfig(process.env).redis, 'worker', 'bench-raw-worker');
redis.on('error', () => undefined);
const prefixes = (process.env.BENCH_PREFIXES ?? `${process.env.BENCH_PREFIX ?? 'bench'}:{q}`).split(',');
const postUrl = process.env.BENCH_POST_URL;

/** POSTs the job's body; throws on anything but a 2xx, so that BullMQ records the failure. */
function post(job: Job<{ body: string }>): Promise<void> {
  const body = job.data.body;
  return new Promise((resolve, reject) => {
    const req = request(
      postUrl!,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': String(job.id), 'content-length': String(Buffer.byteLength(body)) },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const workers = prefixes.map((prefix) => {
  const worker = new Worker(process.env.BENCH_QUEUE ?? 'noop', postUrl ? post : async () => undefined, {
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
