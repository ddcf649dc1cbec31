import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig, type Config } from '../../src/config.js';
import { connectRedis } from '../../src/store/redis.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/**
 * The Redis variables of the run's shared topology when it is not one node
 * (`HERALD_TEST_TOPOLOGY=sentinel`, test/helpers/topology-setup.ts); empty otherwise.
 */
const TOPOLOGY_ENV: Record<string, string> = JSON.parse(process.env.HERALD_TEST_REDIS_ENV ?? '{}') as Record<string, string>;
export const TEST_API_KEY = 'test-api-key-0123456789';

/** A key prefix of this test run's own: tests share one Redis and touch only their keys. */
export function testPrefix(label = 't'): string {
  return `herald-test-${label}-${randomBytes(5).toString('hex')}`;
}

/** The environment of a test's Herald: fast polls, short grace, its own prefix and archive. */
export function testEnv(prefix: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL,
    // A test that names a Redis server of its own keeps it; the others run on the shared topology.
    ...(env.REDIS_URL === undefined ? TOPOLOGY_ENV : {}),
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

/** Deletes every key under `prefix` (and only those). */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

export function plainRedis(): Redis {
  if (TOPOLOGY_ENV.REDIS_SENTINELS !== undefined) return connectRedis(loadConfig(TOPOLOGY_ENV).redis, 'worker', 'herald-test');
  return new Redis(REDIS_URL, { maxRetriesPerRequest: null });
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
