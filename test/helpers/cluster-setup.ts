import { RedisCluster } from './redis-cluster.js';

/**
 * Vitest's global setup: with HERALD_TEST_TOPOLOGY=cluster, one 3-master Redis Cluster (a replica
 * each) for the whole run, its seeds passed to the test processes in HERALD_TEST_CLUSTER_NODES
 * (test/helpers/env.ts); stopped when the run ends. Otherwise nothing.
 */
export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  if (process.env.HERALD_TEST_TOPOLOGY !== 'cluster') return undefined;
  const cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1 });
  process.env.HERALD_TEST_CLUSTER_NODES = cluster.seeds;
  return () => cluster.stop();
}
