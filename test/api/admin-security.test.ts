import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { renderTimeline } from '../../src/http/timeline.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { configProblems, plainRedis, TEST_API_KEY, testConfig, testEnv, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const ADMIN = 'admin-token-security-0123456789';
const HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>';

/** The session cookie a successful login sets (`name=value`), and the whole Set-Cookie line. */
async function login(web: WebUnderTest, headers: Record<string, string> = {}, remoteAddress?: string) {
  const res = await web.app.inject({
    method: 'POST',
    url: '/admin/login',
    payload: `token=${ADMIN}&next=%2Fadmin%2Fqueues`,
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    ...(remoteAddress ? { remoteAddress } : {}),
  });
  const setCookie = String(res.headers['set-cookie'] ?? '');
  return { res, setCookie, cookie: setCookie.split(';')[0]! };
}

const admin = (web: WebUnderTest, method: 'GET' | 'POST' | 'PUT', url: string, headers: Record<string, string> = {}) =>
  web.app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN}`, ...headers } });

function expectAdminHeaders(res: LightMyRequestResponse) {
  const csp = String(res.headers['content-security-policy']);
  expect(csp).toContain("frame-ancestors 'none'");
  const scripts = /script-src ([^;]*)/.exec(csp)?.[1] ?? /default-src ([^;]*)/.exec(csp)![1]!;
  expect(scripts).not.toContain('unsafe-inline');
  expect(scripts).not.toContain('unsafe-eval');
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  expect(res.headers['x-frame-options']).toBe('DENY');
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.headers['www-authenticate']).toBeUndefined();
}

describe('admin pages and authentication', () => {
  let web: WebUnderTest;
  const prefix = testPrefix('adminsec');
  beforeAll(async () => {
    web = await startWebUnderTest(
      testConfig(prefix, {
        HERALD_ADMIN_TOKEN: ADMIN,
        HERALD_AUTH_FAILURES_PER_MINUTE: '3',
        HERALD_ADMIN_SESSION_TTL: '2h',
        HERALD_TRUST_PROXY: '10.9.0.0/16',
      }),
    );
  });
  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });

  describe('when a value in the decision log holds markup', () => {
    it('the timeline writes every value escaped: metadata, an injected entry’s type and fields', async () => {
      const created = await web.call('POST', '/v1/notices', noticeBody({ metadata: { event: HOSTILE } }));
      expect(created.statusCode).toBe(202);
      const id = created.json().id as string;
      // An entry as a compromised writer could leave it: markup in its type and in a field.
      const redis = plainRedis();
      try {
        const log = web.store.keys.log(Number.parseInt(id.slice(4, 6), 16));
        const at = new Date().toISOString();
        const inAttribute = await redis.xadd(
          log,
          '*',
          'type',
          'provider.error',
          'noticeId',
          id,
          'at',
          at,
          'seq',
          '3',
          'channel',
          '"email"',
          'kind',
          JSON.stringify(HOSTILE),
        );
        const inType = await redis.xadd(log, '*', 'type', `sms.${HOSTILE}`, 'noticeId', id, 'at', at, 'seq', '4');
        await redis.rpush(web.store.keys.events(id), inAttribute!, inType!);
      } finally {
        await redis.quit();
      }
      const page = await admin(web, 'GET', `/admin/notices/${id}`);
      expect(page.statusCode).toBe(200);
      expect(page.body).not.toMatch(/<script|<img/i);
      expect(page.body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
      // In an attribute too: the quote cannot close it.
      expect(page.body).toContain('data-kind="&quot;&gt;&lt;script&gt;');
      expectAdminHeaders(page);
      expect(String(page.headers['content-security-policy'])).toContain("default-src 'none'");
    });
    it('the renderer escapes seq too, whatever type it arrives with', () => {
      const at = new Date().toISOString();
      const view = {
        id: 'ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa',
        state: 'accepted',
        createdAt: at,
        deadline: at,
        plannedChecks: [],
        fallback: null,
        policyVersion: 0,
      } as unknown as Parameters<typeof renderTimeline>[0];
      const entry = { id: '1-0', seq: '<script>x</script>', type: 'notice.accepted', at, noticeId: view.id } as unknown as StoredEntry;
      const html = renderTimeline(view, [entry]).value;
      expect(html).not.toContain('<script>');
      expect(html).toContain('<span>#&lt;script&gt;x&lt;/script&gt;</span>');
      expect(html).toContain('<li id="entry-&lt;script&gt;x&lt;/script&gt;">');
    });
  });

  describe('security headers', () => {
    it('every admin answer carries a CSP without inline script, nosniff, no framing and no-store', async () => {
      expectAdminHeaders(await web.app.inject({ method: 'GET', url: '/admin/login' }));
      expectAdminHeaders(await admin(web, 'GET', '/admin/queues'));
      expectAdminHeaders(await admin(web, 'GET', '/admin/queues/api/queues'));
      expectAdminHeaders(await web.app.inject({ method: 'GET', url: '/admin/queues' }));
    });
    it('answers 401 without a WWW-Authenticate challenge, and still takes basic auth from tools', async () => {
      const res = await web.app.inject({ method: 'GET', url: '/admin/queues/api/queues' });
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBeUndefined();
      const basic = `Basic ${Buffer.from(`ops:${ADMIN}`).toString('base64')}`;
      expect((await web.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { authorization: basic } })).statusCode).toBe(
        200,
      );
    });
  });

  describe('when a state-changing admin request comes from another site', () => {
    const pause = '/admin/queues/api/queues/email-send/pause';
    it('refuses Bull Board’s API with 403 cross_site_request, by Origin or Sec-Fetch-Site, and the queue stays running', async () => {
      const crossSite: Record<string, string>[] = [
        { origin: 'https://evil.example' },
        { origin: 'null' },
        { 'sec-fetch-site': 'cross-site' },
        { 'sec-fetch-site': 'same-site', origin: 'http://localhost:80' },
      ];
      for (const headers of crossSite) {
        const res = await admin(web, 'PUT', pause, headers);
        expect(res.statusCode, JSON.stringify(headers)).toBe(403);
        expect(res.json().error.code).toBe('cross_site_request');
      }
      expect(await web.queues.emailSend.isPaused()).toBe(false);
    });
    it('lets the same origin, and tools that send neither header, through', async () => {
      expect((await admin(web, 'PUT', pause, { origin: 'http://localhost:80', 'sec-fetch-site': 'same-origin' })).statusCode).toBe(200);
      expect(await web.queues.emailSend.isPaused()).toBe(true);
      expect((await admin(web, 'PUT', '/admin/queues/api/queues/email-send/resume')).statusCode).toBe(200);
      expect(await web.queues.emailSend.isPaused()).toBe(false);
    });
    it('refuses a cross-site login (no session is opened) and a cross-site logout (the session lives on)', async () => {
      const forged = await login(web, { origin: 'https://evil.example' });
      expect(forged.res.statusCode).toBe(403);
      expect(forged.setCookie).toBe('');
      const { cookie } = await login(web);
      const logout = await web.app.inject({ method: 'POST', url: '/admin/logout', headers: { cookie, 'sec-fetch-site': 'cross-site' } });
      expect(logout.statusCode).toBe(403);
      expect((await web.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { cookie } })).statusCode).toBe(200);
    });
  });

  describe('the login session', () => {
    it('is a new random value per login, HttpOnly, SameSite=Strict, with a Max-Age, kept in Redis under the same TTL', async () => {
      const first = await login(web);
      const second = await login(web);
      expect(first.res.statusCode).toBe(303);
      expect(first.cookie).not.toBe(second.cookie);
      expect(first.setCookie).not.toContain(ADMIN);
      expect(first.setCookie).toMatch(/; Max-Age=7200;/);
      expect(first.setCookie).toMatch(/HttpOnly/);
      expect(first.setCookie).toMatch(/SameSite=Strict/);
      expect(first.setCookie).not.toMatch(/Secure/);
      const redis = plainRedis();
      try {
        const keys = await redis.keys(`${prefix}:{adm}:session:*`);
        expect(keys.length).toBeGreaterThanOrEqual(2);
        for (const key of keys) {
          const ttl = await redis.pttl(key);
          expect(ttl).toBeGreaterThan(0);
          expect(ttl).toBeLessThanOrEqual(7_200_000);
        }
        // The key is the hash of the cookie value, never the value itself.
        expect(keys.some((k) => k.includes(first.cookie.split('=')[1]!))).toBe(false);
      } finally {
        await redis.quit();
      }
    });
    it('ends when Redis lets go of it: the cookie then counts as no login', async () => {
      const { cookie } = await login(web);
      const redis = plainRedis();
      const before = new Set(await redis.keys(`${prefix}:{adm}:session:*`));
      await redis.del(...before);
      await redis.quit();
      const res = await web.app.inject({ method: 'GET', url: '/admin/queues', headers: { cookie, accept: 'text/html' } });
      expect(res.statusCode).toBe(303);
      expect(res.headers.location).toMatch(/^\/admin\/login/);
      expect(String(res.headers['set-cookie'])).toMatch(/Max-Age=0/);
    });
    it('ends at POST /admin/logout: the cookie is cleared and no longer opens anything', async () => {
      const { cookie } = await login(web);
      expect((await web.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { cookie } })).statusCode).toBe(200);
      const out = await web.app.inject({ method: 'POST', url: '/admin/logout', headers: { cookie, accept: 'text/html' } });
      expect(out.statusCode).toBe(303);
      expect(out.headers.location).toBe('/admin/login');
      expect(String(out.headers['set-cookie'])).toMatch(/^herald_admin=; .*Max-Age=0/);
      expect((await web.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { cookie } })).statusCode).toBe(401);
    });
    it('ends for every browser when the admin token changes', async () => {
      const { cookie } = await login(web);
      const rotated = await startWebUnderTest(testConfig(prefix, { HERALD_ADMIN_TOKEN: 'a-new-admin-token-0123456789' }));
      try {
        expect((await rotated.app.inject({ method: 'GET', url: '/admin/queues/api/queues', headers: { cookie } })).statusCode).toBe(401);
      } finally {
        await rotated.close();
      }
    });
    it('is Secure when the browser came over TLS through the trusted proxy, and not when an untrusted client claims it', async () => {
      const proxied = await login(web, { 'x-forwarded-proto': 'https' }, '10.9.0.5');
      expect(proxied.setCookie).toMatch(/; Secure/);
      const claimed = await login(web, { 'x-forwarded-proto': 'https' }, '192.0.2.7');
      expect(claimed.setCookie).not.toMatch(/Secure/);
    });
  });

  describe('when authentication keeps failing from one address', () => {
    const from = (web: WebUnderTest, remoteAddress: string, authorization: string, url = '/v1/recipients/r1/policy') =>
      web.app.inject({ method: 'GET', url, headers: { authorization }, remoteAddress });

    it('answers 429 rate_limited with Retry-After to wrong API keys past the limit, never to the right key', async () => {
      for (let i = 0; i < 3; i += 1) expect((await from(web, '198.51.100.1', 'Bearer wrong-key-0123456789')).statusCode).toBe(401);
      const limited = await from(web, '198.51.100.1', 'Bearer wrong-key-0123456789');
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error.code).toBe('rate_limited');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect((await from(web, '198.51.100.1', `Bearer ${TEST_API_KEY}`)).statusCode).toBe(200);
      expect((await from(web, '198.51.100.2', 'Bearer wrong-key-0123456789')).statusCode).toBe(401);
    });
    it('does not count requests without credentials', async () => {
      for (let i = 0; i < 6; i += 1) expect((await from(web, '198.51.100.3', '')).statusCode).toBe(401);
      expect((await from(web, '198.51.100.3', `Bearer ${TEST_API_KEY}`)).statusCode).toBe(200);
    });
    it('counts wrong admin tokens and wrong logins together, and still lets the right token in', async () => {
      const ip = '198.51.100.4';
      expect((await from(web, ip, 'Bearer wrong-admin-token-0123', '/admin/queues/api/queues')).statusCode).toBe(403);
      expect((await from(web, ip, `Basic ${Buffer.from('x:wrong').toString('base64')}`, '/admin/queues/api/queues')).statusCode).toBe(403);
      const wrongLogin = () =>
        web.app.inject({
          method: 'POST',
          url: '/admin/login',
          payload: 'token=wrong-admin-token',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          remoteAddress: ip,
        });
      expect((await wrongLogin()).statusCode).toBe(403);
      const limited = await wrongLogin();
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error.code).toBe('rate_limited');
      expect((await from(web, ip, 'Bearer wrong-admin-token-0123', '/admin/queues/api/queues')).statusCode).toBe(429);
      expect((await from(web, ip, `Bearer ${ADMIN}`, '/admin/queues/api/queues')).statusCode).toBe(200);
      expect((await login(web, {}, ip)).res.statusCode).toBe(303);
    });
    it('shares the count between web processes through Redis', async () => {
      const other = await startWebUnderTest(testConfig(prefix, { HERALD_ADMIN_TOKEN: ADMIN, HERALD_AUTH_FAILURES_PER_MINUTE: '3' }));
      try {
        const ip = '198.51.100.5';
        for (let i = 0; i < 3; i += 1) expect((await from(web, ip, 'Bearer wrong-key-0123456789')).statusCode).toBe(401);
        expect((await from(other, ip, 'Bearer another-wrong-key-0123')).statusCode).toBe(429);
        expect((await from(other, ip, `Bearer ${TEST_API_KEY}`)).statusCode).toBe(200);
      } finally {
        await other.close();
      }
    });
  });
});

describe('admin configuration', () => {
  it('refuses an API key equal to the admin token', () => {
    const problems = configProblems(
      testEnv(testPrefix('cfg'), { HERALD_API_KEYS: `${ADMIN},another-key-0123456789`, HERALD_ADMIN_TOKEN: ADMIN }),
    );
    expect(problems).toContain('HERALD_ADMIN_TOKEN must differ from every key in HERALD_API_KEYS');
  });

  it('names a HERALD_TRUST_PROXY it cannot read, and a metrics port equal to PORT', () => {
    const env = (extra: Record<string, string>) => testEnv(testPrefix('cfg'), extra);
    expect(configProblems(env({ HERALD_TRUST_PROXY: 'the load balancer' }))[0]).toMatch(/^HERALD_TRUST_PROXY="the load balancer" must be/);
    expect(loadConfig(env({ HERALD_TRUST_PROXY: '10.0.0.0/8, loopback' })).trustProxy).toBe('10.0.0.0/8,loopback');
    expect(loadConfig(env({ HERALD_TRUST_PROXY: '2' })).trustProxy).toBe(2);
    expect(configProblems(env({ PORT: '3100', HERALD_METRICS_PORT: '3100' }))).toEqual([
      'HERALD_METRICS_PORT=3100 must differ from PORT: it is a listener of its own',
    ]);
    expect(configProblems(env({ HERALD_METRICS_TOKEN: 'short' }))).toEqual(['HERALD_METRICS_TOKEN must be at least 16 characters']);
  });

  describe('with NODE_ENV=production', () => {
    const production = (env: Record<string, string> = {}) => ({
      NODE_ENV: 'production',
      HERALD_PROVIDERS: 'live',
      HERALD_API_KEYS: TEST_API_KEY,
      HERALD_ADMIN_TOKEN: ADMIN,
      HERALD_CONTENT_TTL: '7d',
      HERALD_AUDIT_RETENTION: '400d',
      HERALD_ARCHIVE_URL: 'file:///tmp/herald-archive-never-written',
      HERALD_ARCHIVE_KEY: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
      POSTMARK_SERVER_TOKEN: 'postmark-token',
      POSTMARK_FROM: 'herald@example.com',
      TWILIO_ACCOUNT_SID: 'AC00000000000000000000000000000001',
      TWILIO_AUTH_TOKEN: 'twilio-token',
      TWILIO_FROM: '+15005550006',
      ...env,
    });
    let web: WebUnderTest | undefined;
    const prefix = testPrefix('prodro');
    afterAll(async () => {
      await web?.close();
      await cleanUp(prefix);
    });

    it('shows Bull Board read-only unless HERALD_ADMIN_READ_ONLY=false says otherwise', async () => {
      expect(loadConfig(production()).adminReadOnly).toBe(true);
      expect(loadConfig(production({ HERALD_ADMIN_READ_ONLY: 'false' })).adminReadOnly).toBe(false);
      expect(loadConfig(testEnv(prefix)).adminReadOnly).toBe(false);
      expect(configProblems(production({ HERALD_ADMIN_READ_ONLY: 'maybe' }))).toEqual([
        'HERALD_ADMIN_READ_ONLY="maybe" must be true or false',
      ]);
      web = await startWebUnderTest(loadConfig(production({ HERALD_PREFIX: prefix, REDIS_URL: testEnv(prefix).REDIS_URL! })));
      const queues = (await admin(web, 'GET', '/admin/queues/api/queues')).json().queues as { name: string; readOnlyMode: boolean }[];
      expect(queues.length).toBeGreaterThan(0);
      for (const queue of queues) expect(queue.readOnlyMode, queue.name).toBe(true);
    });
  });
});
