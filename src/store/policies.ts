import type { RedisClient } from './redis.js';
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

/** How many versions of a recipient's policy are kept when HERALD_POLICY_VERSIONS_KEPT is not set. */
export const DEFAULT_POLICY_VERSIONS_KEPT = 50;

/**
 * Recipient policies, one hash per recipient of each tenant (the recipient IDs are the tenant's). Notices record the version they used; the last
 * `versionsKept` versions stay readable (for `herald policy replay`), older ones are dropped as
 * new ones are written, so that a recipient's hash does not grow with every change.
 */
export class PolicyStore {
  private readonly redis: RedisClient & HeraldScripts;
  private readonly keys: Keys;
  private readonly versionsKept: number;

  constructor(redis: RedisClient, prefix: string, options: { versionsKept?: number } = {}) {
    this.redis = defineScripts(redis);
    this.keys = new Keys(prefix);
    this.versionsKept = options.versionsKept ?? DEFAULT_POLICY_VERSIONS_KEPT;
  }

  /** Writes a new version of a tenant's recipient's policy; returns its number. */
  async put(recipientId: string, input: RecipientPolicyInput, at: string, tenant = 'default'): Promise<number> {
    const policy = { consent: input.consent, region: input.region ?? null };
    return Number(
      await this.redis.putRecipientPolicy(this.keys.recipientPolicy(recipientId, tenant), JSON.stringify(policy), at, this.versionsKept),
    );
  }

  /** The current policy; DEFAULT_POLICY when none was written. */
  async get(recipientId: string, tenant = 'default'): Promise<RecipientPolicy> {
    return parsePolicy(await this.redis.hget(this.keys.recipientPolicy(recipientId, tenant), 'current')) ?? DEFAULT_POLICY;
  }

  /** A given version of the policy (0: DEFAULT_POLICY); null when that version is no longer kept, or never was. */
  async version(recipientId: string, version: number, tenant = 'default'): Promise<RecipientPolicy | null> {
    if (version === 0) return DEFAULT_POLICY;
    return parsePolicy(await this.redis.hget(this.keys.recipientPolicy(recipientId, tenant), `v${version}`));
  }
}

function parsePolicy(raw: string | null): RecipientPolicy | null {
  if (!raw) return null;
  const stored = JSON.parse(raw) as {
    version: number;
    consent: { email: boolean; sms: boolean };
    region: string | null;
    updatedAt: string;
  };
  return { version: stored.version, consent: stored.consent, region: stored.region ?? undefined, updatedAt: stored.updatedAt };
}
