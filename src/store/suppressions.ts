import type { Redis } from 'ioredis';
import type { Channel } from '../providers/types.js';

/** Where a suppression came from: the API, or a provider telling Herald the address is dead. */
export type SuppressionSource = 'manual' | 'postmark_hard_bounce' | 'postmark_inactive' | 'postmark_unsubscribe' | 'twilio_opt_out';

export interface Suppression {
  channel: Channel;
  address: string;
  reason: string;
  source: SuppressionSource;
  /** The notice whose provider answer added it, for automatic suppressions. */
  noticeId?: string;
  createdAt: string;
}

/**
 * The suppression list: one hash per channel, address → record. Addresses are stored
 * normalized (email lower-case, phone E.164) by the callers.
 */
export class SuppressionStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  private key(channel: Channel): string {
    return `${this.prefix}:{sup}:${channel}`;
  }

  /** Adds a suppression; an automatic one never overwrites an existing record. Returns whether it was new. */
  async add(record: Suppression): Promise<boolean> {
    const { channel, address, ...stored } = record;
    const json = JSON.stringify(stored);
    if (record.source === 'manual') return (await this.redis.hset(this.key(channel), address, json)) === 1;
    return (await this.redis.hsetnx(this.key(channel), address, json)) === 1;
  }

  async get(channel: Channel, address: string): Promise<Suppression | null> {
    const raw = await this.redis.hget(this.key(channel), address);
    return raw ? { channel, address, ...(JSON.parse(raw) as Omit<Suppression, 'channel' | 'address'>) } : null;
  }

  async has(channel: Channel, address: string): Promise<boolean> {
    return (await this.redis.hexists(this.key(channel), address)) === 1;
  }

  /** Removes a suppression; false when there was none. */
  async remove(channel: Channel, address: string): Promise<boolean> {
    return (await this.redis.hdel(this.key(channel), address)) === 1;
  }
}
