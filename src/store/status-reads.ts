import type { Channel } from '../providers/types.js';
import type { Keys } from './keys.js';
import type { RedisClient } from './redis.js';

/** The providers' status-read limits as the steps of a notice's job take them. */
export interface StatusReadLimit {
  /**
   * Takes one status read of the channel's provider at `now`: undefined when the read may go,
   * else when to come back for it.
   */
  take(channel: Channel, now: number): Promise<number | undefined>;
  /** Holds back every worker's status reads of the channel's provider for `ms` (its Retry-After). */
  pause(channel: Channel, ms: number): Promise<void>;
}

const WINDOW_MS = 1000;

/**
 * Status reads per second per provider, all workers together: a counter per provider and second
 * (INCR, with an expiry), beside a key that holds every read back for a provider's Retry-After.
 * The three commands of a take leave in one write on the step connection's automatic pipeline,
 * and each is one of Redis's cheapest: a script or a limiter of BullMQ's would cost the check a
 * round of its own. A read over the limit comes back in the second its place in the count gives
 * it, so a burst of checks spreads over the seconds after it instead of all retrying at once.
 * Only the planned checks take reads: the deadline's own last read is never held back.
 */
export class StatusReadLimiter implements StatusReadLimit {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly limits: Record<Channel, { provider: string; perSecond: number }>,
  ) {}

  async take(channel: Channel, now: number): Promise<number | undefined> {
    const { provider, perSecond } = this.limits[channel];
    const window = Math.floor(now / WINDOW_MS);
    const key = this.keys.statusReads(provider, window);
    const [count, , heldMs] = await Promise.all([
      this.redis.incr(key),
      this.redis.pexpire(key, 2 * WINDOW_MS),
      this.redis.pttl(this.keys.statusReads(provider, 'pause')),
    ]);
    if (heldMs > 0) return now + heldMs;
    if (count <= perSecond) return undefined;
    return (window + 1 + Math.floor((count - 1 - perSecond) / perSecond)) * WINDOW_MS;
  }

  async pause(channel: Channel, ms: number): Promise<void> {
    await this.redis.set(this.keys.statusReads(this.limits[channel].provider, 'pause'), '1', 'PX', Math.max(1, Math.ceil(ms)));
  }
}
