/**
 * The accept baseline: a Fastify route that does one BullMQ `add` per request with the body
 * as job data, on the same kind of Redis connection and job options as the queues of Herald's
 * web process. What Herald's `POST /v1/notices` adds on top (validation, policy, the stored
 * notice and its log, two jobs) is what the ratio measures. Env: REDIS_URL, BENCH_PREFIX, PORT.
 */
import Fastify from 'fastify';
import { Queue } from 'bullmq';
import { connectRedis } from '../src/store/redis.js';
import { DEFAULT_JOB_OPTIONS } from '../queues/index.js';

const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'web-queues', 'bench-baseline');
redis.on('error', () => undefined);
const queue = new Queue('accept', {
  connection: redis,
  prefix: `${process.env.BENCH_PREFIX ?? 'bench'}:{q}`,
  defaultJobOptions: DEFAULT_JOB_OPTIONS,
});
const app = Fastify({ logger: false, bodyLimit: 1_048_576 });

app.get('/healthz', async () => ({ status: 'ok' }));
app.post('/v1/baseline', async (request, reply) => {
  const job = await queue.add('accept', request.body as Record<string, unknown>);
  return reply.status(202).send({ id: job.id });
});

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.on('SIGTERM', () => {
  void app
    .close()
    .then(() => queue.close())
    .then(() => redis.quit())
    .finally(() => process.exit(0));
});
