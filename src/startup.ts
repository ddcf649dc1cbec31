import { ConfigError, type RedisTarget } from './config.js';
import { connectRedis, describeRedisTarget } from './store/redis.js';

type Env = Record<string, string | undefined>;

/**
 * `npm start` on a machine with no Redis: one line that says how to get one, instead of a
 * process that retries for ever and logs every refused connection. Web and worker started on
 * their own keep waiting for Redis instead (a restarting server must not stop a deployment).
 */
export async function requireRedis(target: RedisTarget, timeoutMs = 4000): Promise<void> {
  const probe = connectRedis(target, 'web', 'herald-start-probe');
  let timer: NodeJS.Timeout | undefined;
  try {
    // The first refused connection answers: a Redis that is there accepts at once.
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs / 1000} s`)), timeoutMs);
      probe.once('ready', () => resolve());
      probe.once('error', reject);
    });
  } catch (error) {
    throw new StartupError(
      `herald: Redis does not answer at ${describeRedisTarget(target)} (${(error as Error).message}). ` +
        'Start one (`redis-server`, or `docker compose up -d redis`), or set REDIS_URL to yours.',
    );
  } finally {
    clearTimeout(timer);
    probe.on('error', () => {});
    probe.disconnect();
  }
}

/** A start-up failure the operator can fix, said in one line. */
export class StartupError extends Error {}

/** The variables that choose each listener's port, in the order a clash is reported. */
const PORT_VARIABLES: readonly [variable: string, fallback: number | undefined][] = [
  ['HERALD_SANDBOX_PORT', 4010],
  ['HERALD_METRICS_PORT', undefined],
  ['HERALD_WORKER_METRICS_PORT', undefined],
  ['PORT', 3000],
];

/**
 * What to print when a process cannot start: a listener's port in use names the variable that
 * chose it, a configuration or start-up problem is its own message, anything else its stack.
 */
export function startupMessage(error: unknown, env: Env): unknown {
  if (error instanceof ConfigError || error instanceof StartupError) return error.message;
  const e = error as { code?: unknown; port?: unknown; address?: unknown } | undefined;
  if (e?.code === 'EADDRINUSE' && typeof e.port === 'number') {
    const variable = PORT_VARIABLES.find(([name, fallback]) => Number(env[name]?.trim() || fallback) === e.port)?.[0] ?? 'PORT';
    return `herald: port ${e.port}${typeof e.address === 'string' ? ` on ${e.address}` : ''} is in use; set ${variable} to a free port.`;
  }
  return error;
}
