import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../app.js';
import { errorBody } from './errors.js';

/** `/healthz` (the process answers) and `/readyz` (Redis answers within a second). */
export async function healthRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get('/healthz', { schema: { tags: ['operations'], summary: 'The process answers' } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { tags: ['operations'], summary: 'Redis answers (503 otherwise)' } }, async (_request, reply) => {
    try {
      if (deps.redis.status !== 'ready') throw new Error(`redis is ${deps.redis.status}`);
      await deps.redis.ping();
      return { status: 'ready' };
    } catch (error) {
      return reply.status(503).send(errorBody('unavailable', `Not ready: ${(error as Error).message}`));
    }
  });
}
