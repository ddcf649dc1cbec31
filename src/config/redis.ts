/** Where Redis is: one node, a Sentinel-watched master or a Cluster; and how each notice queue is split. */
import { SHARD_COUNT } from '../notice/ids.js';
import { readFileSync } from 'node:fs';
import { flag, integer, readSection, text, url } from './schema.js';
import type { HostPort, RedisTarget, RedisTls } from './types.js';
import { withoutCredentials } from './urls.js';

export const SCHEMA = {
  REDIS_URL: url(['redis:', 'rediss:'], 'redis://127.0.0.1:6379', withoutCredentials),
  REDIS_SENTINELS: text(undefined),
  REDIS_SENTINEL_MASTER: text(undefined),
  REDIS_SENTINEL_PASSWORD: text(undefined),
  REDIS_CLUSTER_NODES: text(undefined),
  // For rediss:// servers whose certificate no system CA signed (Heroku-style managed Redis).
  REDIS_TLS_CA_FILE: text(undefined),
  REDIS_TLS_REJECT_UNAUTHORIZED: flag(),
  // At most the number of shards: a notice's jobs go to its shard's partition.
  HERALD_QUEUE_PARTITIONS: integer(1, 1, SHARD_COUNT),
};

export function readRedis(
  env: Record<string, string>,
  problems: string[],
): { redisUrl: string; redis: RedisTarget; queuePartitions: number } {
  const read = readSection(env, SCHEMA, problems);
  const redisUrl = read.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const hostPorts = (name: string, raw: string | undefined): HostPort[] | undefined => {
    if (raw === undefined) return undefined;
    const entries = raw
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean);
    const parsed = entries.map((entry) => /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(entry));
    if (entries.length === 0 || parsed.some((m) => !m || Number(m[2]) < 1 || Number(m[2]) > 65_535)) {
      problems.push(`${name}="${raw}" must list servers as host:port,host:port`);
      return undefined;
    }
    return parsed.map((m) => ({ host: m![1]!, port: Number(m![2]) }));
  };
  const sentinels = hostPorts('REDIS_SENTINELS', read.REDIS_SENTINELS);
  const sentinelMaster = read.REDIS_SENTINEL_MASTER;
  const clusterNodes = hostPorts('REDIS_CLUSTER_NODES', read.REDIS_CLUSTER_NODES);
  if (sentinels && !sentinelMaster) problems.push('REDIS_SENTINEL_MASTER must name the master when REDIS_SENTINELS is set');
  if (sentinelMaster && read.REDIS_SENTINELS === undefined)
    problems.push('REDIS_SENTINELS must list the sentinels when REDIS_SENTINEL_MASTER is set');
  if ((read.REDIS_SENTINELS ?? sentinelMaster) !== undefined && read.REDIS_CLUSTER_NODES !== undefined) {
    problems.push(
      'REDIS_CLUSTER_NODES and REDIS_SENTINELS are both set: Herald talks to a Cluster or to a Sentinel-watched master, not both',
    );
  }
  return {
    redisUrl,
    redis: {
      url: redisUrl,
      sentinels,
      sentinelMaster,
      sentinelPassword: read.REDIS_SENTINEL_PASSWORD,
      clusterNodes,
      tls: readTls(redisUrl, read.REDIS_TLS_CA_FILE, read.REDIS_TLS_REJECT_UNAUTHORIZED, problems),
    },
    queuePartitions: read.HERALD_QUEUE_PARTITIONS,
  };
}

/** The TLS options of a rediss:// URL: the CA to trust (read once, at start-up) and whether to verify the server. */
function readTls(
  redisUrl: string,
  caFile: string | undefined,
  rejectUnauthorized: boolean | undefined,
  problems: string[],
): RedisTls | undefined {
  if (!redisUrl.startsWith('rediss:')) {
    for (const [name, value] of [
      ['REDIS_TLS_CA_FILE', caFile],
      ['REDIS_TLS_REJECT_UNAUTHORIZED', rejectUnauthorized],
    ] as const) {
      if (value !== undefined) problems.push(`${name} applies to rediss:// only: REDIS_URL names a server without TLS`);
    }
    return undefined;
  }
  let ca: string | undefined;
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile, 'utf8');
    } catch (error) {
      problems.push(`REDIS_TLS_CA_FILE=${caFile} cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
  }
  return { ca, rejectUnauthorized: rejectUnauthorized ?? true };
}
