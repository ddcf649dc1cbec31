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
    const key = this.keys.authFailures(ip);
    const replies = await this.redis.multi().set(key, 0, 'PX', windowMs, 'NX').incr(key).pttl(key).exec();
    return { count: Number(replies?.[1]?.[1]), ttlMs: Number(replies?.[2]?.[1]) };
  }
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
    const replies = await this.redis.multi().set(key, 0, 'PX', windowMs, 'NX').incrby(key, places).pttl(key).exec();
    const failed = replies?.find(([error]) => error)?.[0];
    if (!replies || failed) throw failed ?? new Error('the rate limit counter was not counted');
    return { last: Number(replies[1]![1]), ttlMs: Number(replies[2]![1]) };
  }
}
