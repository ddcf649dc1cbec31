import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { FastifyRateLimitStore } from '@fastify/rate-limit';
import { systemClock } from '../../src/clock.js';
import { leasedRateLimitStore, leaseSize, MAX_LEASE } from '../../src/http/rate-limit.js';
import { Keys } from '../../src/store/keys.js';
import { connectRedis } from '../../src/store/redis.js';
import { deleteKeys, plainRedis, sleep, testPrefix } from '../helpers/env.js';

let redis: Redis;
const prefix = testPrefix('ratelimit');
const namespace = new Keys(prefix).rateLimitNamespace;

beforeAll(() => {
  redis = plainRedis();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** One web process's store, on a connection of its own that counts the leases it takes from Redis. */
function webProcess(): { store: FastifyRateLimitStore; leasesTaken: () => number } {
  let taken = 0;
  const counted = new Proxy(redis, {
    get(target, name, receiver) {
      if (name !== 'multi') return Reflect.get(target, name, receiver) as unknown;
      return (...args: Parameters<Redis['multi']>) => ((taken += 1), target.multi(...args));
    },
  });
  const Store = leasedRateLimitStore(counted, namespace, systemClock);
  return { store: new Store({}), leasesTaken: () => taken };
}

const place = (store: FastifyRateLimitStore, key: string, max: number, windowMs = 60_000) =>
  new Promise<{ current: number; ttl: number }>((resolve, reject) =>
    store.incr(key, (error, result) => (error ? reject(error) : resolve(result!)), windowMs, max),
  );

describe('the API rate limit, taken a lease of places at a time', () => {
  it('leases a thousandth of the limit, from one place to MAX_LEASE', () => {
    expect(leaseSize(3)).toBe(1);
    expect(leaseSize(1999)).toBe(1);
    expect(leaseSize(5000)).toBe(5);
    expect(leaseSize(1_200_000)).toBe(MAX_LEASE);
  });

  it('counts every request in Redis, a call each, under a limit below two thousand; the one past it from memory', async () => {
    const web = webProcess();
    const places = [];
    for (let i = 0; i < 5; i += 1) places.push((await place(web.store, 'exact', 3)).current);
    expect(places).toEqual([1, 2, 3, 4, 4]);
    expect(web.leasesTaken()).toBe(3);
    expect(await redis.get(`${namespace}exact`)).toBe('3');
  });

  it('hands out the places of one lease from memory, to concurrent requests too', async () => {
    const web = webProcess();
    const places = await Promise.all(Array.from({ length: 50 }, () => place(web.store, 'concurrent', 5000)));
    expect(places.map((p) => p.current).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    // 50 places, 5 a lease: ten calls to Redis, not fifty.
    expect(web.leasesTaken()).toBe(10);
    expect(await redis.get(`${namespace}concurrent`)).toBe('50');
    const ttl = places[0]!.ttl;
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('lets no more than the limit through across processes, and refuses past it from memory until the window ends', async () => {
    const max = 3000;
    const webs = [webProcess(), webProcess(), webProcess()];
    let allowed = 0;
    for (let i = 0; i < max + 200; i += 1) {
      const { current } = await place(webs[i % 3]!.store, 'shared', max);
      if (current <= max) allowed += 1;
    }
    // Each process may hold up to (lease - 1) places of the window unused when the others have
    // taken the rest: the limit refuses at most that many early, never lets one more through.
    expect(allowed).toBeLessThanOrEqual(max);
    expect(allowed).toBeGreaterThanOrEqual(max - 3 * (leaseSize(max) - 1));
    const counted = Number(await redis.get(`${namespace}shared`));
    const calls = webs.map((w) => w.leasesTaken());
    // Past the limit, each process asks Redis once more at most, then answers from memory.
    for (let i = 0; i < 30; i += 1) expect((await place(webs[i % 3]!.store, 'shared', max)).current).toBeGreaterThan(max);
    expect(webs.map((w) => w.leasesTaken())).toEqual(calls);
    expect(Number(await redis.get(`${namespace}shared`))).toBe(counted);
  });

  it('starts a new window once the last has ended', async () => {
    const web = webProcess();
    expect((await place(web.store, 'windows', 3, 300)).current).toBe(1);
    expect((await place(web.store, 'windows', 3, 300)).current).toBe(2);
    await sleep(400);
    const next = await place(web.store, 'windows', 3, 300);
    expect(next.current).toBe(1);
    expect(next.ttl).toBeLessThanOrEqual(300);
  });

  it('keeps the count of a child store (a route of its own) apart, under its method and URL', async () => {
    const web = webProcess();
    const child = web.store.child({ routeInfo: { method: 'POST', url: '/v1/notices' } } as never);
    expect((await place(child, 'routes', 3)).current).toBe(1);
    expect(await redis.get(`${namespace}POST/v1/notices-routes`)).toBe('1');
    expect(await redis.exists(`${namespace}routes`)).toBe(0);
  });

  it('fails the call when Redis cannot be reached, so that the plugin lets the request through (skipOnError)', async () => {
    const down = connectRedis('redis://127.0.0.1:1', 'web', 'herald-test-down');
    down.on('error', () => undefined);
    try {
      const Store = leasedRateLimitStore(down, namespace, systemClock);
      await expect(place(new Store({}), 'down', 3)).rejects.toThrow();
    } finally {
      down.disconnect();
    }
  });
});
