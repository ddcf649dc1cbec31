import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { Scheduler } from './notice/outcome.js';
import type { NoticeStore } from './store/notices.js';
import type { PolicyStore } from './store/policies.js';
import { apiKeyVerifier } from './http/auth.js';
import { errorBody, errorHandler } from './http/errors.js';
import { healthRoutes } from './http/health.js';
import { noticeRoutes } from './http/notices.js';
import { recipientRoutes } from './http/recipients.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** A stable ID of the API key the request authenticated with. */
    apiKeyId: string;
  }
}

export interface AppDeps {
  config: Config;
  redis: Redis;
  store: NoticeStore;
  policies: PolicyStore;
  scheduler: Scheduler;
  clock: Clock;
  logger: Logger;
}

/** Builds the web app (no listen): tests call `app.inject()`, server.ts listens. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: deps.config.bodyLimit,
    // Reject what the schema does not allow instead of silently dropping or coercing it.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true } },
    requestIdHeader: 'x-request-id',
    genReqId: () => `req_${Math.random().toString(36).slice(2, 12)}`,
  });
  app.setErrorHandler(errorHandler(() => deps.redis.status === 'ready'));
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send(errorBody('not_found', `No route ${request.method} ${request.url.split('?')[0]}.`)),
  );

  await app.register(async (scope) => healthRoutes(scope, deps));
  const verify = apiKeyVerifier(deps.config.apiKeys);
  await app.register(async (v1) => {
    v1.decorateRequest('apiKeyId', '');
    v1.addHook('onRequest', async (request) => {
      request.apiKeyId = verify(request);
    });
    await noticeRoutes(v1, deps);
    await recipientRoutes(v1, deps);
  });
  return app;
}
