import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { sleep, type HttpAnswer } from '../helpers/sandbox.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox({ indexLagMs: 600 });
});
afterAll(() => sandbox.close());
beforeEach(() => sandbox.reset());

const DOMAIN = 'mg.example.com';
const AUTH = `Basic ${Buffer.from('api:key-123').toString('base64')}`;

/** A Mailgun API call over raw HTTP: a multipart form for POST, a query for GET. */
async function mailgun(method: string, path: string, fields?: Record<string, string>, auth: string | null = AUTH): Promise<HttpAnswer> {
  const headers: Record<string, string> = {};
  if (auth !== null) headers['authorization'] = auth;
  let body: FormData | undefined;
  if (fields) {
    body = new FormData();
    for (const [name, value] of Object.entries(fields)) body.append(name, value);
  }
  const response = await fetch(sandbox.url + path, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: keep the text.
  }
  return { status: response.status, headers: response.headers, body: parsed };
}

const email = (to: string, extra: Record<string, string> = {}) => ({
  from: 'herald@mg.example.com',
  to,
  subject: 'Terms update',
  text: 'The terms change on Friday.',
  ...extra,
});

describe('Mailgun emulator', () => {
  describe('POST /v3/{domain}/messages', () => {
    it('answers like Mailgun, with the id in angle brackets, and keeps the user variables', async () => {
      const sent = await mailgun('POST', `/v3/${DOMAIN}/messages`, email('p42@example.com', { 'v:herald_key': 'k1', 'o:tag': 'terms' }));
      expect(sent.status).toBe(200);
      expect(sent.body).toEqual({ id: expect.stringMatching(/^<\d{14}\.[0-9a-f]{16}@mg\.example\.com>$/), message: 'Queued. Thank you.' });
      const [stored] = sandbox.emails();
      expect(stored).toMatchObject({
        messageId: sent.body.id.slice(1, -1),
        to: 'p42@example.com',
        tag: 'terms',
        metadata: { herald_key: 'k1' },
      });
    });

    it('refuses a bad key with 401 Forbidden, and records the request', async () => {
      const bad = await mailgun(
        'POST',
        `/v3/${DOMAIN}/messages`,
        email('a@example.com'),
        `Basic ${Buffer.from('api:bad-token').toString('base64')}`,
      );
      const missing = await mailgun('POST', `/v3/${DOMAIN}/messages`, email('a@example.com'), null);
      expect([bad.status, bad.body, missing.status]).toEqual([401, 'Forbidden', 401]);
      expect(sandbox.emails()).toHaveLength(0);
      expect(sandbox.requests().map((r) => [r.provider, r.operation, r.status])).toEqual([
        ['mailgun', 'mailgun.send', 401],
        ['mailgun', 'mailgun.send', 401],
      ]);
    });

    it.each([
      ['no from', { from: '' }, 'from parameter is missing'],
      ['a bad to', { to: 'not-an-address' }, 'to parameter is not a valid address. please check documentation'],
      ['no body', { text: '' }, "Need at least one of 'text' or 'html' parameters specified"],
      [
        '17 kB of variables',
        { 'v:big': 'x'.repeat(17_000) },
        'Send options (parameters starting with o:, h:, or v:) are limited to 16 kB total',
      ],
    ])('answers 400 { message } for a send with %s', async (_what, override, message) => {
      const answer = await mailgun('POST', `/v3/${DOMAIN}/messages`, { ...email('a@example.com'), ...override });
      expect(answer).toMatchObject({ status: 400, body: { message } });
    });

    it('answers an unreadable body with 400 { message }', async () => {
      const response = await fetch(`${sandbox.url}/v3/${DOMAIN}/messages`, {
        method: 'POST',
        headers: { authorization: AUTH, 'content-type': 'multipart/form-data; boundary=nope' },
        body: 'not a multipart body',
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({ message: expect.any(String) });
    });
  });

  describe('GET /v3/{domain}/events', () => {
    it('lists a message’s events by message-id, newest first, with absolute paging URLs', async () => {
      const sent = await mailgun('POST', `/v3/${DOMAIN}/messages`, email('delivered+100ms@example.com', { 'v:herald_key': 'k2' }));
      const id = (sent.body.id as string).slice(1, -1);
      expect(
        (await mailgun('GET', `/v3/${DOMAIN}/events?message-id=${encodeURIComponent(id)}&ascending=no&begin=${Date.now() / 1000 + 60}`))
          .body.items,
      ).toEqual([]);
      await sleep(700);
      const listed = await mailgun(
        'GET',
        `/v3/${DOMAIN}/events?message-id=${encodeURIComponent(id)}&ascending=no&begin=${Date.now() / 1000 + 60}`,
      );
      expect(listed.status).toBe(200);
      expect(listed.body.items.map((e: { event: string }) => e.event)).toEqual(['delivered', 'accepted']);
      expect(listed.body.items[1]).toMatchObject({
        event: 'accepted',
        recipient: 'delivered+100ms@example.com',
        'user-variables': { herald_key: 'k2' },
        message: { headers: { 'message-id': id } },
        timestamp: expect.any(Number),
      });
      for (const link of ['first', 'last', 'next', 'previous']) {
        expect(listed.body.paging[link]).toMatch(new RegExp(`^${sandbox.url}/v3/${DOMAIN}/events/[A-Za-z0-9_-]+$`));
      }
      const next = await fetch(listed.body.paging.next, { headers: { authorization: AUTH } });
      expect(await next.json()).toMatchObject({ items: [] });
    });

    it('filters accepted events by recipient and time range', async () => {
      const before = Date.now() / 1000 - 1;
      await mailgun('POST', `/v3/${DOMAIN}/messages`, email('never+a@example.com'));
      await mailgun('POST', `/v3/${DOMAIN}/messages`, email('never+b@example.com'));
      await sleep(700);
      const found = await mailgun(
        'GET',
        `/v3/${DOMAIN}/events?event=accepted&recipient=never%2Ba@example.com&begin=${before}&ascending=yes`,
      );
      expect(found.body.items.map((e: { recipient: string }) => e.recipient)).toEqual(['never+a@example.com']);
      const later = await mailgun('GET', `/v3/${DOMAIN}/events?event=accepted&begin=${Date.now() / 1000 + 1}&ascending=yes`);
      expect(later.body.items).toEqual([]);
    });

    it('refuses a limit over 300 and a begin without a direction', async () => {
      expect(await mailgun('GET', `/v3/${DOMAIN}/events?limit=301`)).toMatchObject({
        status: 400,
        body: { message: expect.stringMatching(/limit/) },
      });
      expect(await mailgun('GET', `/v3/${DOMAIN}/events?begin=1700000000`)).toMatchObject({
        status: 400,
        body: { message: expect.stringMatching(/ascending/) },
      });
      expect(await mailgun('GET', `/v3/${DOMAIN}/events/unknown-token`)).toMatchObject({ status: 400 });
    });
  });

  describe('POST /v1/analytics/logs', () => {
    /** A Logs API search, as JSON. */
    const logs = async (body: unknown, auth: string | null = AUTH): Promise<HttpAnswer> => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (auth !== null) headers['authorization'] = auth;
      const response = await fetch(`${sandbox.url}/v1/analytics/logs`, { method: 'POST', headers, body: JSON.stringify(body) });
      const text = await response.text();
      return { status: response.status, headers: response.headers, body: text.startsWith('{') ? JSON.parse(text) : text };
    };
    const rfc2822 = (ms: number) => `${new Date(ms).toUTCString().slice(0, 25)} -0000`;
    const is = (attribute: string, value: string) => ({ attribute, comparator: '=', values: [{ label: value, value }] });

    it('lists a message’s log items by domain and message-id, newest first, with @timestamp and the user variables', async () => {
      const sent = await mailgun('POST', `/v3/${DOMAIN}/messages`, email('delivered+100ms@example.com', { 'v:herald_key': 'k3' }));
      const id = (sent.body.id as string).slice(1, -1);
      const search = {
        start: rfc2822(Date.now() - 60_000),
        end: rfc2822(Date.now() + 60_000),
        filter: { AND: [is('domain', DOMAIN), is('message-id', id)] },
        pagination: { sort: 'timestamp:desc', limit: 100 },
      };
      // Not in the log until it is indexed (600 ms here).
      expect((await logs(search)).body).toMatchObject({ items: [], pagination: {} });
      await sleep(700);
      const listed = await logs(search);
      expect(listed.status).toBe(200);
      expect(listed.body).toMatchObject({ start: search.start, end: search.end, aggregates: {} });
      expect(listed.body.items.map((e: { event: string }) => e.event)).toEqual(['delivered', 'accepted']);
      const [delivered, accepted] = listed.body.items;
      expect(accepted).toMatchObject({
        event: 'accepted',
        '@timestamp': expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        domain: { name: DOMAIN },
        recipient: 'delivered+100ms@example.com',
        message: { headers: { 'message-id': id } },
      });
      expect(JSON.parse(accepted['user-variables'])).toEqual({ herald_key: 'k3' });
      expect(Date.parse(delivered['@timestamp'])).toBeGreaterThan(Date.parse(accepted['@timestamp']));
      expect(delivered).toMatchObject({ 'delivery-status': { code: 250 } });
      expect(listed.body.pagination.next).toBeUndefined();
      expect(
        sandbox
          .requests()
          .filter((r) => r.operation === 'mailgun.logs')
          .map((r) => [r.method, r.path, r.recipient]),
      ).toEqual([
        ['POST', '/v1/analytics/logs', 'delivered+100ms@example.com'],
        ['POST', '/v1/analytics/logs', 'delivered+100ms@example.com'],
      ]);
    });

    it('pages with tokens: the next page is the same search with pagination.token, and include_totals counts them all', async () => {
      for (let i = 0; i < 5; i++) await mailgun('POST', `/v3/${DOMAIN}/messages`, email(`never+${i}@example.com`));
      await sleep(700);
      const first = await logs({
        start: rfc2822(Date.now() - 60_000),
        events: ['accepted'],
        filter: { AND: [is('domain', DOMAIN)] },
        include_totals: true,
        pagination: { sort: 'timestamp:asc', limit: 2 },
      });
      expect(first.body.pagination).toMatchObject({
        total: 5,
        next: expect.any(String),
        first: expect.any(String),
        last: expect.any(String),
      });
      const seen = [...first.body.items];
      let next: string | undefined = first.body.pagination.next;
      while (next) {
        const page = await logs({ pagination: { token: next } });
        expect(page.status).toBe(200);
        seen.push(...page.body.items);
        next = page.body.pagination.next;
      }
      expect(seen.map((e: { recipient: string }) => e.recipient)).toEqual([0, 1, 2, 3, 4].map((i) => `never+${i}@example.com`));
    });

    it('filters by recipient (any case) and event type, and != excludes', async () => {
      await mailgun('POST', `/v3/${DOMAIN}/messages`, email('never+x@example.com'));
      await mailgun('POST', `/v3/${DOMAIN}/messages`, email('never+y@example.com'));
      await sleep(700);
      const start = rfc2822(Date.now() - 60_000);
      const found = await logs({ start, events: ['accepted'], filter: { AND: [is('recipient', 'Never+X@example.com')] } });
      expect(found.body.items.map((e: { recipient: string }) => e.recipient)).toEqual(['never+x@example.com']);
      const others = await logs({
        start,
        filter: { AND: [{ attribute: 'recipient', comparator: '!=', values: [{ label: 'x', value: 'never+x@example.com' }] }] },
      });
      expect(others.body.items.map((e: { recipient: string }) => e.recipient)).toEqual(['never+y@example.com']);
      expect((await logs({ start, events: ['delivered'] })).body.items).toEqual([]);
    });

    it('refuses bad searches with 400 { message }, and a bad key with 401', async () => {
      for (const body of [
        { start: 'yesterday-ish' },
        { filter: { OR: [] } },
        { filter: { AND: [{ attribute: 'colour', comparator: '=', values: [{ label: 'a', value: 'a' }] }] } },
        { filter: { AND: [{ attribute: 'recipient', comparator: '=', values: [{ value: 'a' }] }] } },
        { pagination: { limit: 101 } },
        { pagination: { token: 'unknown-token' } },
      ]) {
        expect(await logs(body)).toMatchObject({ status: 400, body: { message: expect.any(String) } });
      }
      expect(await logs({}, `Basic ${Buffer.from('api:bad-token').toString('base64')}`)).toMatchObject({ status: 401, body: 'Forbidden' });
    });
  });

  describe('routes', () => {
    it('answers unknown Mailgun paths with 404 { message }, never with the root text', async () => {
      const answer = await mailgun('GET', `/v3/${DOMAIN}/messages`);
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({ message: 'Not Found' });
      expect(JSON.stringify(answer.body)).not.toContain('Magnificent');
    });

    it('leaves other APIs under /v3/ to their own routes (no catch-all)', async () => {
      await fetch(`${sandbox.url}/v3/mail/send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      await fetch(`${sandbox.url}/v3/logs/abc`);
      expect(sandbox.requests().filter((r) => r.provider === 'mailgun')).toEqual([]);
    });

    it('answers the domain on GET /v4/domains/{domain}', async () => {
      const answer = await mailgun('GET', `/v4/domains/${DOMAIN}`);
      expect(answer).toMatchObject({ status: 200, body: { domain: { name: DOMAIN, state: 'active' } } });
    });
  });
});
