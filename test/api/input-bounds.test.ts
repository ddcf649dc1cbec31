import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { TEST_API_KEY, testEnv, testConfig, testPrefix, waitFor } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { freePort } from '../helpers/redis-server.js';

/**
 * The bounds on a notice request (README, The API), through the HTTP API: every field that would break
 * them is a 400 `validation_failed` that stores nothing, whatever its nesting or its numbers.
 */
const DAY_S = 86_400;
const prefix = testPrefix('bounds');
let web: WebUnderTest;

beforeAll(async () => {
  web = await startWebUnderTest(testConfig(prefix, { HERALD_CONTENT_TTL: '1h' }));
});
afterAll(async () => {
  await web.close();
  await cleanUp(prefix);
});

/** Every key a request could leave behind under the prefix, with its size; the rate limiter's counters aside. */
async function footprint(): Promise<string> {
  return (await keysMatching(`${prefix}:*`)).filter((k) => !k.startsWith(`${prefix}:{rl}:`)).join('\n');
}

async function keysMatching(pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await web.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys.sort();
}

/** Posts a raw body and checks it is refused with 400 validation_failed, leaving nothing behind. */
async function expectRefused(payload: string, path?: RegExp): Promise<void> {
  const before = await footprint();
  const res = await web.app.inject({
    method: 'POST',
    url: '/v1/notices',
    payload,
    headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
  });
  expect(res.statusCode, res.body.slice(0, 500)).toBe(400);
  const body = res.json();
  expect(body.error.code).toBe('validation_failed');
  if (path) expect(JSON.stringify(body.error.details)).toMatch(path);
  expect(await footprint()).toBe(before);
}

const refuse = (overrides: Record<string, unknown>, path?: RegExp) => expectRefused(JSON.stringify(noticeBody(overrides)), path);

/** `depth` arrays or objects inside one another, as JSON text. */
const nestedArrays = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
const nestedObjects = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
const inFuture = (days: number) => new Date(Date.now() + days * DAY_S * 1000).toISOString();

describe('POST /v1/notices: metadata', () => {
  describe('when a name carries a line terminator or a character outside [A-Za-z0-9_.:-]', () => {
    it.each([
      ['a newline inside', 'event\nx'],
      ['a trailing newline', 'event\n'],
      ['a leading newline', '\nevent'],
      ['a carriage return', 'event\r'],
      ['a line separator (U+2028)', 'event\u2028'],
      ['a paragraph separator (U+2029)', 'event\u2029'],
      ['a space', 'an event'],
      ['a brace', 'event{s0}'],
      ['a non-ASCII letter', 'événement'],
      ['no character at all', ''],
      ['65 characters', 'k'.repeat(65)],
    ])('refuses a name with %s', async (_what, name) => {
      await refuse({ metadata: { [name]: 'x' } }, /body\.metadata/);
    });
  });

  it('refuses a 21st field, a value over 256 characters and a value that is not a string', async () => {
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']));
    await refuse({ metadata: many }, /body\.metadata/);
    await refuse({ metadata: { event: 'v'.repeat(257) } }, /body\.metadata/);
    await refuse({ metadata: { event: 7 } }, /body\.metadata/);
    await refuse({ metadata: { event: null } }, /body\.metadata/);
    await refuse({ metadata: ['event'] }, /body\.metadata/);
  });

  it('accepts 20 fields of the longest names and values, and records them in notice.accepted', async () => {
    const names = Array.from({ length: 20 }, (_, i) => `${String(i).padStart(2, '0')}_.:-${'N'.repeat(58)}`);
    const metadata = Object.fromEntries(names.map((n) => [n, 'v'.repeat(256)]));
    const res = await web.call('POST', '/v1/notices', noticeBody({ metadata }));
    expect(res.statusCode, res.body).toBe(202);
    const events = (await web.call('GET', `/v1/notices/${res.json().id}/events`)).json().events as StoredEntry[];
    expect(events[0]).toMatchObject({ type: 'notice.accepted', metadata });
  });
});

describe('POST /v1/notices: nesting', () => {
  const DEPTH = 10_000;
  it.each([
    ['metadata (arrays)', 'metadata', nestedArrays(DEPTH)],
    ['metadata (objects)', 'metadata', nestedObjects(DEPTH)],
    ['a metadata value', 'metadata', `{"event":${nestedObjects(DEPTH)}}`],
    ['recipient', 'recipient', nestedObjects(DEPTH)],
    ['recipient.phone', 'recipient', `{"id":"p","email":"a@example.com","phone":${nestedArrays(DEPTH)}}`],
    ['content', 'content', nestedObjects(DEPTH)],
    ['policy', 'policy', nestedObjects(DEPTH)],
    ['deadline', 'deadline', nestedArrays(DEPTH)],
    ['deadlineInSeconds', 'deadlineInSeconds', nestedObjects(DEPTH)],
    ['category', 'category', nestedArrays(DEPTH)],
    ['an unknown field', 'extra', nestedObjects(DEPTH)],
  ])('answers 10,000-deep nesting in %s with 400 validation_failed', async (_what, field, nested) => {
    const body = noticeBody({ [field]: '__NESTED__' });
    await expectRefused(JSON.stringify(body).replace('"__NESTED__"', nested));
  });

  it('answers 400 when every field is nested at once, and with an Idempotency-Key', async () => {
    const body = JSON.stringify(noticeBody({ metadata: 'M', policy: 'P', complianceDeadline: 'C' }))
      .replace('"M"', nestedObjects(DEPTH))
      .replace('"P"', nestedArrays(DEPTH))
      .replace('"C"', nestedObjects(DEPTH));
    await expectRefused(body);
    const res = await web.app.inject({
      method: 'POST',
      url: '/v1/notices',
      payload: body,
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', 'idempotency-key': 'nested-1' },
    });
    expect(res.statusCode).toBe(400);
  });
});

describe('the other write routes, given deep nesting', () => {
  const DEPTH = 10_000;
  it.each([
    ['PUT', '/v1/recipients/p-nest/policy', `{"consent":${nestedObjects(DEPTH)}}`],
    ['PUT', '/v1/recipients/p-nest/policy', `{"consent":{"email":true,"sms":true},"region":${nestedArrays(DEPTH)}}`],
    ['POST', '/v1/suppressions', `{"channel":"email","address":${nestedArrays(DEPTH)},"reason":"x"}`],
    ['POST', '/v1/suppressions', `{"channel":"email","address":"a@example.com","reason":${nestedObjects(DEPTH)}}`],
    ['POST', '/v1/notices/ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa/cancel', nestedObjects(DEPTH)],
  ] as const)('%s %s answers 400 validation_failed (or 404 for no such notice), never 500', async (method, url, payload) => {
    const before = await footprint();
    const res = await web.app.inject({
      method,
      url,
      payload,
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
    });
    expect([400, 404], res.body.slice(0, 300)).toContain(res.statusCode);
    expect(typeof res.json().error.code).toBe('string');
    expect(await footprint()).toBe(before);
  });
});

describe('POST /v1/notices: how far ahead', () => {
  it.each([
    ['a year-9999 deadline', { deadlineInSeconds: undefined, deadline: '9999-12-31T23:59:59Z' }],
    [
      'a year-9999 deadline with checks every 30 s',
      { deadlineInSeconds: undefined, deadline: '9999-12-31T23:59:59Z', policy: { minCheckIntervalSeconds: 30 } },
    ],
    ['a deadline 367 days ahead', { deadlineInSeconds: undefined, deadline: inFuture(367) }],
    ['deadlineInSeconds of 366 days and a second', { deadlineInSeconds: 366 * DAY_S + 1 }],
    ['deadlineInSeconds of 1e308', { deadlineInSeconds: 1e308 }],
    ['deadlineInSeconds of 1.5', { deadlineInSeconds: 1.5 }],
    ['deadlineInSeconds as a string', { deadlineInSeconds: '600' }],
    ['a year-9999 complianceDeadline', { complianceDeadline: '9999-12-31T23:59:59Z' }],
    ['a complianceDeadline 367 days ahead', { complianceDeadline: inFuture(367) }],
    ['a complianceDeadline before the deadline', { complianceDeadline: inFuture(0) }],
    ['a first check after 1e300 s', { policy: { firstCheckAfterSeconds: 1e300 } }],
    ['a first check after 367 days', { policy: { firstCheckAfterSeconds: 367 * DAY_S } }],
    ['a check interval of 367 days', { policy: { minCheckIntervalSeconds: 367 * DAY_S } }],
    ['a deadline with a six-digit year', { deadlineInSeconds: undefined, deadline: '+275760-09-13T00:00:00Z' }],
    ['a deadline on the 31st of February', { deadlineInSeconds: undefined, deadline: '2027-02-31T00:00:00Z' }],
  ])('refuses %s with 400', async (_what, overrides) => {
    await refuse(overrides);
  });

  it.each([
    ['1e400 (Infinity once parsed)', '1e400'],
    ['negative zero', '-0'],
    ['a huge exponent', '1e999999999'],
    ['a tiny exponent', '1e-999999999'],
    ['a 400-digit number', '9'.repeat(400)],
  ])('refuses deadlineInSeconds written as %s', async (_what, literal) => {
    await expectRefused(JSON.stringify(noticeBody({ deadlineInSeconds: '__N__' })).replace('"__N__"', literal));
  });

  it('accepts a deadline 365 days ahead, with its plan within the budget', async () => {
    const res = await web.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: 365 * DAY_S }));
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json().plannedChecks.length).toBeLessThanOrEqual(20);
  });
});

describe('POST /v1/notices: how long the content is kept', () => {
  const HOUR = 3_600_000;

  it('keeps content and the idempotency record past HERALD_CONTENT_TTL until after the last planned SMS check', async () => {
    const res = await web.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: 300 * DAY_S }), {
      'idempotency-key': 'far-content-1',
    });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id as string;
    const deadline = Date.parse(res.json().deadline);
    // HERALD_CONTENT_TTL is 1h here; the content must still be there at the deadline, through the SMS send and its checks.
    const contentTtl = await web.redis.pttl(web.store.keys.content(id));
    expect(Date.now() + contentTtl).toBeGreaterThan(deadline + HOUR);
    const [accepted] = (await web.call('GET', `/v1/notices/${id}/events`)).json().events as StoredEntry[];
    expect(Date.parse(String(accepted!.contentExpiresAt))).toBeGreaterThan(deadline + HOUR);

    const idemTtls = await Promise.all((await keysMatching(`${prefix}:*:idem:*`)).map((k) => web.redis.pttl(k)));
    expect(Math.max(...idemTtls)).toBeGreaterThan(deadline - Date.now());
  });

  describe('when the regional rules have quiet hours', () => {
    const quietPrefix = testPrefix('bounds-quiet');
    let quietWeb: WebUnderTest;
    beforeAll(async () => {
      const rules = new URL('../fixtures/rules.json', import.meta.url).pathname;
      quietWeb = await startWebUnderTest(testConfig(quietPrefix, { HERALD_CONTENT_TTL: '1h', HERALD_RULES_FILE: rules }));
    });
    afterAll(async () => {
      await quietWeb.close();
      await cleanUp(quietPrefix);
    });

    it('keeps the content a day longer, for an SMS that waits for the window to open', async () => {
      const res = await quietWeb.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: 600 }));
      const id = res.json().id as string;
      const deadline = Date.parse(res.json().deadline);
      expect(Date.now() + (await quietWeb.redis.pttl(quietWeb.store.keys.content(id)))).toBeGreaterThan(deadline + 24 * HOUR);
    });

    it('but never past what the complianceDeadline allows the SMS to wait', async () => {
      const complianceDeadline = new Date(Date.now() + 3_600_000).toISOString();
      const res = await quietWeb.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: 600, complianceDeadline }));
      const id = res.json().id as string;
      const expiresAt = Date.now() + (await quietWeb.redis.pttl(quietWeb.store.keys.content(id)));
      expect(expiresAt).toBeGreaterThan(Date.parse(complianceDeadline) + HOUR);
      expect(expiresAt).toBeLessThan(Date.parse(res.json().deadline) + 24 * HOUR);
    });
  });
});

/** The compiled web process, as the Procfile runs it: a far deadline must not take it down. */
describe('the web process given far deadlines', () => {
  const ROOT = fileURLToPath(new URL('../../', import.meta.url));
  const processPrefix = testPrefix('bounds-web');
  let child: ChildProcess;
  let exited = false;
  let output = '';
  let base: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['dist/src/server.js'], {
      cwd: ROOT,
      env: { ...process.env, ...testEnv(processPrefix, { PORT: String(port), LOG_LEVEL: 'warn' }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    child.on('exit', () => (exited = true));
    await waitFor(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.ok, 20_000, 'the web process to listen');
  });
  afterAll(async () => {
    if (!exited) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    }
    await cleanUp(processPrefix);
  });

  it('answers each with 400 and keeps serving', async () => {
    const far = [
      { deadline: '9999-12-31T23:59:59Z', policy: { minCheckIntervalSeconds: 30 } },
      { deadline: '9999-12-31T23:59:59Z' },
      { deadline: '2999-01-01T00:00:00Z', policy: { firstCheckAfterSeconds: 30, minCheckIntervalSeconds: 30 } },
    ];
    for (const fields of far) {
      const res = await fetch(`${base}/v1/notices`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(noticeBody({ deadlineInSeconds: undefined, ...fields })),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
    }
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect(exited, output).toBe(false);
  });
});
