/**
 * Keys with scopes and tenants, through the compiled CLI and two web processes on real Redis:
 * `herald keys create` prints a secret once; a key does only what its scopes say, and sees only
 * its tenant's notices, lists, stats, idempotency keys and recipient policies; `herald keys
 * revoke` is refused by every web process within a second.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plainRedis, sleep, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { cleanUp, noticeBody } from '../helpers/herald.js';
import { runCliProcess, WebProcess } from '../helpers/web-process.js';

const prefix = testPrefix('tenants');
const env = testEnv(prefix);
let first: WebProcess;
let second: WebProcess;

async function makeKey(tenant: string, scopes: string, name = 'test'): Promise<string> {
  const run = await runCliProcess(['keys', 'create', '--tenant', tenant, '--scopes', scopes, '--name', name], env);
  expect(run.code, run.stderr).toBe(0);
  const secret = run.stdout.trim();
  expect(secret).toMatch(/^hk_[A-Za-z0-9_-]{40,}$/);
  return secret;
}
const as =
  (web: WebProcess, key: string) =>
  (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    web.call(method, path, body, { headers: { authorization: `Bearer ${key}`, ...headers } });

beforeAll(async () => {
  first = await new WebProcess(env).start();
  second = await new WebProcess(env).start();
});
afterAll(async () => {
  await first?.stop('SIGTERM');
  await second?.stop('SIGTERM');
  await cleanUp(prefix);
});

describe('keys with scopes', () => {
  it('keep only the SHA-256 of the secret, and list without secrets', async () => {
    const secret = await makeKey('acme', 'send,read', 'the game server');
    const listed = await runCliProcess(['keys', 'list', '--json'], env);
    expect(listed.stdout).not.toContain(secret);
    const key = listed.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((k) => k.name === 'the game server');
    expect(key).toMatchObject({ tenant: 'acme', scopes: ['send', 'read'], revokedAt: null });
    const redis = plainRedis();
    try {
      const stored = await redis.keys(`${prefix}:{keys}:*`);
      for (const name of stored) {
        const type = await redis.type(name);
        const values = type === 'hash' ? Object.values(await redis.hgetall(name)) : type === 'string' ? [await redis.get(name)] : [];
        expect(values.join(' ')).not.toContain(secret);
      }
    } finally {
      redis.disconnect();
    }
  });

  it('refuse what the scopes do not allow with 403 forbidden', async () => {
    const reader = as(first, await makeKey('acme', 'read'));
    const created = await reader('POST', '/v1/notices', noticeBody());
    expect(created.status).toBe(403);
    expect(created.json.error.code).toBe('forbidden');
    expect((await reader('GET', '/v1/stats')).status).toBe(200);
    const sender = as(first, await makeKey('acme', 'send'));
    expect((await sender('GET', '/v1/notices')).status).toBe(403);
    expect((await sender('PUT', '/v1/recipients/r1/policy', { consent: { email: true, sms: false } })).status).toBe(403);
    expect((await sender('POST', '/v1/notices', noticeBody())).status).toBe(202);
  });
});

describe('tenants', () => {
  it("keep each tenant's notices, lists, stats and idempotency keys to itself", async () => {
    const a = as(first, await makeKey('tenant-a', 'send,read,manage'));
    const b = as(second, await makeKey('tenant-b', 'send,read,manage'));
    const mine = await a('POST', '/v1/notices', noticeBody({ category: 'a-only' }), { 'idempotency-key': 'shared-key-1' });
    expect(mine.status).toBe(202);
    const id = mine.json.id as string;
    // Tenant B: not found, its events neither, its cancel neither.
    for (const path of [`/v1/notices/${id}`, `/v1/notices/${id}/events`]) expect((await b('GET', path)).status, path).toBe(404);
    expect((await b('POST', `/v1/notices/${id}/cancel`)).status).toBe(404);
    expect((await a('GET', `/v1/notices/${id}`)).json).toMatchObject({ id, tenant: 'tenant-a' });
    // The same idempotency key in tenant B makes a notice of its own.
    const theirs = await b('POST', '/v1/notices', noticeBody({ category: 'b-only' }), { 'idempotency-key': 'shared-key-1' });
    expect(theirs.status).toBe(202);
    expect(theirs.json.id).not.toBe(id);
    // And within a tenant, another of its keys replays it.
    const again = await as(second, await makeKey('tenant-a', 'send,read'))('POST', '/v1/notices', noticeBody({ category: 'a-only' }), {
      'idempotency-key': 'shared-key-1',
    });
    expect(again.status).toBe(200);
    expect(again.json.id).toBe(id);
    const listed = (await b('GET', '/v1/notices')).json.notices as { id: string; tenant: string }[];
    expect(listed.map((n) => n.id)).toEqual([theirs.json.id]);
    const stats = (await b('GET', '/v1/stats')).json as { notices: number };
    expect(stats.notices).toBe(1);
    expect(((await a('GET', '/v1/stats')).json as { notices: number }).notices).toBe(1);
    // The decision log says whose notice it is.
    const events = (await a('GET', `/v1/notices/${id}/events`)).json.events as { type: string; tenant?: string }[];
    expect(events.find((e) => e.type === 'notice.accepted')).toMatchObject({ tenant: 'tenant-a' });
  });

  it('keep recipient policies per tenant', async () => {
    const a = as(first, await makeKey('policy-a', 'manage'));
    const b = as(first, await makeKey('policy-b', 'manage'));
    expect((await a('PUT', '/v1/recipients/player-7/policy', { consent: { email: true, sms: false } })).json).toEqual({ version: 1 });
    expect((await b('GET', '/v1/recipients/player-7/policy')).json).toMatchObject({ version: 0, consent: { sms: true } });
    expect((await a('GET', '/v1/recipients/player-7/policy')).json).toMatchObject({ version: 1, consent: { sms: false } });
  });

  it('let HERALD_API_KEYS go on as tenant default with every scope', async () => {
    const created = await first.call('POST', '/v1/notices', noticeBody());
    expect(created.status).toBe(202);
    expect((await first.call('GET', `/v1/notices/${created.json.id}`)).json).toMatchObject({ tenant: 'default' });
    expect((await first.call('PUT', '/v1/recipients/r2/policy', { consent: { email: true, sms: true } })).status).toBe(200);
  });
});

describe('a revoked key', () => {
  it('is refused by every web process within a second', async () => {
    const secret = await makeKey('acme', 'read', 'to be revoked');
    for (const web of [first, second]) expect((await as(web, secret)('GET', '/v1/stats')).status).toBe(200);
    const listed = (await runCliProcess(['keys', 'list', '--json'], env)).stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; name: string; lastUsedAt: string | null })
      .find((k) => k.name === 'to be revoked')!;
    // Its use is visible, without its secret anywhere.
    expect(listed.lastUsedAt).not.toBeNull();
    const id = listed.id;
    const revoked = await runCliProcess(['keys', 'revoke', id], env);
    expect(revoked.code).toBe(0);
    await sleep(1_100);
    for (const web of [first, second]) expect((await as(web, secret)('GET', '/v1/stats')).status).toBe(401);
    await waitFor(
      async () => (await runCliProcess(['keys', 'list', '--json'], env)).stdout.includes('"revokedAt":"'),
      5_000,
      'the key listed as revoked',
    );
  });
});
