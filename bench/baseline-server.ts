/**
 * The accept baseline: a Fastify route that does one BullMQ `add` per request with the body
 * as job data, on the same kind of Redis connection and job options as the queues of Herald's
 * web process. What Herald's `POST /v1/notices` adds on top (validation, policy, the stored
 * notice and its log, its job) is what the ratio measures. Env: REDIS_URL, BENCH_PREFIX, PORT.
 *
 * `POST /v1/floor` is the least a notice's acceptance may cost under the design: Herald's creation
 * script with the arguments of the body's notice (prepared once, at start) under a new ID, then
 * its job, on the web process's own connections, with nothing else: no validation, rate
 * limit, policy or suppression read, plan or digest per request.
 */
import Fastify from 'fastify';
import { Queue } from 'bullmq';
import { connectRedis } from '../src/store/redis.js';
import { DEFAULT_JOB_OPTIONS } from '../queues/index.js';
import { systemClock } from '../src/clock.js';
import { composeWeb } from '../src/compose.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { acceptSettings, prepareNotice, type AcceptRequest, type PreparedNotice } from '../src/notice/accept.js';
import { newNoticeId } from '../src/notice/ids.js';

const redis = connectRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'web-queues', 'bench-baseline');
redis.on('error', () => undefined);
const queue = new Queue('accept', {
  connection: redis,
  prefix: `${process.env.BENCH_PREFIX ?? 'bench'}:{q}`,
  defaultJobOptions: DEFAULT_JOB_OPTIONS,
});
const app = Fastify({ logger: false, bodyLimit: 1_048_576 });

const config = loadConfig({ ...process.env, HERALD_PREFIX: `${process.env.BENCH_PREFIX ?? 'bench'}-floor` });
const web = composeWeb(config, { clock: systemClock, logger: createLogger('bench-floor', 'silent') });
let floor: PreparedNotice | undefined;

app.get('/healthz', async () => ({ status: 'ok' }));
app.post('/v1/baseline', async (request, reply) => {
  const job = await queue.add('accept', request.body as Record<string, unknown>);
  return reply.status(202).send({ id: job.id });
});

app.post('/v1/floor', async (request, reply) => {
  const { store, policies, scheduler } = web.deps;
  const now = Date.now();
  floor ??= prepareNotice(request.body as AcceptRequest, await policies.get((request.body as AcceptRequest).recipient.id), {
    now,
    shard: 0,
    emailSuppressed: false,
    settings: acceptSettings(config),
  });
  const id = newNoticeId(store.newShard(), now);
  await store.create({ ...floor.input, id, createdAt: now, due: now });
  await scheduler.accepted([{ noticeId: id, emailAt: now, deadline: now + 3_600_000 }]);
  return reply.status(202).send({ id });
});

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
process.on('SIGTERM', () => {
  void app
    .close()
    .then(() => queue.close())
    .then(() => web.close())
    .then(() => redis.quit())
    .finally(() => process.exit(0));
});
