/**
 * Support finds a notice by its recipient's address: `email=` / `phone=` on GET /v1/notices,
 * /admin/notices and `herald notices list`, live from the shards' address indexes in Redis and,
 * once Redis let go of the notice, from the archive's recipient index. Neither holds the address,
 * nor a plain SHA-256 of it that a dictionary reverses: only the HMAC of the address lookup.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openArchive } from '../../src/archive/open.js';
import { AddressLookup } from '../../src/notice/address-lookup.js';
import { shardOfNoticeId } from '../../src/notice/ids.js';
import { indexAddressesOnce } from '../../src/store/address-index.js';
import { sleep, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { runCliProcess } from '../helpers/web-process.js';

const ADMIN = 'admin-token-of-the-address-lookup-test';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

let stack: Stack;
let tenantB: string;

beforeAll(async () => {
  stack = await startStack({
    prefix: testPrefix('address'),
    env: {
      HERALD_ADMIN_TOKEN: ADMIN,
      HERALD_NOTICE_KEEP_HOT: '0s',
      HERALD_LOG_KEEP_HOT: '0s',
      HERALD_MIRROR_INTERVAL_MS: '200',
      HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
    },
  });
  const made = await runCliProcess(['keys', 'create', '--tenant', 'tenant-b', '--scopes', 'send,read'], stack.env);
  expect(made.code, made.stderr).toBe(0);
  tenantB = made.stdout.trim();
});
afterAll(async () => stack?.close());

/** The IDs GET /v1/notices lists for `query`, with the test key (tenant default) or another. */
async function listed(query: string, key?: string): Promise<string[]> {
  const answer = await stack.web.call('GET', `/v1/notices?${query}`, undefined, key ? { authorization: `Bearer ${key}` } : undefined);
  expect(answer.statusCode, answer.body).toBe(200);
  return (answer.json().notices as { id: string }[]).map((n) => n.id);
}

async function create(recipient: Record<string, string>, key?: string, deadlineInSeconds = 120): Promise<string> {
  const answer = await stack.web.call(
    'POST',
    '/v1/notices',
    noticeBody({ recipient: { id: `player-${sha256(recipient.email!).slice(0, 12)}`, ...recipient }, deadlineInSeconds }),
    key ? { authorization: `Bearer ${key}` } : undefined,
  );
  expect(answer.statusCode, answer.body).toBe(202);
  return answer.json().id as string;
}

describe('a live notice', () => {
  it('is found by its email address in any case and by its phone, within its tenant, through the HMAC alone', async () => {
    // Email never confirmed: the notices stay live (their deadline is two minutes away).
    const phone = '+12025550143';
    const first = await create({ email: 'never+Case.One@Example.com', phone });
    await sleep(5);
    const second = await create({ email: 'never+case.two@example.com', phone });
    const otherTenant = await create({ email: 'never+case.one@example.com' }, tenantB);

    expect(await listed('email=NEVER%2Bcase.one%40example.COM')).toEqual([first]);
    expect(await listed(`phone=${encodeURIComponent(phone)}`)).toEqual([second, first]);
    expect(await listed(`email=never%2Bcase.two%40example.com&phone=${encodeURIComponent(phone)}`)).toEqual([second]);
    expect(await listed('email=never%2Bcase.two%40example.com&phone=%2B12025550199')).toEqual([]);
    expect(await listed('email=never%2Bcase.one%40example.com', tenantB)).toEqual([otherTenant]);

    // The admin page lists every tenant's.
    const page = await stack.web.call('GET', '/admin/notices?email=never%2Bcase.one%40example.com', undefined, {
      authorization: `Bearer ${ADMIN}`,
    });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(first);
    expect(page.body).toContain(otherTenant);
    expect(page.body).not.toContain(second);

    // What Redis indexes: the HMAC under the address key, never the address or its plain SHA-256.
    const lookup = new AddressLookup(stack.config.addressKeys);
    const members = await stack.web.redis.zrange(stack.web.store.keys.addresses(shardOfNoticeId(first)!), 0, '-1');
    const hmac = lookup.hashOf('email', 'never+case.one@example.com');
    expect(members).toContain(`${hmac}:${first}`);
    for (const member of members) {
      expect(member).not.toContain('@');
      expect(member).not.toContain('12025550143');
      expect(member.split(':')[0]).not.toBe(sha256('never+case.one@example.com').slice(0, hmac.length));
      expect(member.split(':')[0]).not.toBe(sha256('email:never+case.one@example.com').slice(0, hmac.length));
    }
  });

  it('refuses an address that is not one with 400 validation_failed', async () => {
    for (const query of ['email=not-an-address', `phone=12345`, `phone=${encodeURIComponent('+1 202 555 0143')}`]) {
      const answer = await stack.web.call('GET', `/v1/notices?${query}`);
      expect(answer.statusCode, query).toBe(400);
      expect(answer.json().error.code).toBe('validation_failed');
    }
  });
});

describe('a notice Redis let go of', () => {
  it('is found by its email address and its phone through the archive, by the API and by `herald notices list`', async () => {
    const phone = '+12025550177';
    const id = await create({ email: 'delivered+0ms+Retired@example.com', phone }, undefined, 60);
    await waitFor(async () => (await stack.web.store.get(id)) === null, 30_000, `${id} to retire`);
    // Its members left the live index with it.
    const members = await stack.web.redis.zrange(stack.web.store.keys.addresses(shardOfNoticeId(id)!), 0, '-1');
    expect(members.filter((m) => m.endsWith(`:${id}`))).toEqual([]);

    expect(await listed('email=delivered%2B0ms%2Bretired%40EXAMPLE.com')).toEqual([id]);
    expect(await listed(`phone=${encodeURIComponent(phone)}`)).toEqual([id]);
    expect(await listed('email=delivered%2B0ms%2Bretired%40example.com', tenantB)).toEqual([]);

    const run = await runCliProcess(['notices', 'list', '--email', 'Delivered+0ms+Retired@example.com', '--json'], stack.env);
    expect(run.code, run.stderr).toBe(0);
    const rows = run.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { id: string; retired: boolean });
    expect(rows).toEqual([expect.objectContaining({ id, retired: true })]);

    // The archive's pointers are named by the HMAC, and hold no address.
    const archive = openArchive(stack.config);
    try {
      const names: string[] = [];
      for await (const key of archive.storage.list(`${archive.heraldPrefix}/addresses/`)) names.push(key);
      const lookup = new AddressLookup(stack.config.addressKeys);
      expect(names.filter((n) => n.endsWith(`/${id}.json.gz`)).sort()).toEqual(
        [lookup.hashOf('email', 'delivered+0ms+retired@example.com'), lookup.hashOf('phone', phone)]
          .map((hash) => expect.stringContaining(`/${hash}/${id}.json.gz`))
          .sort(),
      );
      for (const name of names) expect(name).not.toContain(sha256('delivered+0ms+retired@example.com').slice(0, 32));
      for (const name of names) {
        const object = await archive.storage.get(name);
        expect(object?.body.toString('latin1')).not.toContain('example.com');
      }
    } finally {
      await archive.close();
    }
  });
});

describe('live notices of before the address index', () => {
  it('are added to it once, and a notice gone from Redis is not', async () => {
    const { redis, store } = stack.web;
    const kept = await create({ email: 'never+upgrade@example.com' });
    const gone = await create({ email: 'never+upgrade@example.com' });
    const lookup = new AddressLookup(stack.config.addressKeys);
    const member = (id: string) => `${lookup.hashOf('email', 'never+upgrade@example.com')}:${id}`;
    // As an earlier version left them: in no address index, one of them already let go of.
    for (const id of [kept, gone]) await redis.zrem(store.keys.addresses(shardOfNoticeId(id)!), member(id));
    await redis.del(store.keys.notice(gone));
    await redis.del(store.keys.addressesIndexed);
    expect(await listed('email=never%2Bupgrade%40example.com')).toEqual([]);

    expect(await indexAddressesOnce(redis, store.keys, lookup, Date.now())).toBeGreaterThanOrEqual(1);
    expect(await listed('email=never%2Bupgrade%40example.com')).toEqual([kept]);
    expect(await redis.zscore(store.keys.addresses(shardOfNoticeId(gone)!), member(gone))).toBeNull();
    expect(await indexAddressesOnce(redis, store.keys, lookup, Date.now())).toBeNull();
  });
});
