import type { RedisClient } from './redis.js';
import type { Keys } from './keys.js';

/** Admin login sessions in Redis, by the SHA-256 of the cookie value (src/http/admin-auth.ts decides what they hold). */
export class AdminSessionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  async put(idHash: string, tag: string, ttlMs: number): Promise<void> {
    await this.redis.set(this.keys.adminSession(idHash), tag, 'PX', ttlMs);
  }

  /** The session's tag, or null when it has expired or never was. */
  get(idHash: string): Promise<string | null> {
    return this.redis.get(this.keys.adminSession(idHash));
  }

  async delete(idHash: string): Promise<void> {
    await this.redis.del(this.keys.adminSession(idHash));
  }
}

/** Failed authentications per client IP, in windows of `windowMs` shared by every web process. */
export class AuthFailureStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** Counts one failure of `ip`: its failures in the current window, and the ms left of the window. */
  async count(ip: string, windowMs: number): Promise<{ count: number; ttlMs: number }> {
    return countInWindow(this.redis, this.keys.authFailures(ip), 1, windowMs);
  }
}

/**
 * Adds `by` to the count of `key`'s window, starting one of `windowMs` when there is none (one
 * `MULTI`: `SET NX PX`, `INCRBY`, `PTTL`): the count after it, and the ms left of the window.
 */
async function countInWindow(redis: RedisClient, key: string, by: number, windowMs: number): Promise<{ count: number; ttlMs: number }> {
  const replies = await redis.multi().set(key, 0, 'PX', windowMs, 'NX').incrby(key, by).pttl(key).exec();
  const failed = replies?.find(([error]) => error)?.[0];
  if (!replies || failed) throw failed ?? new Error(`the count of ${key} was not taken`);
  return { count: Number(replies[1]![1]), ttlMs: Number(replies[2]![1]) };
}

/**
 * The API rate limit's counters (src/http/rate-limit.ts), one per API key and window, under
 * `Keys.rateLimitNamespace` as `@fastify/rate-limit`'s own Redis store keeps them: processes of
 * either kind count in the same window.
 */
export class RateLimitCounters {
  constructor(private readonly redis: RedisClient) {}

  /**
   * Takes the next `places` of `key`'s window, starting one of `windowMs` when there is none:
   * the last place taken (they are the `places` up to it), and the ms left of the window.
   */
  async take(key: string, places: number, windowMs: number): Promise<{ last: number; ttlMs: number }> {
    const { count, ttlMs } = await countInWindow(this.redis, key, places, windowMs);
    return { last: count, ttlMs };
  }
}
