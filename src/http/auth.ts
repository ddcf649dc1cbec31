import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Clock } from '../clock.js';
import { sha256 as digest } from '../digest.js';
import { SCOPES, type ApiKeyStore, type Scope } from '../store/api-keys.js';
import { HttpError } from './errors.js';

/** Who a request acts as: the key's stable ID, its tenant, what it may do. */
export interface Caller {
  keyId: string;
  tenant: string;
  scopes: readonly Scope[];
}

/** The tenant of every key of HERALD_API_KEYS, and of every notice made before tenants. */
export const DEFAULT_TENANT = 'default';

/**
 * How long a key read from Redis is trusted by one web process: a revoked key is refused by
 * every process within this, and a flood of one unknown secret costs one lookup per window.
 */
export const KEY_CACHE_MS = 1_000;
/** How often a key's `lastUsedAt` is written, at most, per process. */
const TOUCH_EVERY_MS = 60_000;
/** Secrets remembered by one process (known or unknown); the oldest go first past this. */
const MAX_CACHED = 10_000;

/**
 * Verifies `Authorization: Bearer <key>`: a key of HERALD_API_KEYS (compared in constant time
 * over digests; tenant `default`, every scope), or one `herald keys create` made (found by the
 * SHA-256 of the secret, revoked ones refused). Only a digest of a secret is ever kept.
 */
export class ApiKeyVerifier {
  private readonly fixed: { digest: Buffer; id: string }[];
  private readonly cache = new Map<string, { caller: Caller | null; until: number }>();
  private readonly touched = new Map<string, number>();

  constructor(
    envKeys: readonly string[],
    private readonly store: ApiKeyStore,
    private readonly clock: Clock,
  ) {
    this.fixed = envKeys.map((key) => ({ digest: digest(key), id: envKeyId(key) }));
  }

  /** The caller the request's key names; throws HttpError `unauthorized` for none or a wrong one. */
  async verify(request: FastifyRequest): Promise<Caller> {
    const header = request.headers.authorization;
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) throw new HttpError('unauthorized', 'Send Authorization: Bearer <api key>.');
    const secret = match[1]!;
    const presented = digest(secret);
    let fixed: string | undefined;
    for (const key of this.fixed) if (timingSafeEqual(key.digest, presented)) fixed = key.id;
    if (fixed) return { keyId: fixed, tenant: DEFAULT_TENANT, scopes: SCOPES };
    // Herald's own keys have a prefix: nothing else is looked up.
    if (!secret.startsWith(SECRET_PREFIX)) throw new HttpError('unauthorized');
    const caller = await this.stored(presented.toString('hex'));
    if (!caller) throw new HttpError('unauthorized');
    return caller;
  }

  private async stored(sha: string): Promise<Caller | null> {
    const now = this.clock.now();
    const cached = this.cache.get(sha);
    if (cached && cached.until > now) return cached.caller;
    const record = await this.store.bySecret(sha);
    const caller = record && record.revokedAt === undefined ? { keyId: record.id, tenant: record.tenant, scopes: record.scopes } : null;
    this.cache.delete(sha);
    this.cache.set(sha, { caller, until: now + KEY_CACHE_MS });
    if (this.cache.size > MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
    if (caller && now - (this.touched.get(caller.keyId) ?? 0) > TOUCH_EVERY_MS) {
      this.touched.set(caller.keyId, now);
      if (this.touched.size > MAX_CACHED) this.touched.delete(this.touched.keys().next().value!);
      // Key use is visible without a write per request; a failed write is retried with the next use.
      this.store.touch(caller.keyId, now).catch(() => this.touched.delete(caller.keyId));
    }
    return caller;
  }
}

/** The stable ID of a key of HERALD_API_KEYS (its idempotency keys and rate limit are under it). */
export function envKeyId(key: string): string {
  return digest(`herald-api-key:${key}`).toString('hex').slice(0, 16);
}

/** What every secret `herald keys create` makes starts with. */
export const SECRET_PREFIX = 'hk_';

/** The SHA-256 (hex) of a secret, as the key store holds it. */
export function secretSha256(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** A 403 for a key that lacks the route's scope. */
export function forbidden(scope: Scope): HttpError {
  return new HttpError('forbidden', `This API key may not do this: it needs the "${scope}" scope.`, { scope });
}
