import type { Keys } from './keys.js';
import type { RedisClient } from './redis.js';

/** What a key may do: `send` (create, batch, cancel), `read` (view, events, list, stats), `manage` (policies, suppressions, event endpoints). */
export const SCOPES = ['send', 'read', 'manage'] as const;
export type Scope = (typeof SCOPES)[number];

/** An API key as stored: its secret only as a SHA-256. */
export interface ApiKeyRecord {
  id: string;
  tenant: string;
  scopes: Scope[];
  name: string;
  secretSha256: string;
  createdAt: number;
  revokedAt: number | undefined;
  lastUsedAt: number | undefined;
}

/** The API keys `herald keys create` makes, shared by every web process through Redis. */
export class ApiKeyStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  async create(record: ApiKeyRecord): Promise<void> {
    await this.redis
      .multi()
      .hset(this.keys.apiKey(record.id), {
        tenant: record.tenant,
        scopes: record.scopes.join(','),
        name: record.name,
        secretSha256: record.secretSha256,
        createdAt: String(record.createdAt),
      })
      .set(this.keys.apiKeyBySecret(record.secretSha256), record.id)
      .zadd(this.keys.apiKeys, record.createdAt, record.id)
      .exec();
  }

  /** The key whose secret has this SHA-256, revoked or not; undefined for none. */
  async bySecret(secretSha256: string): Promise<ApiKeyRecord | undefined> {
    const id = await this.redis.get(this.keys.apiKeyBySecret(secretSha256));
    return id === null ? undefined : this.get(id);
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    return parse(id, await this.redis.hgetall(this.keys.apiKey(id)));
  }

  /** Every key, oldest first. */
  async list(): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.zrange(this.keys.apiKeys, 0, '-1');
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((r): r is ApiKeyRecord => r !== undefined);
  }

  /** Marks a key revoked (kept, to be listed as such); false when there is no such key. */
  async revoke(id: string, at: number): Promise<boolean> {
    const key = this.keys.apiKey(id);
    if ((await this.redis.exists(key)) === 0) return false;
    await this.redis.hsetnx(key, 'revokedAt', String(at));
    return true;
  }

  /** Records when a key was last used (the web writes it at most once a minute per key). */
  async touch(id: string, at: number): Promise<void> {
    await this.redis.hset(this.keys.apiKey(id), 'lastUsedAt', String(at));
  }
}

function parse(id: string, hash: Record<string, string>): ApiKeyRecord | undefined {
  if (hash.secretSha256 === undefined) return undefined;
  return {
    id,
    tenant: hash.tenant ?? 'default',
    scopes: (hash.scopes ?? '').split(',').filter((s): s is Scope => (SCOPES as readonly string[]).includes(s)),
    name: hash.name ?? '',
    secretSha256: hash.secretSha256,
    createdAt: Number(hash.createdAt),
    revokedAt: hash.revokedAt === undefined ? undefined : Number(hash.revokedAt),
    lastUsedAt: hash.lastUsedAt === undefined ? undefined : Number(hash.lastUsedAt),
  };
}
