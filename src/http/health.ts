import type { FastifyInstance } from 'fastify';
import type { AppDeps } from './deps.js';
import { readinessWarnings, type ReadinessWarning } from '../retention/backlog.js';
import { errorBody } from './errors.js';

/** How long one reading of the archive backlog and Redis memory serves `/readyz` (some seventy commands). */
export const READINESS_WARNINGS_CACHE_MS = 10_000;
/** How long one pair of PINGs serves `/readyz`: an outage is still seen within a second. */
export const READINESS_PING_CACHE_MS = 500;

/**
 * `/healthz` (the process answers) and `/readyz` (Redis answers within a second, on both of the
 * process's connections). A ready answer carries `warnings` when the decision-log archive falls
 * behind or Redis nears `maxmemory`: the service still works, but an operator must act before
 * Redis fills up. `/readyz` needs no credentials, so what it costs is bounded: concurrent
 * requests share one reading, the PINGs are reused for half a second and the warnings for ten.
 */
export async function healthRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const pinged = cached(READINESS_PING_CACHE_MS, async () => {
    await Promise.all([deps.redis.ping(), deps.queueRedis.ping()]);
  });
  // A connection's own state costs nothing to read: every check looks at it.
  const ping = async () => {
    for (const redis of [deps.redis, deps.queueRedis]) {
      if (redis.status !== 'ready') throw new Error(`redis is ${redis.status}`);
    }
    await pinged();
  };
  const warnings = cached(READINESS_WARNINGS_CACHE_MS, async (): Promise<ReadinessWarning[]> => {
    try {
      return (await readinessWarnings(deps.redis, deps.store.keys, deps.clock.now(), deps.config.mirror)).warnings;
    } catch (error) {
      deps.logger.warn({ err: error }, 'readiness: the log mirror backlog could not be read');
      return [];
    }
  });
  app.get('/healthz', { schema: { tags: ['operations'], summary: 'The process answers' } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { tags: ['operations'], summary: 'Redis answers (503 otherwise)' } }, async (_request, reply) => {
    try {
      await ping();
    } catch (error) {
      return reply.status(503).send(errorBody('unavailable', `Not ready: ${(error as Error).message}`));
    }
    const found = await warnings();
    return found.length > 0 ? { status: 'ready', warnings: found } : { status: 'ready' };
  });
}

/**
 * `read` run at most once per `forMs` of the process's monotonic clock (the injected clock is the
 * notices' time, which a test may hold still), its promise shared by every caller meanwhile; a
 * failure is not kept, so the next caller reads again.
 */
function cached<T>(forMs: number, read: () => Promise<T>): () => Promise<T> {
  const now = () => performance.now();
  let held: { at: number; value: Promise<T> } | undefined;
  return () => {
    if (held && now() - held.at < forMs) return held.value;
    const value = read();
    const entry = { at: now(), value };
    held = entry;
    value.catch(() => {
      if (held === entry) held = undefined;
    });
    return value;
  };
}
