import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { Keys } from '../../src/store/keys.js';
import { MetricsOwnerLease, OWNER_LEASE_MAX_MS, OWNER_LEASE_MIN_MS, OWNER_RECHECK_MS } from '../../src/store/metrics-owner.js';
import { deleteKeys, plainRedis, testPrefix } from '../helpers/env.js';

let redis: Redis;
const prefix = testPrefix('mowner-store');
const keys = new Keys(prefix);

beforeAll(() => {
  redis = plainRedis();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe("the lease on /metrics' cluster-wide series", () => {
  it('is owned by the first replica that looks, never by two at once', async () => {
    await redis.del(keys.metricsOwner);
    const [a, b] = [new MetricsOwnerLease(redis, keys), new MetricsOwnerLease(redis, keys)];
    expect(await a.owns(0)).toBe(true);
    expect(await b.owns(0)).toBe(false);
    expect(await redis.get(keys.metricsOwner)).toBe(a.owner);
    expect(await a.owns(OWNER_RECHECK_MS)).toBe(true);
    expect(await b.owns(OWNER_RECHECK_MS)).toBe(false);
  });

  it("lasts three of the owner's intervals between looks, within 15 s and 10 min", async () => {
    await redis.del(keys.metricsOwner);
    const a = new MetricsOwnerLease(redis, keys);
    await a.owns(0);
    const ttl = async () => redis.pttl(keys.metricsOwner);
    expect(await ttl()).toBeLessThanOrEqual(OWNER_LEASE_MIN_MS);
    expect(await ttl()).toBeGreaterThan(OWNER_LEASE_MIN_MS - 1_000);
    await a.owns(60_000);
    expect(await ttl()).toBeGreaterThan(180_000 - 1_000);
    expect(await ttl()).toBeLessThanOrEqual(180_000);
    await a.owns(60_000 + 3_600_000);
    expect(await ttl()).toBeLessThanOrEqual(OWNER_LEASE_MAX_MS);
    expect(await ttl()).toBeGreaterThan(OWNER_LEASE_MAX_MS - 1_000);
  });

  it('is taken for three of the scrape intervals the replica saw before, so that owners scraped every minute do not alternate', async () => {
    await redis.del(keys.metricsOwner);
    const [a, b] = [new MetricsOwnerLease(redis, keys), new MetricsOwnerLease(redis, keys)];
    expect(await a.owns(0)).toBe(true);
    expect(await b.owns(20_000)).toBe(false);
    // The owner's first lease (15 s, no interval known yet) runs out before b's next scrape, a minute on.
    await redis.del(keys.metricsOwner);
    expect(await b.owns(80_000)).toBe(true);
    expect(await redis.pttl(keys.metricsOwner)).toBeGreaterThan(180_000 - 1_000);
    // a, scraped a minute after its last scrape, finds it held: one owner.
    expect(await a.owns(60_000)).toBe(false);
    expect(await b.owns(140_000)).toBe(true);
  });

  it('is taken at the next scrape of another replica once it ran out; its owner learns it within OWNER_RECHECK_MS', async () => {
    await redis.del(keys.metricsOwner);
    const [a, b] = [new MetricsOwnerLease(redis, keys), new MetricsOwnerLease(redis, keys)];
    expect(await a.owns(0)).toBe(true);
    expect(await b.owns(0)).toBe(false);
    // The owner's lease runs out (removed here rather than waited for).
    await redis.del(keys.metricsOwner);
    expect(await b.owns(1)).toBe(true);
    // The former owner keeps its answer until it renews, and then hears it lost the lease.
    expect(await a.owns(OWNER_RECHECK_MS - 1)).toBe(true);
    expect(await a.owns(OWNER_RECHECK_MS)).toBe(false);
    expect(await redis.get(keys.metricsOwner)).toBe(b.owner);
  });

  it('is let go by its owner, and taken by the next replica that looks; a release by another leaves it', async () => {
    await redis.del(keys.metricsOwner);
    const [a, b] = [new MetricsOwnerLease(redis, keys), new MetricsOwnerLease(redis, keys)];
    expect(await a.owns(0)).toBe(true);
    expect(await b.owns(0)).toBe(false);
    await b.release();
    expect(await redis.get(keys.metricsOwner)).toBe(a.owner);
    await a.release();
    expect(await redis.exists(keys.metricsOwner)).toBe(0);
    expect(await b.owns(1)).toBe(true);
  });

  it('counts as not owned while Redis cannot be reached', async () => {
    const down = plainRedis();
    await down.quit();
    expect(await new MetricsOwnerLease(down, keys).owns(0)).toBe(false);
  });
});
