import { Redis, type RedisOptions } from 'ioredis';

/**
 * The kinds of connection Herald opens. Workers wait for Redis to come back
 * (`maxRetriesPerRequest: null`, as BullMQ requires); the web side fails fast so that a request
 * answers 503 at once instead of hanging while Redis is down. `worker-steps` is a worker's
 * connection for its own steps (not BullMQ's): it waits like a worker's and, like the web's,
 * pipelines automatically — the commands of concurrent steps issued in one tick go out in one
 * write instead of one each.
 */
export function connectRedis(url: string, role: 'web' | 'worker' | 'worker-steps', name: string): Redis {
  const options: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true, connectionName: name }
      : role === 'worker-steps'
        ? { maxRetriesPerRequest: null, enableReadyCheck: true, enableAutoPipelining: true, connectionName: name }
        : {
            maxRetriesPerRequest: 1,
            enableOfflineQueue: false,
            connectTimeout: 1000,
            commandTimeout: 1000,
            enableAutoPipelining: true,
            connectionName: name,
            retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
          };
  return new Redis(url, options);
}

/** Resolves once the connection is ready, or rejects after `timeoutMs`. */
export async function waitReady(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis not ready after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      redis.off('ready', onReady);
    };
    redis.on('ready', onReady);
  });
}

/** Redis's memory in use and its `maxmemory` (0: no limit), in bytes. */
export async function memoryUse(redis: Redis): Promise<{ used: number; max: number }> {
  const memory = await redis.info('memory');
  return {
    used: Number(/^used_memory:(\d+)/m.exec(memory)?.[1] ?? 0),
    max: Number(/^maxmemory:(\d+)/m.exec(memory)?.[1] ?? 0),
  };
}
