import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';

const ADMIN = 'admin-token-0123456789abcdef';

/** The value of one sample of a Prometheus text exposition, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => present[k] === v)) return Number(match[3]);
  }
  return 0;
}

describe('operations surface', () => {
  let stack: Stack;
  const lines: string[] = [];
  beforeAll(async () => {
    stack = await startStack({
      prefix: testPrefix('ops'),
      env: { HERALD_ADMIN_TOKEN: ADMIN },
      workerLogger: createLogger(
        'herald-test-worker',
        'debug',
        new Writable({
          write(chunk, _encoding, done) {
            lines.push(...String(chunk).split('\n').filter(Boolean));
            done();
          },
        }),
      ),
    });
  });
  afterAll(async () => stack.close());

  describe('Bull Board at /admin/queues', () => {
    it('answers 401 without credentials and 403 with a wrong token', async () => {
      expect((await stack.web.call('GET', '/admin/queues', undefined, { authorization: '' })).statusCode).toBe(401);
      const wrong = await stack.web.call('GET', '/admin/queues', undefined, { authorization: 'Bearer not-the-admin-token' });
      expect(wrong.statusCode).toBe(403);
      expect(wrong.json().error.code).toBe('forbidden');
    });
    it('opens with the token as bearer or as the basic-auth password, and lists every Herald queue', async () => {
      expect((await stack.web.call('GET', '/admin/queues', undefined, { authorization: `Bearer ${ADMIN}` })).statusCode).toBe(200);
      const basic = `Basic ${Buffer.from(`ops:${ADMIN}`).toString('base64')}`;
      expect((await stack.web.call('GET', '/admin/queues', undefined, { authorization: basic })).statusCode).toBe(200);
      const api = await stack.web.call('GET', '/admin/queues/api/queues', undefined, { authorization: basic });
      const names = api
        .json()
        .queues.map((q: { name: string }) => q.name)
        .sort();
      expect(names).toEqual([
        'content-purge',
        'deadline',
        'email-poll',
        'email-send',
        'event-delivery',
        'event-dispatch',
        'log-mirror',
        'provider-feed',
        'reconcile',
        'sms-poll',
        'sms-send',
      ]);
    });
    it('links back to the overview from its menu, in the configuration the board page carries', async () => {
      const page = await stack.web.call('GET', '/admin/queues', undefined, { authorization: `Bearer ${ADMIN}` });
      expect(page.statusCode).toBe(200);
      const config = JSON.parse(/<script id="__UI_CONFIG__" type="application\/json">([\s\S]*?)<\/script>/.exec(page.body)![1]!);
      expect(config.miscLinks).toEqual([{ text: 'Herald overview', url: '/admin' }]);
      expect(config.boardTitle).toBe('Herald queues');
    });
    it('sends a browser to the login form, whose HttpOnly cookie then opens it', async () => {
      const page = await stack.web.call('GET', '/admin/queues', undefined, { authorization: '', accept: 'text/html' });
      expect(page.statusCode).toBe(303);
      expect(page.headers.location).toBe('/admin/login?next=%2Fadmin%2Fqueues');
      const bad = await stack.web.call('POST', '/admin/login', 'token=wrong&next=%2Fadmin%2Fqueues', {
        authorization: '',
        'content-type': 'application/x-www-form-urlencoded',
      });
      expect(bad.statusCode).toBe(403);
      const login = await stack.web.call('POST', '/admin/login', `token=${ADMIN}&next=%2Fadmin%2Fqueues`, {
        authorization: '',
        'content-type': 'application/x-www-form-urlencoded',
      });
      expect(login.statusCode).toBe(303);
      const cookie = String(login.headers['set-cookie']);
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).not.toContain(ADMIN);
      const opened = await stack.web.call('GET', '/admin/queues', undefined, { authorization: '', cookie: cookie.split(';')[0]! });
      expect(opened.statusCode).toBe(200);
    });
    it('never redirects off the admin routes after logging in', async () => {
      const login = await stack.web.call('POST', '/admin/login', `token=${ADMIN}&next=https%3A%2F%2Fevil.example`, {
        authorization: '',
        'content-type': 'application/x-www-form-urlencoded',
      });
      expect(login.headers.location).toBe('/admin');
    });
  });

  it('metrics follow a notice: the fallback counter increments with its reason, SMS sent and the decision lag', async () => {
    const before = (await stack.web.call('GET', '/metrics', undefined, { authorization: '' })).body;
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'm1', email: 'never@example.com', phone: '+12025550100' }, deadlineInSeconds: 2 }),
    );
    await stack.waitForState(id, ['sms_delivered']);
    const res = await stack.web.call('GET', '/metrics', undefined, { authorization: '' });
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    const after = res.body;
    const delta = (name: string, labels?: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
    expect(delta('herald_fallback_decisions_total', { reason: 'email_deadline_elapsed' })).toBe(1);
    expect(delta('herald_notices_accepted_total')).toBe(1);
    expect(delta('herald_sms_sent_total')).toBe(1);
    expect(delta('herald_transitions_total', { state: 'sms_delivered' })).toBe(1);
    expect(delta('herald_fallback_decision_lag_seconds_count')).toBe(1);
    expect(delta('herald_fallback_decision_lag_seconds_bucket', { le: '+Inf' })).toBe(1);
    expect(delta('herald_provider_calls_total', { provider: 'postmark', operation: 'status', outcome: 'ok' })).toBeGreaterThanOrEqual(2);
    expect(delta('herald_status_polls_total', { channel: 'sms', status: 'delivered' })).toBe(1);
    expect(after).toMatch(/herald_queue_jobs\{queue="deadline",state="delayed"\}/);
    expect(delta('herald_estimated_spend_total', { channel: 'sms' })).toBeCloseTo(0.0083, 6);
    expect(delta('herald_estimated_spend_total', { channel: 'email' })).toBeCloseTo(0.0015, 6);
    expect(delta('herald_status_checks_per_notice_count')).toBe(1);
    expect(delta('herald_status_checks_per_notice_sum')).toBeGreaterThanOrEqual(3);
  });

  it('keeps addresses and content out of every log line about a notice, including provider errors', async () => {
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'm2', email: 'rejected@example.com', phone: '+12035550100' }, deadlineInSeconds: 30 }),
    );
    await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    const about = lines.filter((l) => l.includes(id));
    expect(about.length).toBeGreaterThan(0);
    expect(about.some((l) => l.includes('provider call failed'))).toBe(true);
    for (const line of lines) {
      expect(line).not.toMatch(/rejected@example\.com|\+12035550100|The terms change on Monday|Terms change Monday/);
    }
  });

  it('publishes OpenAPI at /docs/json covering every /v1 route with its error shape', async () => {
    const doc = (await stack.web.call('GET', '/docs/json', undefined, { authorization: '' })).json();
    const routes = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(routes).toEqual(
      expect.arrayContaining([
        'POST /v1/notices',
        'GET /v1/notices/{id}',
        'GET /v1/notices/{id}/events',
        'POST /v1/notices/{id}/cancel',
        'PUT /v1/recipients/{id}/policy',
        'GET /v1/recipients/{id}/policy',
        'POST /v1/suppressions',
        'GET /v1/suppressions/{channel}/{address}',
        'DELETE /v1/suppressions/{channel}/{address}',
        'GET /v1/stats',
      ]),
    );
    for (const route of routes.filter((r) => r.includes('/v1/'))) {
      const [method, path] = route.split(' ') as [string, string];
      const op = doc.paths[path][method.toLowerCase()];
      expect(op.security, route).toEqual([{ apiKey: [expect.stringMatching(/^(send|read|manage)$/)] }]);
      expect(op.responses['401'], route).toBeDefined();
    }
    expect(doc.paths['/v1/notices'].post.responses['202'].content['application/json'].schema.properties.plannedChecks).toBeDefined();
    expect((await stack.web.call('GET', '/docs', undefined, { authorization: '' })).statusCode).toBeLessThan(400);
  });
});

describe('admin routes without HERALD_ADMIN_TOKEN', () => {
  let web: WebUnderTest;
  const prefix = testPrefix('closed');
  beforeAll(async () => {
    web = await startWebUnderTest(testConfig(prefix));
  });
  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });
  it('are closed', async () => {
    const res = await web.call('GET', '/admin/queues', undefined, { authorization: 'Bearer anything-at-all-here' });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('forbidden');
  });
});

describe('rate limiting per API key', () => {
  let web: WebUnderTest;
  const prefix = testPrefix('rl');
  beforeAll(async () => {
    web = await startWebUnderTest(testConfig(prefix, { HERALD_RATE_LIMIT_PER_MINUTE: '3' }));
  });
  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });
  it('answers 429 rate_limited with Retry-After once the key used its minute', async () => {
    for (let i = 0; i < 3; i += 1) expect((await web.call('GET', '/v1/recipients/r1/policy')).statusCode).toBe(200);
    const limited = await web.call('GET', '/v1/recipients/r1/policy');
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.code).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('rate limiting of the routes that accept notices', () => {
  let web: WebUnderTest;
  const prefix = testPrefix('rl-accept');
  beforeAll(async () => {
    web = await startWebUnderTest(testConfig(prefix, { HERALD_RATE_LIMIT_PER_MINUTE: '3' }));
  });
  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });
  it('answers 429 rate_limited to a notice and to a batch once the key used its minute, and stores and queues none of them', async () => {
    const body = (i: number) => noticeBody({ recipient: { id: `rl-${i}`, email: 'never@example.com' } });
    for (let i = 0; i < 3; i += 1) expect((await web.call('POST', '/v1/notices', body(i))).statusCode).toBe(202);
    const limited = await web.call('POST', '/v1/notices', body(3));
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.code).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    const batch = await web.call('POST', '/v1/notices/batch', { notices: [body(4), body(5)] });
    expect(batch.statusCode).toBe(429);
    expect(batch.json().error.code).toBe('rate_limited');
    // The three accepted notices are all there is: their jobs, their hashes.
    const counts = await web.queues.deadline.getJobCounts();
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(3);
    const notices = await web.redis.keys(`${prefix}:*:notice:*`);
    expect(notices).toHaveLength(3);
    // The other routes share the key's minute.
    expect((await web.call('GET', '/v1/recipients/rl-0/policy')).statusCode).toBe(429);
  });
});
