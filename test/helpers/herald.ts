import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { buildApp, type AppDeps } from '../../src/app.js';
import type { Archive } from '../../src/archive/archive.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { composeWeb } from '../../src/compose.js';
import type { Config } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import type { NoticeStore } from '../../src/store/notices.js';
import { waitReady } from '../../src/store/redis.js';
import type { HeraldQueues } from '../../queues/index.js';
import { deleteKeys, plainRedis, TEST_API_KEY } from './env.js';

export interface WebUnderTest {
  app: FastifyInstance;
  store: NoticeStore;
  queues: HeraldQueues;
  /** The app's connection; a Cluster client under HERALD_TEST_TOPOLOGY=cluster (commands on keys alike). */
  redis: Redis;
  /** What the app runs on, as the web process composes it. */
  deps: AppDeps;
  /** Sends a request with the test API key unless headers say otherwise. */
  call(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

/**
 * The web app of a test (in-process, `inject`), on real Redis and real queues under
 * `config.prefix`; on `archive` when given (the test closes it), else on the one `config` names.
 */
export async function startWebUnderTest(
  config: Config,
  clock: Clock = systemClock,
  logger: Logger = createLogger('herald-test', 'silent'),
  archive?: Archive,
): Promise<WebUnderTest> {
  const parts = composeWeb(config, { clock, logger, connectionName: 'herald-test-web', archive });
  const { deps } = parts;
  const { redis, store, queues } = deps;
  await Promise.all([waitReady(redis), waitReady(deps.queueRedis)]);
  const app = await buildApp(deps);
  return {
    app,
    store,
    queues,
    redis: redis as Redis,
    deps,
    call: (method, url, body, headers = {}) =>
      app.inject({
        method,
        url,
        payload: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
        headers: {
          authorization: `Bearer ${TEST_API_KEY}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
      }),
    close: async () => {
      await app.close();
      await parts.close();
    },
  };
}

/** Removes every key a test run made under its prefix. */
export async function cleanUp(prefix: string): Promise<void> {
  const redis = plainRedis();
  await deleteKeys(redis, prefix);
  await redis.quit();
}

/** A valid notice request; tests override what they examine. */
export function noticeBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    recipient: { id: 'player-42', email: 'never@example.com', phone: '+12025550100', region: 'JP' },
    category: 'terms_change',
    content: { subject: 'Terms update', text: 'The terms change on Monday.', sms: 'Terms change Monday.' },
    deadlineInSeconds: 600,
    metadata: { event: 'winter-cup' },
    ...overrides,
  };
}
