/** Where Redis is: one node, a Sentinel-watched master or a Cluster; and how each notice queue is split. */
import { SHARD_COUNT } from '../notice/ids.js';
import { integer, readSection, text, url } from './schema.js';
import type { HostPort, RedisTarget } from './types.js';
import { withoutCredentials } from './urls.js';

export const SCHEMA = {
  REDIS_URL: url(['redis:', 'rediss:'], 'redis://127.0.0.1:6379', withoutCredentials),
  REDIS_SENTINELS: text(undefined),
  REDIS_SENTINEL_MASTER: text(undefined),
  REDIS_SENTINEL_PASSWORD: text(undefined),
  REDIS_CLUSTER_NODES: text(undefined),
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
    redis: { url: redisUrl, sentinels, sentinelMaster, sentinelPassword: read.REDIS_SENTINEL_PASSWORD, clusterNodes },
    queuePartitions: read.HERALD_QUEUE_PARTITIONS,
  };
}
