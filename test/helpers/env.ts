import { AddressLookup } from '../../src/notice/address-lookup.js';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { ConfigError, loadConfig, type Config } from '../../src/config.js';
import { connectRedis, masterNodes, type RedisClient } from '../../src/store/redis.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * `HERALD_TEST_TOPOLOGY=cluster` runs a suite on a Redis Cluster: the global setup
 * (test/helpers/cluster-setup.ts) starts one for the run and passes its seeds on in
 * HERALD_TEST_CLUSTER_NODES; every testEnv then names it in REDIS_CLUSTER_NODES, with
 * HERALD_QUEUE_PARTITIONS 3 (HERALD_TEST_QUEUE_PARTITIONS to change it).
 * `HERALD_TEST_TOPOLOGY=sentinel` runs it on a Sentinel setup (test/helpers/topology-setup.ts),
 * whose variables come in HERALD_TEST_REDIS_ENV.
 */
export const TEST_TOPOLOGY: 'single' | 'cluster' | 'sentinel' =
  process.env.HERALD_TEST_TOPOLOGY === 'cluster' ? 'cluster' : process.env.HERALD_TEST_TOPOLOGY === 'sentinel' ? 'sentinel' : 'single';

/** The variables that point Herald at the test topology's Redis (none on one node). */
export function topologyEnv(): Record<string, string> {
  if (TEST_TOPOLOGY === 'single') return {};
  if (TEST_TOPOLOGY === 'sentinel') return JSON.parse(process.env.HERALD_TEST_REDIS_ENV ?? '{}') as Record<string, string>;
  const nodes = process.env.HERALD_TEST_CLUSTER_NODES;
  if (!nodes) throw new Error('HERALD_TEST_TOPOLOGY=cluster: no cluster was started (test/helpers/cluster-setup.ts is the global setup)');
  return { REDIS_CLUSTER_NODES: nodes, HERALD_QUEUE_PARTITIONS: process.env.HERALD_TEST_QUEUE_PARTITIONS ?? '3' };
}
export const TEST_API_KEY = 'test-api-key-0123456789';
/** An archive key of the tests' own, for live configurations (which refuse the published dev key). */
export const TEST_ARCHIVE_KEY = `test:${Buffer.alloc(32, 0x5a).toString('base64')}`;

/** A key prefix of this test run's own: tests share one Redis and touch only their keys. */
export function testPrefix(label = 't'): string {
  return `herald-test-${label}-${randomBytes(5).toString('hex')}`;
}

/** The environment of a test's Herald: fast polls, short grace, its own prefix and archive. */
export function testEnv(prefix: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL,
    // A test that names a Redis server of its own keeps it; the others run on the shared topology.
    ...(env.REDIS_URL === undefined ? topologyEnv() : {}),
    HERALD_PREFIX: prefix,
    HERALD_API_KEYS: TEST_API_KEY,
    HERALD_PROVIDERS: 'sandbox',
    HERALD_MIN_POLL_INTERVAL_MS: '200',
    HERALD_PROVIDER_TIMEOUT_MS: '1000',
    HERALD_RECONCILE_INTERVAL_MS: '300',
    HERALD_RECONCILE_GRACE_MS: '1500',
    PORT: '0',
    HOST: '127.0.0.1',
    HERALD_ARCHIVE_URL: testArchiveUrl(),
    // Tests send wrong keys from one address on purpose; the failure limit has tests of its own.
    HERALD_AUTH_FAILURES_PER_MINUTE: '0',
    ...env,
  };
}

/** The configuration of `testEnv`. */
export function testConfig(prefix: string, env: Record<string, string> = {}): Config {
  return loadConfig(testEnv(prefix, env));
}

/** A fresh archive directory of the test's own, outside the work tree. */
export function testArchiveUrl(): string {
  return `file://${mkdtempSync(join(tmpdir(), 'herald-archive-'))}`;
}

/** Deletes every key under `prefix` (and only those), on every master of a Cluster. */
export async function deleteKeys(redis: RedisClient, prefix: string): Promise<void> {
  for (const node of masterNodes(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      // One key at a time: on a Cluster a DEL of several keys must stay in one slot.
      await Promise.all(keys.map((key) => node.del(key)));
    } while (cursor !== '0');
  }
}

/**
 * A connection of the test's own to the test topology's Redis: on a Cluster a Cluster client,
 * which takes the same commands on keys (typed as a node's for the tests' convenience).
 */
export function plainRedis(): Redis {
  if (TEST_TOPOLOGY === 'sentinel') return connectRedis(loadConfig(topologyEnv()).redis, 'worker', 'herald-test') as Redis;
  const nodes = topologyEnv().REDIS_CLUSTER_NODES;
  if (!nodes) return new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const cluster = new Cluster(
    nodes.split(',').map((seed) => ({ host: seed.split(':')[0]!, port: Number(seed.split(':')[1]) })),
    { redisOptions: { maxRetriesPerRequest: null } },
  );
  return cluster as unknown as Redis;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(probe: () => Promise<T | undefined | null | false>, timeoutMs: number, what: string): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

/** The problems `loadConfig` names for an environment (none: it loads). */
export function configProblems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

/** The address lookup of a test configuration (its key derived from the dev archive key). */
export const testAddressLookup = new AddressLookup(testConfig('address-lookup').addressKeys);
