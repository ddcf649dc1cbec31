import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { withoutCredentials, type HostPort, type RedisTarget } from '../config.js';
import { slotOf } from './slots.js';

/**
 * A connection to Herald's Redis: one node (plain or through Sentinel) or a Redis Cluster. Every
 * store takes this type; what differs on a Cluster (pipelines that span slots, SCAN on every
 * master, INFO per node) is handled by the helpers below.
 */
export type RedisClient = Redis | Cluster;

export type RedisRole = 'web' | 'web-queues' | 'worker' | 'worker-steps';

/**
 * The kinds of connection Herald opens. Workers wait for Redis to come back
 * (`maxRetriesPerRequest: null`, as BullMQ requires); the web side fails fast so that a request
 * answers 503 at once instead of hanging while Redis is down. `worker-steps` is a worker's
 * connection for its own steps (not BullMQ's): it waits like a worker's and, like the web's,
 * pipelines automatically — the commands of concurrent steps issued in one tick go out in one
 * write instead of one each. `web-queues` is the web's connection for BullMQ's queues: it fails
 * fast like the web's and does not pipeline automatically.
 *
 * BullMQ's scripts stay off the pipelining connections. ioredis copies every script defined on a
 * connection into each automatic pipeline it makes (one per tick), and BullMQ defines some fifty:
 * on the web's shared connection that copying was a tenth of the process's CPU per accepted
 * notice. A queue also defines its scripts when it first connects, and a command of a script
 * defined after that tick's pipeline was made is not in the pipeline: ioredis then answers the
 * pipeline's other commands never (an uncaught `results[i] is not iterable`).
 */
export function connectRedis(target: RedisTarget | string, role: RedisRole, name: string): RedisClient {
  // RESP2, as BullMQ's and Herald's scripts and reply parsing were written and tested for: ioredis
  // 6 would otherwise say HELLO 3. Every connection BullMQ duplicates from these keeps it.
  const common = { connectionName: name, protocol: 2 } as const;
  const options: RedisOptions =
    role === 'worker'
      ? { ...common, maxRetriesPerRequest: null, enableReadyCheck: true }
      : role === 'worker-steps'
        ? { ...common, maxRetriesPerRequest: null, enableReadyCheck: true, enableAutoPipelining: true }
        : {
            ...common,
            maxRetriesPerRequest: 1,
            enableOfflineQueue: false,
            connectTimeout: 1000,
            commandTimeout: 1000,
            enableAutoPipelining: role === 'web',
            retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
          };
  if (typeof target === 'string') return new Redis(target, options);
  const tls = tlsOptions(target);
  if (target.clusterNodes)
    return connectCluster(target.clusterNodes, target.url, { ...options, tls }, role === 'web' || role === 'web-queues');
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
      ...(tls ? { tls, enableTLSForSentinelMode: true } : {}),
      // After a failover the connection asks the sentinels for the master again: Redis drops every
      // client when its master crashes or is demoted, and the connection checks the role of the
      // server it reaches. (ioredis's `failoverDetector` is left off: a +switch-master arriving
      // while the connection is reconnecting ends it for good.) A write that a demoted master
      // refuses reconnects and is sent again.
      reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 2 : false),
    });
  }
  return new Redis(target.url, { ...options, tls });
}

/** A rediss:// target's options for node's TLS (the CA it names, whether to verify); undefined without TLS. */
function tlsOptions(target: RedisTarget): RedisOptions['tls'] {
  if (!target.url.startsWith('rediss:')) return undefined;
  return { ...(target.tls?.ca !== undefined ? { ca: target.tls.ca } : {}), rejectUnauthorized: target.tls?.rejectUnauthorized ?? true };
}

/** Where a target points, without credentials, as logs and the doctor name it. */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.sentinels)
    return `master ${target.sentinelMaster} of sentinels ${target.sentinels.map((s) => `${s.host}:${s.port}`).join(',')}`;
  if (target.clusterNodes) return `cluster ${target.clusterNodes.map((s) => `${s.host}:${s.port}`).join(',')}`;
  return withoutCredentials(target.url);
}

/**
 * A Cluster client over the seed nodes, with the role's options: the node-level ones (retries per
 * request, timeouts, connection name) apply to every node's connection; the offline queue, the
 * ready check and automatic pipelining (grouped per node) are the Cluster's own. The URL's user,
 * password and TLS apply to every node; nothing connects to the URL's host.
 */
function connectCluster(nodes: readonly HostPort[], url: string, options: RedisOptions, failFast: boolean): Cluster {
  const { enableOfflineQueue, enableReadyCheck, enableAutoPipelining, retryStrategy, ...perNode } = options;
  const node = new URL(url);
  const clusterOptions: ClusterOptions = {
    enableOfflineQueue: enableOfflineQueue ?? true,
    enableReadyCheck: enableReadyCheck ?? true,
    enableAutoPipelining: enableAutoPipelining ?? false,
    // While a master is down its slots answer nothing; the topology is asked for again soon, so
    // that a promoted replica takes over its slots within seconds. A command for those slots is
    // tried again a few times (the web's: few and soon, so that its request answers 503 in about
    // a second rather than waiting for the failover).
    slotsRefreshTimeout: 1000,
    slotsRefreshInterval: 2000,
    retryDelayOnFailover: failFast ? 100 : 300,
    retryDelayOnClusterDown: failFast ? 100 : 300,
    retryDelayOnTryAgain: failFast ? 100 : 300,
    maxRedirections: failFast ? 3 : 16,
    ...(retryStrategy ? { clusterRetryStrategy: (attempt: number) => retryStrategy(attempt) } : {}),
    redisOptions: {
      ...perNode,
      username: node.username ? decodeURIComponent(node.username) : undefined,
      password: node.password ? decodeURIComponent(node.password) : undefined,
    },
  };
  return new Cluster(
    nodes.map((n) => ({ host: n.host, port: n.port })),
    clusterOptions,
  );
}

/** Whether the connection is a Redis Cluster client. */
export function isCluster(redis: RedisClient): redis is Cluster {
  return redis instanceof Cluster;
}

/**
 * The master serving a slot (`host:port`), as a Cluster client last learned the slot map: ioredis
 * asks for it again every `slotsRefreshInterval` and on a redirection, so it follows failovers and
 * resharding. Undefined on one node (or Sentinel), and for a slot the map does not hold yet.
 */
export function masterOfSlot(redis: RedisClient, slot: number): string | undefined {
  return isCluster(redis) ? redis.slots[slot]?.[0] : undefined;
}

/** The masters' connections of a Cluster (each SCAN, INFO or KEYS must ask them all), or the one node. */
export function masterNodes(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

/** A command for `execAll`: its name, then its arguments, the key first. */
export type Command = [name: string, key: string, ...args: (string | number | Buffer)[]];

/**
 * Runs commands in as few round trips as the topology allows and answers in their order: one
 * pipeline on a single node; on a Cluster one pipeline per slot (a Cluster pipeline must stay on
 * one node), all at once. Scripts defined on the connection may be named too.
 */
export async function execAll(redis: RedisClient, commands: readonly Command[]): Promise<[Error | null, unknown][]> {
  if (commands.length === 0) return [];
  if (!isCluster(redis)) return ((await redis.pipeline(commands.map((c) => [...c])).exec()) ?? []) as [Error | null, unknown][];
  const bySlot = new Map<number, number[]>();
  commands.forEach((command, i) => {
    const slot = slotOf(command[1]);
    bySlot.set(slot, [...(bySlot.get(slot) ?? []), i]);
  });
  const replies: [Error | null, unknown][] = new Array(commands.length);
  await Promise.all(
    [...bySlot.values()].map(async (indexes) => {
      const got = (await redis.pipeline(indexes.map((i) => [...commands[i]!])).exec()) ?? [];
      indexes.forEach((i, j) => (replies[i] = (got[j] ?? [new Error('no reply'), null]) as [Error | null, unknown]));
    }),
  );
  return replies;
}

/** Errors of a command that Redis did not answer: the connection, a timeout, a Cluster's missing master. */
const UNANSWERED =
  /Connection is closed|Command timed out|^MOVED |^ASK |Stream isn't writeable|enableOfflineQueue|Too many Cluster redirections|CLUSTERDOWN|TRYAGAIN|Failed to refresh slots cache|ECONNREFUSED|ECONNRESET|ETIMEDOUT/;

/**
 * Whether a request failed because Redis could not be reached (the web answers 503, not 500):
 * the connection is not ready, or the error is one of a command left unanswered — on a Cluster
 * the usual case while one master is down and the others, and so the connection, are fine.
 */
export function storeUnreachable(redis: RedisClient, error: unknown): boolean {
  if (redis.status !== 'ready') return true;
  const e = error as { name?: unknown; message?: unknown } | undefined;
  if (e?.name === 'MaxRetriesPerRequestError' || e?.name === 'ClusterAllFailedError') return true;
  return typeof e?.message === 'string' && UNANSWERED.test(e.message);
}

/** Resolves once the connection is ready, or rejects after `timeoutMs`. */
export async function waitReady(redis: RedisClient, timeoutMs = 10_000): Promise<void> {
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

/**
 * Redis's memory in use and its `maxmemory` (0: no limit), in bytes. On a Cluster, the master
 * nearest its limit speaks for all: it is the one that refuses writes first.
 */
export async function memoryUse(redis: RedisClient): Promise<{ used: number; max: number }> {
  const readings = await Promise.all(
    masterNodes(redis).map(async (node) => {
      const memory = await node.info('memory');
      return {
        used: Number(/^used_memory:(\d+)/m.exec(memory)?.[1] ?? 0),
        max: Number(/^maxmemory:(\d+)/m.exec(memory)?.[1] ?? 0),
      };
    }),
  );
  const share = (r: { used: number; max: number }) => (r.max > 0 ? r.used / r.max : 0);
  return readings.reduce((a, b) => (share(b) > share(a) || (share(a) === 0 && share(b) === 0 && b.used > a.used) ? b : a));
}
