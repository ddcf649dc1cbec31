import { createHash } from 'node:crypto';
import type { Keys } from './keys.js';
import type { RedisClient } from './redis.js';

/**
 * The signatures of provider webhooks that may be accepted once (Mailgun's, which do not cover
 * the event): each claimed with SET NX for as long as it is honoured, shared by every web process.
 */
export class WebhookOnceStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** True the first time `identity` is claimed within `forMs`; false for a replay. */
  async claim(provider: string, identity: string, forMs: number): Promise<boolean> {
    return (await this.redis.set(this.key(provider, identity), '1', 'PX', forMs, 'NX')) === 'OK';
  }

  /** Lets `identity` be claimed again: its request was not recorded, so the provider's retry must be taken. */
  async release(provider: string, identity: string): Promise<void> {
    await this.redis.del(this.key(provider, identity));
  }

  private key(provider: string, identity: string): string {
    return this.keys.webhookOnce(provider, createHash('sha256').update(identity).digest('base64url'));
  }
}
