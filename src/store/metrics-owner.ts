import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Keys } from './keys.js';
import type { RedisClient } from './redis.js';
import { defineScripts, type HeraldScripts } from './scripts.js';

/** The owner renews its lease at most this often; between, its scrapes take the last answer. */
export const OWNER_RECHECK_MS = 5_000;
/** The least and the most an owner's lease lasts: three of its scrape intervals, within these. */
export const OWNER_LEASE_MIN_MS = 15_000;
export const OWNER_LEASE_MAX_MS = 10 * 60_000;

/**
 * Which web process exports the cluster-wide series of /metrics (the figures read from Redis and
 * BullMQ, the same whichever process reads them), so that summing a series over the replicas
 * counts it once. The owner holds a lease in Redis (`holdLease-1.lua`), renewed by its scrapes:
 * it lasts three of the owner's scrape intervals (15 s to 10 min; a lease just taken, three of the
 * intervals the replica was scraped at before), so a replica that dies, or is
 * no longer scraped, lets go of it, and the next replica scraped takes it. A replica never
 * scraped never owns it. Times are the process's monotonic milliseconds (`performance.now()`).
 */
export class MetricsOwnerLease {
  private readonly redis: RedisClient & HeraldScripts;
  /** This process in the lease: host, pid and a random part (a pid recurs across containers). */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID()}`;
  /** A look at Redis under way, shared by the scrapes that overlap it. */
  private looking: Promise<boolean> | undefined;
  /** When this process last took or renewed the lease; undefined: it does not hold it. */
  private renewedAt: number | undefined;
  /** When this process was last scraped, owner or not: what a lease it takes learns the interval from. */
  private scrapedAt: number | undefined;

  constructor(
    redis: RedisClient,
    private readonly keys: Keys,
  ) {
    this.redis = defineScripts(redis);
  }

  /**
   * True when this process owns the cluster-wide series for the scrape at `now`. The owner takes
   * its last renewal's answer for OWNER_RECHECK_MS, then renews (the lease then lasts three times
   * as long as since the renewal before); any other process looks at every scrape, so that it
   * takes a lease let go of at its next one. Redis unreachable: false.
   */
  owns(now: number): Promise<boolean> {
    const scraped = this.scrapedAt;
    this.scrapedAt = now;
    if (this.looking) return this.looking;
    const renewed = this.renewedAt;
    if (renewed !== undefined && now >= renewed && now - renewed < OWNER_RECHECK_MS) return Promise.resolve(true);
    // The interval the lease must outlast: since the last renewal, or, for a lease taken now, since
    // this process's last scrape (a replica scraped every minute that took a 15 s lease would lose
    // it before its next scrape, and the owners would alternate, each exporting the series).
    const since = renewed ?? scraped;
    const leaseMs = Math.min(OWNER_LEASE_MAX_MS, Math.max(OWNER_LEASE_MIN_MS, since === undefined ? 0 : 3 * (now - since)));
    const look = this.redis.holdLease(this.keys.metricsOwner, this.owner, Math.round(leaseMs)).then(
      (held) => held === 1,
      () => false,
    );
    this.looking = look;
    return look.then((held) => {
      this.renewedAt = held ? now : undefined;
      if (this.looking === look) this.looking = undefined;
      return held;
    });
  }

  /** Lets go of the lease if this process holds it (a replica shutting down), so that the next scrape of another takes it. */
  async release(): Promise<void> {
    this.renewedAt = undefined;
    await this.redis.releaseLease(this.keys.metricsOwner, this.owner);
  }
}
