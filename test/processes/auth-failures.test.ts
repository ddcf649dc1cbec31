/**
 * The failure limiter limits guessing, not users, through a real web process and real Redis: a
 * right key or token is never refused for what other requests from its address did; failing
 * attempts past the limit get 429, a concurrent burst included; behind a proxy the address is
 * the one the trusted hop saw; and the limiter's keys stay short whatever a request carries.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientBucket } from '../../src/http/auth-failures.js';
import { plainRedis, TEST_API_KEY, testEnv, testPrefix } from '../helpers/env.js';
import { cleanUp } from '../helpers/herald.js';
import { WebProcess } from '../helpers/web-process.js';

const ADMIN_TOKEN = 'admin-token-of-the-limiter-test';
const LIMIT = 20;
const prefix = testPrefix('authfail');
let web: WebProcess;
let client = 0;
/** A client address of its own for each case, as the trusted proxy (this test) reports it. */
const nextClient = () => `198.51.100.${++client}`;

beforeAll(async () => {
  web = await new WebProcess(
    testEnv(prefix, { HERALD_AUTH_FAILURES_PER_MINUTE: String(LIMIT), HERALD_ADMIN_TOKEN: ADMIN_TOKEN, HERALD_TRUST_PROXY: 'true' }),
  ).start();
});
afterAll(async () => {
  await web?.stop('SIGTERM');
  await cleanUp(prefix);
});

const stats = (key: string, forwardedFor: string) =>
  web.call('GET', '/v1/stats', undefined, { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': forwardedFor } });

describe('the failure limiter', () => {
  it('accepts a valid key after 50 failures from the same address, while the failures past the limit get 429', async () => {
    const address = nextClient();
    const answers: number[] = [];
    for (let i = 0; i < 50; i += 1) answers.push((await stats(`wrong-key-number-${i}-xxxxxxxx`, address)).status);
    expect(answers.slice(0, LIMIT).every((s) => s === 401)).toBe(true);
    expect(answers.slice(LIMIT).every((s) => s === 429)).toBe(true);
    expect((await stats(TEST_API_KEY, address)).status).toBe(200);
    // And a wrong one is still refused 429, with its Retry-After.
    const refused = await stats('still-a-wrong-key-xxxxxxxx', address);
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ error: { code: 'rate_limited' } });
  });

  it('gives a concurrent burst of 81 guesses no more than the limit of 401s', async () => {
    const address = nextClient();
    const answers = await Promise.all(Array.from({ length: 81 }, (_, i) => stats(`burst-guess-${i}-xxxxxxxxxx`, address)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(LIMIT);
    expect(statuses.filter((s) => s === 429)).toHaveLength(81 - LIMIT);
  });

  it('lets the admin token through after failed logins from its address', async () => {
    const address = nextClient();
    for (let i = 0; i < LIMIT + 5; i += 1) {
      await web.call('GET', '/admin/notices', undefined, {
        headers: { authorization: `Bearer wrong-admin-token-${i}`, 'x-forwarded-for': address },
      });
    }
    const wrong = await web.call('GET', '/admin/notices', undefined, {
      headers: { authorization: 'Bearer wrong-again-xxxxxxxx', 'x-forwarded-for': address },
    });
    expect(wrong.status).toBe(429);
    const right = await web.call('GET', '/admin/notices', undefined, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-forwarded-for': address },
    });
    expect(right.status).toBe(200);
  });

  it('with HERALD_TRUST_PROXY=true, counts the address the nearest proxy saw, not one the client wrote', async () => {
    const address = nextClient();
    const answers: number[] = [];
    // The client writes a new address of its own before the proxy's every time: it escapes nothing.
    for (let i = 0; i < LIMIT + 2; i += 1) answers.push((await stats(`spoofing-guess-${i}-xxxxxx`, `203.0.113.${i}, ${address}`)).status);
    expect(answers.slice(LIMIT)).toEqual([429, 429]);
    // Nor can it lock out another client by writing that client's address first.
    const victim = nextClient();
    for (let i = 0; i < LIMIT + 2; i += 1) await stats(`framing-guess-${i}-xxxxxxx`, `${victim}, ${nextClient()}`);
    expect((await stats('a-wrong-key-of-the-victim-xx', victim)).status).toBe(401);
  });

  it('keeps its keys short whatever the forwarded address holds', async () => {
    await stats('a-wrong-key-with-a-long-address', `${'f'.repeat(8000)}`);
    await stats('a-wrong-key-with-a-v6-address', '2001:db8:1234:5678:9abc:def0:1234:5678');
    const redis = plainRedis();
    try {
      const keys = await redis.keys(`${prefix}:{rl}:authfail:*`);
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) expect(key.length).toBeLessThan(prefix.length + 80);
      expect(keys).toContain(`${prefix}:{rl}:authfail:2001:db8:1234:5678::/64`);
      expect(keys).toContain(`${prefix}:{rl}:authfail:unknown`);
    } finally {
      redis.disconnect();
    }
  });
});

describe('clientBucket', () => {
  it('keeps IPv4, folds IPv4-mapped IPv6 to IPv4, IPv6 to its /64, and anything else to one bucket', () => {
    expect(clientBucket('192.0.2.7')).toBe('192.0.2.7');
    expect(clientBucket('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(clientBucket('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientBucket('2001:0db8:0000:0001:ffff::1')).toBe('2001:db8:0:1::/64');
    expect(clientBucket('::1')).toBe('0:0:0:0::/64');
    expect(clientBucket('not an address')).toBe('unknown');
    expect(clientBucket('x'.repeat(9000))).toBe('unknown');
  });
});
