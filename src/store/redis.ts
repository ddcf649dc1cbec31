import { Redis, type RedisOptions } from 'ioredis';
import { withoutCredentials, type RedisTarget } from '../config.js';

/**
 * The kinds of connection Herald opens. Workers wait for Redis to come back
 * (`maxRetriesPerRequest: null`, as BullMQ requires); the web side fails fast so that a request
 * answers 503 at once instead of hanging while Redis is down. `worker-steps` is a worker's
 * connection for its own steps (not BullMQ's): it waits like a worker's and, like the web's,
 * pipelines automatically — the commands of concurrent steps issued in one tick go out in one
 * write instead of one each.
 */
export function connectRedis(target: RedisTarget | string, role: 'web' | 'worker' | 'worker-steps', name: string): Redis {
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
  if (typeof target === 'string') return new Redis(target, options);
  if (target.clusterNodes) throw new Error('REDIS_CLUSTER_NODES: Redis Cluster connections are not built in');
  if (target.sentinels) {
    // The URL's user, password, database and TLS apply to the master Sentinel names.
    const node = new URL(target.url);
    return new Redis({
      ...options,
      sentinels: target.sentinels.map((s) => ({ host: s.host, port: s.port })),
      name: target.sentinelMaster,
      sentinelPassword: target.sentinelPassword,
      username: node.username ? decodeURIComponent(node.username) : undefined,
      password: node.password ? decodeURIComponent(node.password) : undefined,
      db: Number(node.pathname.slice(1) || 0),
      ...(node.protocol === 'rediss:' ? { tls: {}, enableTLSForSentinelMode: true } : {}),
      // After a failover the connection asks the sentinels for the master again: Redis drops every
      // client when its master crashes or is demoted, and the connection checks the role of the
      // server it reaches. (ioredis's `failoverDetector` is left off: a +switch-master arriving
      // while the connection is reconnecting ends it for good.) A write that a demoted master
      // refuses reconnects and is sent again.
      reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 2 : false),
    });
  }
  return new Redis(target.url, options);
}

/** Where a target points, without credentials, as logs and the doctor name it. */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.sentinels)
    return `master ${target.sentinelMaster} of sentinels ${target.sentinels.map((s) => `${s.host}:${s.port}`).join(',')}`;
  if (target.clusterNodes) return `cluster ${target.clusterNodes.map((s) => `${s.host}:${s.port}`).join(',')}`;
  return withoutCredentials(target.url);
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
