import type { FastifyReply } from 'fastify';
import type { RedisClient } from '../store/redis.js';
import type { Clock } from '../clock.js';
import { AuthFailureStore } from '../store/admin.js';
import type { Keys } from '../store/keys.js';
import { errorBody } from './errors.js';

const WINDOW_MS = 60_000;
/** Client IPs remembered as blocked by one process; the oldest go first past this. */
const MAX_BLOCKED = 10_000;

/**
 * Failed authentications (a wrong API key, admin token, login or metrics token) per client IP
 * per minute, counted in Redis so every web process shares the count. Past the limit the IP gets
 * 429 `rate_limited` until its minute ends, before any credential is looked at, right or wrong.
 * A process learns of the block at the first failure it sees over the limit and then answers
 * from memory, so good requests cost no Redis call; each other process may let one more guess
 * through before it learns.
 */
export class AuthFailures {
  private readonly blocked = new Map<string, number>();
  private readonly store: AuthFailureStore;

  constructor(
    redis: RedisClient,
    keys: Keys,
    private readonly limitPerMinute: number,
    private readonly clock: Clock,
  ) {
    this.store = new AuthFailureStore(redis, keys);
  }

  /** Seconds until `ip` may try again, or undefined when it is not blocked. */
  retryAfter(ip: string): number | undefined {
    const until = this.blocked.get(ip);
    if (until === undefined) return undefined;
    const left = until - this.clock.now();
    if (left <= 0) {
      this.blocked.delete(ip);
      return undefined;
    }
    return Math.ceil(left / 1000);
  }

  /** Counts a failure of `ip`; returns the seconds to wait when this one went over the limit. */
  async record(ip: string): Promise<number | undefined> {
    if (this.limitPerMinute <= 0) return undefined;
    let count: number;
    let ttlMs: number;
    try {
      ({ count, ttlMs } = await this.store.count(ip, WINDOW_MS));
    } catch {
      // Without Redis the request fails on its own (401/403); the count is not worth a 503.
      return undefined;
    }
    if (!(count > this.limitPerMinute)) return undefined;
    const waitMs = ttlMs > 0 ? ttlMs : WINDOW_MS;
    this.blocked.delete(ip);
    this.blocked.set(ip, this.clock.now() + waitMs);
    if (this.blocked.size > MAX_BLOCKED) this.blocked.delete(this.blocked.keys().next().value!);
    return Math.ceil(waitMs / 1000);
  }
}

/** The 429 answer of a blocked client. */
export function sendTooManyFailures(reply: FastifyReply, retryAfterSeconds: number): FastifyReply {
  return reply
    .status(429)
    .header('retry-after', String(retryAfterSeconds))
    .send(errorBody('rate_limited', `Too many failed authentications from this address; retry in ${retryAfterSeconds} s.`));
}
