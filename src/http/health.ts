import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../app.js';
import { readinessWarnings } from '../retention/backlog.js';
import { errorBody } from './errors.js';

/**
 * `/healthz` (the process answers) and `/readyz` (Redis answers within a second, on both of the
 * process's connections). A ready answer carries `warnings` when the decision-log archive falls
 * behind or Redis nears `maxmemory`: the service still works, but an operator must act before
 * Redis fills up.
 */
export async function healthRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get('/healthz', { schema: { tags: ['operations'], summary: 'The process answers' } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { tags: ['operations'], summary: 'Redis answers (503 otherwise)' } }, async (request, reply) => {
    try {
      for (const redis of [deps.redis, deps.queueRedis]) {
        if (redis.status !== 'ready') throw new Error(`redis is ${redis.status}`);
      }
      await Promise.all([deps.redis.ping(), deps.queueRedis.ping()]);
    } catch (error) {
      return reply.status(503).send(errorBody('unavailable', `Not ready: ${(error as Error).message}`));
    }
    try {
      const { warnings } = await readinessWarnings(deps.redis, deps.store.keys, deps.clock.now(), deps.config.mirror);
      return warnings.length > 0 ? { status: 'ready', warnings } : { status: 'ready' };
    } catch (error) {
      request.log.warn({ err: error }, 'readiness: the log mirror backlog could not be read');
      return { status: 'ready' };
    }
  });
}
