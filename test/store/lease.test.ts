import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { newNoticeId } from '../../src/notice/ids.js';
import { NoticeStore } from '../../src/store/notices.js';
import { deleteKeys, plainRedis, testPrefix } from '../helpers/env.js';

let redis: Redis;
let store: NoticeStore;
const prefix = testPrefix('lease');

beforeAll(() => {
  redis = plainRedis();
  store = new NoticeStore(redis, prefix);
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe("the reconciler's lease on a notice", () => {
  it('is held by one worker at a time', async () => {
    const id = newNoticeId(5, 1_000_000);
    expect(await store.tryLease(id, 'worker-a', 60_000)).toBe(true);
    expect(await store.tryLease(id, 'worker-b', 60_000)).toBe(false);
    expect(await redis.get(store.keys.lease(id))).toBe('worker-a');
  });

  it('is released by its owner', async () => {
    const id = newNoticeId(6, 1_000_000);
    await store.tryLease(id, 'worker-a', 60_000);
    expect(await store.releaseLease(id, 'worker-a')).toBe(true);
    expect(await redis.exists(store.keys.lease(id))).toBe(0);
    expect(await store.tryLease(id, 'worker-b', 60_000)).toBe(true);
  });

  describe('when it expired and another worker took it', () => {
    it('is left to the other worker when the first releases: the first deletes only its own lease', async () => {
      const id = newNoticeId(7, 1_000_000);
      expect(await store.tryLease(id, 'worker-a', 60_000)).toBe(true);
      // worker-a stalls past its lease: the lease expires (removed here rather than waited for).
      await redis.del(store.keys.lease(id));
      expect(await store.tryLease(id, 'worker-b', 60_000)).toBe(true);

      expect(await store.releaseLease(id, 'worker-a')).toBe(false);
      expect(await redis.get(store.keys.lease(id))).toBe('worker-b');
      const ttl = await redis.pttl(store.keys.lease(id));
      expect(ttl).toBeGreaterThan(0);
      expect(await store.tryLease(id, 'worker-c', 60_000)).toBe(false);

      expect(await store.releaseLease(id, 'worker-b')).toBe(true);
      expect(await redis.exists(store.keys.lease(id))).toBe(0);
    });
  });

  describe('when it changes hands while the release runs', () => {
    it('is left to the worker that took it, whatever command of the release it came after', async () => {
      const id = newNoticeId(9, 1_000_000);
      const key = store.keys.lease(id);
      // worker-a's release goes through a connection that, right after the first command on the
      // lease key answers, lets the lease expire and worker-b take it: what a GET then a DEL
      // leaves a gap for, and one compare-and-delete does not.
      let handedOver = false;
      const racing = new Proxy(plainRedis(), {
        get(target, prop) {
          const value = Reflect.get(target, prop, target);
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            const result = value.apply(target, args);
            if (handedOver || args[0] !== key || !(result instanceof Promise)) return result;
            return result.then(async (reply: unknown) => {
              if (!handedOver) {
                handedOver = true;
                await redis.del(key);
                await redis.set(key, 'worker-b', 'PX', 60_000);
              }
              return reply;
            });
          };
        },
      });
      const releasing = new NoticeStore(racing, prefix);
      try {
        expect(await store.tryLease(id, 'worker-a', 60_000)).toBe(true);
        await releasing.releaseLease(id, 'worker-a');
        expect(handedOver).toBe(true);
        expect(await redis.get(key)).toBe('worker-b');
      } finally {
        await racing.quit();
      }
    });
  });

  it('releasing a lease nobody holds changes nothing', async () => {
    const id = newNoticeId(8, 1_000_000);
    expect(await store.releaseLease(id, 'worker-a')).toBe(false);
    expect(await redis.exists(store.keys.lease(id))).toBe(0);
  });
});
