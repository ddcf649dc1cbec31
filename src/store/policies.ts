import type { Redis } from 'ioredis';
import { Keys } from './keys.js';
import { defineScripts, type HeraldScripts } from './scripts.js';

/** A recipient's consent and region, versioned: every change makes a new version. */
export interface RecipientPolicy {
  version: number;
  consent: { email: boolean; sms: boolean };
  region: string | undefined;
  updatedAt: string | undefined;
}

export interface RecipientPolicyInput {
  consent: { email: boolean; sms: boolean };
  region?: string;
}

/**
 * A recipient nobody has written a policy for: version 0, both channels allowed. Notices are
 * service messages the caller is entitled to send; consent is withdrawn by writing a policy.
 */
export const DEFAULT_POLICY: RecipientPolicy = Object.freeze({
  version: 0,
  consent: Object.freeze({ email: true, sms: true }),
  region: undefined,
  updatedAt: undefined,
});

export class PolicyStore {
  private readonly redis: Redis & HeraldScripts;
  private readonly keys: Keys;

  constructor(redis: Redis, prefix: string) {
    this.redis = defineScripts(redis);
    this.keys = new Keys(prefix);
  }

  async put(recipientId: string, input: RecipientPolicyInput, at: string): Promise<number> {
    const policy = { consent: input.consent, region: input.region ?? null };
    return Number(await this.redis.putRecipientPolicy(this.keys.recipientPolicy(recipientId), JSON.stringify(policy), at));
  }

  /** The current policy, or a given version of it; DEFAULT_POLICY when none was written. */
  async get(recipientId: string, version?: number): Promise<RecipientPolicy> {
    const raw = await this.redis.hget(this.keys.recipientPolicy(recipientId), version === undefined ? 'current' : `v${version}`);
    if (!raw) return DEFAULT_POLICY;
    const stored = JSON.parse(raw) as {
      version: number;
      consent: { email: boolean; sms: boolean };
      region: string | null;
      updatedAt: string;
    };
    return { version: stored.version, consent: stored.consent, region: stored.region ?? undefined, updatedAt: stored.updatedAt };
  }
}
