import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { Clock } from '../clock.js';
import { RateLimitCounters } from '../store/admin.js';
import type { RedisClient } from '../store/redis.js';

/** Places one process takes from a key's shared count at a time, at most. */
export const MAX_LEASE = 100;
/** Keys whose leases one process remembers; the oldest go first past this. */
const MAX_KEYS = 10_000;

/**
 * How many places of a window one process takes at a time under a limit of `max`: a thousandth
 * of it, from 1 (every request counted in Redis, exactly as it comes) to MAX_LEASE.
 */
export function leaseSize(max: number): number {
  return Math.max(1, Math.min(MAX_LEASE, Math.floor(max / 1000)));
}

/** Places of one key's window this process holds: `next` to `last` are its to hand out, until `until`. */
interface Lease {
  next: number;
  last: number;
  until: number;
}

/**
 * The per-API-key limit's store for `@fastify/rate-limit`: one count per key and window, shared
 * by every web process through Redis, which each process takes a lease of places at a time
 * (`leaseSize`) instead of one Redis call per request. Every place is counted in Redis once, so
 * all processes together never let more than the limit through in a window; a window's places
 * that a process leased and did not use are lost with the window, so the limit may refuse up to
 * (processes × (lease − 1)) requests early, a thousandth of it per process. Once a process sees
 * the window's count past the limit, it refuses the key's requests from memory until the window
 * ends. Without Redis, a lease cannot be taken and the call fails (`skipOnError` lets the request
 * through, and the route answers for Redis itself).
 */
export function leasedRateLimitStore(redis: RedisClient, namespace: string, clock: Clock): FastifyRateLimitStoreCtor {
  const counters = new RateLimitCounters(redis);

  class LeasedStore implements FastifyRateLimitStore {
    private readonly leases = new Map<string, Lease>();
    private readonly taking = new Map<string, Promise<void>>();

    constructor(
      _options?: unknown,
      private readonly prefix = namespace,
    ) {}

    incr(id: string, done: Parameters<FastifyRateLimitStore['incr']>[1], timeWindow: number, max: number): void {
      this.place(this.prefix + id, timeWindow, max).then(
        (result) => done(null, result),
        (error: Error) => done(error),
      );
    }

    /**
     * A route's own limit (Herald sets none) counts apart, as `@fastify/rate-limit`'s stores do:
     * under its method and URL, which the plugin passes as `routeInfo`.
     */
    child(options: Parameters<FastifyRateLimitStore['child']>[0]): FastifyRateLimitStore {
      const route = (options as unknown as { routeInfo?: { method?: unknown; url?: unknown } }).routeInfo;
      return new LeasedStore(undefined, `${this.prefix}${String(route?.method ?? '')}${String(route?.url ?? '')}-`);
    }

    /** The place of this request in `key`'s window (past `max`: refused), and the ms left of the window. */
    private async place(key: string, timeWindow: number, max: number): Promise<{ current: number; ttl: number }> {
      for (;;) {
        const now = clock.now();
        const lease = this.leases.get(key);
        if (lease !== undefined && now < lease.until) {
          if (lease.next <= lease.last) return { current: lease.next++, ttl: lease.until - now };
          // The window's count is past the limit: nothing more to take from Redis until it ends.
          if (lease.last >= max) return { current: lease.last + 1, ttl: lease.until - now };
        }
        // One lease at a time per key: the requests that arrive meanwhile take from it too.
        let taking = this.taking.get(key);
        if (taking === undefined) {
          taking = this.take(key, leaseSize(max), timeWindow).finally(() => this.taking.delete(key));
          this.taking.set(key, taking);
        }
        await taking;
      }
    }

    private async take(key: string, places: number, timeWindow: number): Promise<void> {
      const { last, ttlMs } = await counters.take(key, places, timeWindow);
      this.leases.delete(key);
      this.leases.set(key, { next: last - places + 1, last, until: clock.now() + (ttlMs > 0 ? ttlMs : timeWindow) });
      if (this.leases.size > MAX_KEYS) this.leases.delete(this.leases.keys().next().value!);
    }
  }
  return LeasedStore;
}
