import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Keys } from './keys.js';
import type { RedisClient } from './redis.js';
import { defineScripts, type HeraldScripts } from './scripts.js';

/** A scrape asks Redis who owns the cluster-wide series at most this often; between, it keeps the last answer. */
export const OWNER_RECHECK_MS = 5_000;
/** The least and the most an owner's lease lasts: three of its scrape intervals, within these. */
export const OWNER_LEASE_MIN_MS = 15_000;
export const OWNER_LEASE_MAX_MS = 10 * 60_000;

/**
 * Which web process exports the cluster-wide series of /metrics (the figures read from Redis and
 * BullMQ, the same whichever process reads them), so that summing a series over the replicas
 * counts it once. The owner holds a lease in Redis (`holdLease-1.lua`), renewed by its scrapes:
 * it lasts three of the owner's scrape intervals (15 s to 10 min), so a replica that dies, or is
 * no longer scraped, lets go of it, and the next replica scraped takes it. A replica never
 * scraped never owns it. Times are the process's monotonic milliseconds (`performance.now()`).
 */
export class MetricsOwnerLease {
  private readonly redis: RedisClient & HeraldScripts;
  /** This process in the lease: host, pid and a random part (a pid recurs across containers). */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID()}`;
  private checked: { at: number; owns: Promise<boolean> } | undefined;

  constructor(
    redis: RedisClient,
    private readonly keys: Keys,
  ) {
    this.redis = defineScripts(redis);
  }

  /**
   * True when this process owns the cluster-wide series for the scrape at `now`: the answer of
   * the last look at Redis, taken again once it is OWNER_RECHECK_MS old (taking the lease when
   * it is free, renewing it when it is ours). Redis unreachable: false.
   */
  owns(now: number): Promise<boolean> {
    const last = this.checked;
    if (last && now - last.at < OWNER_RECHECK_MS && now >= last.at) return last.owns;
    const leaseMs = Math.min(OWNER_LEASE_MAX_MS, Math.max(OWNER_LEASE_MIN_MS, last ? 3 * (now - last.at) : 0));
    const owns = this.redis.holdLease(this.keys.metricsOwner, this.owner, Math.round(leaseMs)).then(
      (held) => held === 1,
      () => false,
    );
    this.checked = { at: now, owns };
    return owns;
  }

  /** Lets go of the lease if this process holds it (a replica shutting down), so that the next scrape of another takes it. */
  async release(): Promise<void> {
    this.checked = undefined;
    await this.redis.releaseLease(this.keys.metricsOwner, this.owner);
  }
}
