import type { RedisClient } from './redis.js';
import type { Channel } from '../providers/types.js';
import { Keys } from './keys.js';
import { defineScripts, type HeraldScripts } from './scripts.js';

/** Where a suppression came from: the API, or a provider telling Herald the address is dead. */
export type SuppressionSource =
  | 'manual'
  | 'postmark_hard_bounce'
  | 'postmark_inactive'
  | 'postmark_unsubscribe'
  | 'twilio_opt_out'
  | 'sendgrid_hard_bounce'
  | 'sendgrid_dropped'
  | 'sendgrid_unsubscribe'
  | 'ses_hard_bounce'
  | 'ses_complaint'
  | 'mailgun_bounce'
  | 'mailgun_suppressed'
  | 'aws_sms_opt_out'
  | 'infrai_suppressed';

export interface Suppression {
  channel: Channel;
  address: string;
  reason: string;
  source: SuppressionSource;
  /** The notice whose provider answer added it, for automatic suppressions. */
  noticeId?: string;
  createdAt: string;
}

/** A manual suppression was refused: the channel's list holds HERALD_SUPPRESSIONS_MAX addresses. */
export class SuppressionListFullError extends Error {
  constructor(
    readonly channel: Channel,
    readonly max: number,
  ) {
    super(`the ${channel} suppression list holds ${max} addresses, its bound (HERALD_SUPPRESSIONS_MAX)`);
    this.name = 'SuppressionListFullError';
  }
}

/**
 * The suppression list: one hash per channel, address → record. Addresses are stored
 * normalized (email lower-case, phone E.164) by the callers. Entries stay until lifted: a
 * provider's hard bounce or opt-out does not lapse by itself. The API may add new addresses
 * while the channel holds fewer than `max`; providers' ones are always recorded (addSuppression-1.lua).
 */
export class SuppressionStore {
  private readonly redis: RedisClient & HeraldScripts;
  private readonly max: number;
  private readonly keys: Keys;

  constructor(redis: RedisClient, prefix: string, options: { max?: number } = {}) {
    this.redis = defineScripts(redis);
    this.keys = new Keys(prefix);
    this.max = options.max ?? 0;
  }

  private key(channel: Channel): string {
    return this.keys.suppressions(channel);
  }

  /**
   * Adds a suppression; an automatic one never overwrites an existing record. Returns whether it
   * was new; throws SuppressionListFullError for a new manual address when the list is full.
   */
  async add(record: Suppression): Promise<boolean> {
    const { channel, address, ...stored } = record;
    const manual = record.source === 'manual';
    const reply = await this.redis.addSuppression(this.key(channel), address, JSON.stringify(stored), manual ? 'manual' : 'auto', this.max);
    if (reply === -1) throw new SuppressionListFullError(channel, this.max);
    return reply === 1;
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
