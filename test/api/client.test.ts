import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { TEST_API_KEY, testPrefix, waitFor } from '../helpers/env.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { startStack, type Stack } from '../helpers/stack.js';
import type { BatchNotice, CreateNoticeBody, RetryEvent } from '@herald/client';

// Imported by the root's own name, as existing callers do: `exports["./client"]` of package.json,
// the build of the workspace @herald/client.
const { createHeraldClient, HeraldApiError, HeraldResponseError, HeraldTimeoutError } = await import('herald/client');

/** A notice body, typed as the client takes it. */
const notice = (overrides: Record<string, unknown> = {}) => noticeBody(overrides) as unknown as CreateNoticeBody;

describe('the typed client (herald/client) against a running Herald', () => {
  let stack: Stack;
  let baseUrl: string;
  let herald: ReturnType<typeof createHeraldClient>;

  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('client'), env: { HERALD_ALLOW_PRIVATE_EVENT_URLS: '1' } });
    baseUrl = await stack.web.app.listen({ port: 0, host: '127.0.0.1' });
    herald = createHeraldClient({ baseUrl, apiKey: TEST_API_KEY });
  });
  afterAll(() => stack.close());

  it('creates a notice, replays it by its idempotency key, and waits for it to end', async () => {
    const body = noticeBody({
      recipient: { id: 'client-1', email: 'delivered+300ms@example.com', phone: '+12025550100' },
      deadlineInSeconds: 30,
    });
    const created = await herald.createNotice(body as never, { idempotencyKey: 'client-test-1' });
    expect(created).toMatchObject({ state: 'accepted', replayed: false, idempotencyKey: 'client-test-1' });
    if (created.replayed) throw new Error('a first create is not a replay');
    expect(created.plannedChecks.length).toBeGreaterThan(0);
    // A replay answers the notice as it is now (200), not the acceptance.
    const again = await herald.createNotice(body as never, { idempotencyKey: 'client-test-1' });
    expect(again).toMatchObject({ id: created.id, replayed: true });
    if (!again.replayed) throw new Error('the same key and body is a replay');
    expect(again.notice).toMatchObject({
      id: created.id,
      recipientId: 'client-1',
      plannedChecks: created.plannedChecks,
      deadline: created.deadline,
    });
    expect(again.notice.state).toEqual(expect.any(String));

    const done = await herald.waitFor(created.id, { terminal: true, timeoutMs: 20_000, intervalMs: 100 });
    expect(done.state).toBe('email_delivered');
    const events = await herald.getEvents(created.id);
    expect(events.map((e) => e.type)).toContain('notice.completed');
    const completed = events.find((e) => e.type === 'notice.completed');
    expect(completed?.type === 'notice.completed' && completed.state).toBe('email_delivered');
  });

  it('cancels a notice, and reports a refused cancel as a typed error with its stable code', async () => {
    const { id } = await herald.createNotice(noticeBody({ deadlineInSeconds: 600 }) as never);
    // The in-process worker may take the send first; either way the answer is typed.
    const canceled = await herald.cancelNotice(id).catch((error: unknown) => error);
    if (canceled instanceof HeraldApiError) {
      expect(canceled).toMatchObject({ status: 409, code: 'invalid_state' });
    } else {
      expect((canceled as { state: string }).state).toBe('canceled');
      const second = await herald.cancelNotice(id).catch((error: unknown) => error);
      expect(second).toBeInstanceOf(HeraldApiError);
      expect(second).toMatchObject({ status: 409, code: 'invalid_state', details: { state: 'canceled' } });
    }
  });

  it('throws HeraldApiError for bad input, unknown notices and a wrong key', async () => {
    const bad = await herald.createNotice({ recipient: {} } as never).catch((error: unknown) => error);
    expect(bad).toBeInstanceOf(HeraldApiError);
    expect(bad).toMatchObject({ status: 400, code: 'validation_failed' });
    expect((bad as InstanceType<typeof HeraldApiError>).details).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: expect.any(String) })]),
    );

    await expect(herald.getNotice('ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    const stranger = createHeraldClient({ baseUrl, apiKey: 'not-a-key-of-this-herald' });
    await expect(stranger.stats()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('gives up waiting with the notice as last read', async () => {
    const { id } = await herald.createNotice(
      noticeBody({ recipient: { id: 'client-3', email: 'never@example.com' }, deadlineInSeconds: 600 }) as never,
    );
    const timedOut = await herald.waitFor(id, { state: 'sms_delivered', timeoutMs: 300, intervalMs: 100 }).catch((error: unknown) => error);
    expect(timedOut).toBeInstanceOf(HeraldTimeoutError);
    expect(timedOut).toBeInstanceOf(HeraldApiError);
    expect(timedOut).toMatchObject({ status: 0, code: 'timeout' });
    expect((timedOut as InstanceType<typeof HeraldTimeoutError>).last.id).toBe(id);
  });

  it('generates an idempotency key for a create that has none, a fresh one each time', async () => {
    const body = notice({ recipient: { id: 'client-keys', email: 'never@example.com' } });
    const [one, two] = [await herald.createNotice(body), await herald.createNotice(body)];
    expect(one.idempotencyKey).toMatch(/^[\x21-\x7e]{1,255}$/);
    expect(two.idempotencyKey).not.toBe(one.idempotencyKey);
    expect([one.replayed, two.replayed]).toEqual([false, false]);
    expect(two.id).not.toBe(one.id);
  });

  it('creates a batch: one result per notice in the order given, accepted, refused or replayed, each with its key', async () => {
    const item = (i: number, overrides: Record<string, unknown> = {}): BatchNotice =>
      notice({ recipient: { id: `client-batch-${i}`, email: `never+${i}@example.com` }, ...overrides });
    const notices: BatchNotice[] = [
      item(0),
      item(1, { recipient: { id: 'client-batch-1', email: 'not an address' } }),
      { ...item(2), idempotencyKey: 'client-batch-key-2' },
      item(3, { deadline: '2001-01-01T00:00:00Z', deadlineInSeconds: undefined }),
    ];
    const results = await herald.createNotices(notices);
    expect(results.map((r) => [r.index, r.outcome, r.status])).toEqual([
      [0, 'accepted', 202],
      [1, 'refused', 400],
      [2, 'accepted', 202],
      [3, 'refused', 400],
    ]);
    expect(results[2]!.idempotencyKey).toBe('client-batch-key-2');
    expect(results[0]!.idempotencyKey).toEqual(expect.any(String));
    const refused = results[1]!;
    expect(refused.outcome === 'refused' && refused.error).toMatchObject({
      code: 'validation_failed',
      details: [expect.objectContaining({ path: 'body.notices.1.recipient.email' })],
    });
    const accepted = results[0]!;
    expect(accepted.outcome === 'accepted' && accepted.plannedChecks.length).toBeGreaterThan(0);

    // Sent again with the keys it answered with: nothing new, the same notices.
    const again = await herald.createNotices(notices.map((n, i) => ({ ...n, idempotencyKey: results[i]!.idempotencyKey })));
    expect(again.map((r) => r.outcome)).toEqual(['replayed', 'refused', 'replayed', 'refused']);
    expect(again[0]).toMatchObject({ id: accepted.outcome === 'accepted' ? accepted.id : '?', state: expect.any(String) });
    expect(await herald.createNotices([])).toEqual([]);
  });

  it('lists notices a page at a time, and iterates over every page, newest first', async () => {
    const made: string[] = [];
    for (let i = 0; i < 5; i += 1)
      made.push((await herald.createNotice(notice({ recipient: { id: 'client-list', email: 'never@example.com' } }))).id);
    const first = await herald.listNotices({ recipientId: 'client-list' }, { limit: 2 });
    expect(first.notices).toHaveLength(2);
    expect(first.nextCursor).toEqual(expect.any(String));
    expect(first.notices.every((n) => n.recipientId === 'client-list')).toBe(true);
    const second = await herald.listNotices({ recipientId: 'client-list' }, { limit: 2, cursor: first.nextCursor! });
    expect(second.notices.map((n) => n.id)).not.toContain(first.notices[0]!.id);

    const all: { id: string; createdAt: string }[] = [];
    for await (const n of herald.notices({ recipientId: 'client-list', from: new Date(Date.now() - 3_600_000) }, { limit: 2 })) all.push(n);
    expect(all.map((n) => n.id).sort()).toEqual([...made].sort());
    // Newest first.
    expect(all.map((n) => n.createdAt)).toEqual(
      all
        .map((n) => n.createdAt)
        .sort()
        .reverse(),
    );
    expect(await herald.listNotices({ recipientId: 'client-list', state: 'sms_delivered' })).toEqual({ notices: [], nextCursor: null });
    await expect(herald.listNotices({ view: 'soon' as never })).rejects.toMatchObject({ status: 400, code: 'validation_failed' });
  });

  it('manages event endpoints: create (the secret once), list, deliveries, delete', async () => {
    const created = await herald.eventEndpoints.create({
      url: 'http://127.0.0.1:9/client-hook',
      events: ['notice.completed', 'fallback.decided'],
    });
    expect(created).toMatchObject({
      id: expect.stringMatching(/^ep_/),
      secret: expect.stringMatching(/^whsec_/),
      disabled: null,
      events: ['notice.completed', 'fallback.decided'],
    });
    const listed = await herald.eventEndpoints.list();
    expect(listed.find((e) => e.id === created.id)).toEqual({
      ...created,
      secret: undefined,
      lastDeliveredAt: null,
      failingSince: null,
    } as never);
    expect(listed.every((e) => !('secret' in e))).toBe(true);
    expect(await herald.eventEndpoints.deliveries(created.id)).toEqual([]);
    await herald.eventEndpoints.delete(created.id);
    expect((await herald.eventEndpoints.list()).map((e) => e.id)).not.toContain(created.id);
    // Asked again, in one request: it is not there.
    await expect(herald.eventEndpoints.delete(created.id)).rejects.toMatchObject({ status: 404, code: 'not_found', attempts: 1 });
    await expect(herald.eventEndpoints.create({ url: 'ftp://x', events: ['notice.completed'] })).rejects.toMatchObject({
      status: 400,
      code: 'validation_failed',
    });
  });

  it('manages suppressions, recipient policies and reads stats', async () => {
    const added = await herald.suppressions.add({
      channel: 'email',
      address: 'Client.Suppressed@Example.com',
      reason: 'asked by the player',
    });
    expect(added).toMatchObject({ channel: 'email', address: 'client.suppressed@example.com', source: 'manual' });
    expect(await herald.suppressions.get('email', 'client.suppressed@example.com')).toMatchObject({ reason: 'asked by the player' });
    await herald.suppressions.remove('email', 'client.suppressed@example.com');
    await expect(herald.suppressions.get('email', 'client.suppressed@example.com')).rejects.toMatchObject({ status: 404 });

    const { version } = await herald.putRecipientPolicy('client-policy', { consent: { email: true, sms: false }, region: 'JP' });
    expect(version).toBe(1);
    expect(await herald.getRecipientPolicy('client-policy')).toMatchObject({
      version: 1,
      consent: { email: true, sms: false },
      region: 'JP',
    });

    const stats = await herald.stats({ from: new Date(Date.now() - 3_600_000), to: new Date() });
    expect(stats.notices).toBeGreaterThanOrEqual(3);
    expect(stats.window.from <= stats.from).toBe(true);
  });

  describe('when the network or Herald fails on the way', () => {
    let proxy: FaultProxy;
    let retries: RetryEvent[];
    /** A client through the proxy, told of its retries; short backoffs, the defaults otherwise. */
    const through = (options: { timeoutMs?: number; maxDelayMs?: number } = {}) =>
      createHeraldClient({
        baseUrl: proxy.url,
        apiKey: TEST_API_KEY,
        timeoutMs: options.timeoutMs,
        retry: { baseDelayMs: 20, ...(options.maxDelayMs === undefined ? {} : { maxDelayMs: options.maxDelayMs }) },
        onRetry: (event) => retries.push(event),
      });
    beforeAll(async () => {
      proxy = await new FaultProxy(baseUrl).start();
    });
    beforeEach(() => {
      retries = [];
      proxy.seen.length = 0;
    });
    afterAll(() => proxy.close());

    it('retries a read after a connection reset, and after no answer within timeoutMs', async () => {
      const { id } = await herald.createNotice(notice({ recipient: { id: 'client-net-1', email: 'never@example.com' } }));
      proxy.fail({ kind: 'reset' }, { method: 'GET' });
      expect((await through().getNotice(id)).id).toBe(id);
      expect(proxy.requests('GET').map((r) => r.fault)).toEqual(['reset', 'forwarded']);
      expect(retries).toEqual([
        expect.objectContaining({ method: 'GET', attempt: 1, error: expect.objectContaining({ status: 0, code: 'network_error' }) }),
      ]);

      retries = [];
      proxy.fail({ kind: 'hang' }, { method: 'GET' });
      expect((await through({ timeoutMs: 300 }).getEvents(id)).length).toBeGreaterThan(0);
      expect(retries.map((r) => r.error.code)).toEqual(['timeout']);
    });

    it('retries a create whose answer was lost with the same generated key: one notice, answered as a replay', async () => {
      proxy.fail({ kind: 'forward-then-reset' }, { method: 'POST', path: /^\/v1\/notices$/ });
      const created = await through().createNotice(notice({ recipient: { id: 'client-net-2', email: 'never@example.com' } }));
      const posts = proxy.requests('POST', /^\/v1\/notices$/);
      expect(posts.map((p) => p.fault)).toEqual(['forward-then-reset', 'forwarded']);
      expect(posts[1]!.idempotencyKey).toBe(posts[0]!.idempotencyKey);
      expect(created).toMatchObject({ replayed: true, idempotencyKey: posts[0]!.idempotencyKey });
      const listed = await herald.listNotices({ recipientId: 'client-net-2' });
      expect(listed.notices.map((n) => n.id)).toEqual([created.id]);
    });

    it('retries a batch whose answer was lost: each notice kept its key, none is made twice', async () => {
      proxy.fail({ kind: 'forward-then-reset' }, { method: 'POST', path: /batch/ });
      const results = await through().createNotices(
        [0, 1, 2].map((i) => notice({ recipient: { id: 'client-net-3', email: `never+${i}@example.com` } })),
      );
      expect(results.map((r) => r.outcome)).toEqual(['replayed', 'replayed', 'replayed']);
      expect(proxy.requests('POST', /batch/)).toHaveLength(2);
      expect((await herald.listNotices({ recipientId: 'client-net-3' })).notices.map((n) => n.id).sort()).toEqual(
        results.map((r) => (r.outcome === 'replayed' ? r.id : '?')).sort(),
      );
    });

    it('cancels once even when the answer to the first cancel was lost', async () => {
      // A worker-less Herald would be surer to cancel; here the in-process worker may send first.
      const { id } = await herald.createNotice(
        notice({ recipient: { id: 'client-net-4', email: 'never@example.com' }, deadlineInSeconds: 600 }),
      );
      proxy.fail({ kind: 'forward-then-reset' }, { method: 'POST', path: /cancel$/ });
      const outcome = await through()
        .cancelNotice(id)
        .catch((error: unknown) => error);
      if (outcome instanceof HeraldApiError) expect(outcome).toMatchObject({ code: 'invalid_state' });
      else expect(outcome).toMatchObject({ id, state: 'canceled' });
      expect(proxy.requests('POST', /cancel$/)).toHaveLength(2);
    });

    it('does not send again what would do it twice (a policy version, an endpoint) after no answer', async () => {
      proxy.fail({ kind: 'forward-then-reset' }, { method: 'PUT' });
      const lost = await through()
        .putRecipientPolicy('client-net-5', { consent: { email: true, sms: true } })
        .catch((error: unknown) => error);
      expect(lost).toBeInstanceOf(HeraldApiError);
      expect(lost).toMatchObject({ status: 0, code: 'network_error', attempts: 1 });
      expect(proxy.requests('PUT')).toHaveLength(1);
      expect(retries).toEqual([]);
      // It reached Herald once.
      expect((await herald.getRecipientPolicy('client-net-5')).version).toBe(1);

      proxy.fail({ kind: 'reset' }, { method: 'POST', path: /event-endpoints/ });
      await expect(through().eventEndpoints.create({ url: 'http://127.0.0.1:9/x', events: ['notice.failed'] })).rejects.toMatchObject({
        code: 'network_error',
        attempts: 1,
      });
    });

    it('gives up after maxAttempts when nothing listens, with the cause in the message', async () => {
      const closed = await new FaultProxy(baseUrl).start();
      const url = closed.url;
      await closed.close();
      const client = createHeraldClient({
        baseUrl: url,
        apiKey: TEST_API_KEY,
        retry: { baseDelayMs: 10, maxAttempts: 4 },
        onRetry: (e) => retries.push(e),
      });
      const error = await client.stats().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HeraldApiError);
      expect(error).toMatchObject({ status: 0, code: 'network_error', attempts: 4, message: expect.stringContaining('ECONNREFUSED') });
      expect(retries.map((r) => r.attempt)).toEqual([1, 2, 3]);
    });

    it('retries 429 and 503 on any call, after the Retry-After asked for; one asking for longer than maxDelayMs is thrown at once', async () => {
      const rateLimited = JSON.stringify({ error: { code: 'rate_limited', message: 'Slow down.' } });
      proxy.fail({ kind: 'answer', status: 429, headers: { 'retry-after': '1' }, body: rateLimited }, { method: 'PUT' });
      expect(await through().putRecipientPolicy('client-net-6', { consent: { email: true, sms: false } })).toEqual({ version: 1 });
      expect(proxy.requests('PUT').map((r) => r.fault)).toEqual(['answer', 'forwarded']);
      expect(retries).toHaveLength(1);
      expect(retries[0]!.error).toMatchObject({ status: 429, code: 'rate_limited', retryAfterSeconds: 1 });
      expect(retries[0]!.delayMs).toBeGreaterThanOrEqual(1000);

      retries = [];
      proxy.fail({
        kind: 'answer',
        status: 503,
        headers: { 'retry-after': '120' },
        body: JSON.stringify({ error: { code: 'unavailable', message: 'Redis is away.' } }),
      });
      const error = await through()
        .stats()
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 503, code: 'unavailable', retryAfterSeconds: 120, attempts: 1 });
      expect(retries).toEqual([]);

      // A proxy's own 503 page is retried too, by backoff.
      proxy.fail({ kind: 'answer', status: 503, headers: { 'content-type': 'text/html' }, body: '<h1>Service Unavailable</h1>' });
      expect((await through().stats()).notices).toEqual(expect.any(Number));
      expect(retries.map((r) => r.error.code)).toEqual(['http_503']);
    });

    it('stops at once on an aborted signal: before sending, while waiting to retry, and while waiting for a notice', async () => {
      const client = through({ maxDelayMs: 3_600_000 });
      const before = new AbortController();
      before.abort();
      await expect(client.stats(undefined, { signal: before.signal })).rejects.toMatchObject({ status: 0, code: 'aborted', attempts: 0 });
      expect(proxy.seen).toEqual([]);

      // Told to come back in ten minutes; the signal ends the wait.
      proxy.fail({
        kind: 'answer',
        status: 503,
        headers: { 'retry-after': '600' },
        body: '{"error":{"code":"unavailable","message":"later"}}',
      });
      const during = new AbortController();
      const aborting = createHeraldClient({
        baseUrl: proxy.url,
        apiKey: TEST_API_KEY,
        retry: { maxDelayMs: 3_600_000 },
        onRetry: () => during.abort(new Error('the caller gave up')),
      });
      const error = await aborting.getRecipientPolicy('client-net-7', { signal: during.signal }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(HeraldApiError);
      expect(error).toMatchObject({ status: 0, code: 'aborted', attempts: 1, cause: new Error('the caller gave up') });
      expect(proxy.seen).toHaveLength(1);

      // While a request hangs.
      proxy.fail({ kind: 'hang' });
      const hanging = new AbortController();
      const pending = client.stats(undefined, { signal: hanging.signal }).catch((e: unknown) => e);
      await waitFor(async () => proxy.seen.length === 2, 10_000, 'the request to reach the proxy');
      hanging.abort();
      expect(await pending).toMatchObject({ code: 'aborted', attempts: 1 });

      const { id } = await herald.createNotice(notice({ recipient: { id: 'client-net-8', email: 'never@example.com' } }));
      // Aborted once the first read is in, while waitFor sleeps: the answer is read whole before
      // the client sees it, so that no connection is left half used.
      let firstRead!: () => void;
      const read = new Promise<void>((resolve) => (firstRead = resolve));
      const watcher = createHeraldClient({
        baseUrl,
        apiKey: TEST_API_KEY,
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          const body = await response.text();
          firstRead();
          return new Response(body, { status: response.status, headers: response.headers });
        },
      });
      const waiting = new AbortController();
      const waited = watcher
        .waitFor(id, { state: 'sms_delivered', timeoutMs: 3_600_000, intervalMs: 3_600_000, signal: waiting.signal })
        .catch((e: unknown) => e);
      await read;
      waiting.abort();
      expect(await waited).toMatchObject({ code: 'aborted' });
    });
  });
});

describe('the typed client in front of what is not Herald', () => {
  // A proxy in front of Herald, and another origin a redirect points to; each notes what reached it.
  const seen: { server: string; path: string; authorization: string | undefined }[] = [];
  let proxy: Server;
  let other: Server;
  let proxyUrl: string;
  let otherUrl: string;
  const BAD_GATEWAY = `<!DOCTYPE html>\n<html>\n  <head><title>502 Bad Gateway</title></head>\n  <body>${'<p>upstream unavailable</p>'.repeat(100)}</body>\n</html>`;

  const listen = (
    handle: (req: IncomingMessage, answer: (status: number, headers: Record<string, string>, body?: string) => void) => void,
  ) =>
    new Promise<{ server: Server; url: string }>((resolve) => {
      const server = createServer((req, res) => handle(req, (status, headers, body) => res.writeHead(status, headers).end(body)));
      server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
    });

  beforeAll(async () => {
    ({ server: other, url: otherUrl } = await listen((req, answer) => {
      seen.push({ server: 'other', path: req.url!, authorization: req.headers.authorization });
      answer(200, { 'content-type': 'application/json' }, '{"notices":1}');
    }));
    // `localhost`, not 127.0.0.1: another origin, on this machine.
    otherUrl = otherUrl.replace('127.0.0.1', 'localhost');
    ({ server: proxy, url: proxyUrl } = await listen((req, answer) => {
      seen.push({ server: 'proxy', path: req.url!, authorization: req.headers.authorization });
      if (req.url!.startsWith('/v1/notices/')) answer(502, { 'content-type': 'text/html' }, BAD_GATEWAY);
      else if (req.url!.startsWith('/v1/stats')) answer(307, { location: `${otherUrl}/v1/stats` });
      else if (req.url!.startsWith('/v1/recipients/')) answer(302, { location: '/elsewhere' });
      else answer(200, { 'content-type': 'text/html' }, '<html>Sign in to the Wi-Fi</html>');
    }));
  });
  afterAll(async () => {
    await Promise.all([proxy, other].map((server) => new Promise((resolve) => server.close(resolve))));
  });

  it("turns a proxy's HTML 502 into HeraldResponseError (a HeraldApiError) with the status and a clipped snippet", async () => {
    const error = await createHeraldClient({ baseUrl: proxyUrl, apiKey: 'k-502' })
      .getNotice('ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HeraldResponseError);
    expect(error).toBeInstanceOf(HeraldApiError);
    const response = error as InstanceType<typeof HeraldResponseError>;
    expect(response).toMatchObject({ name: 'HeraldResponseError', status: 502, code: 'http_502' });
    expect(response.snippet).toMatch(/^<!DOCTYPE html> <html> <head><title>502 Bad Gateway<\/title>/);
    expect(response.snippet.length).toBeLessThanOrEqual(201);
    expect(response.message).toContain('502 Bad Gateway');
    expect(response.message.length).toBeLessThan(BAD_GATEWAY.length);
  });

  it('reports a success that is not JSON (a captive portal) the same way', async () => {
    const error = await createHeraldClient({ baseUrl: proxyUrl, apiKey: 'k-200' })
      .suppressions.get('email', 'x@example.com')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HeraldResponseError);
    expect(error).toMatchObject({ status: 200, snippet: '<html>Sign in to the Wi-Fi</html>' });
  });

  it('follows no redirect, to another origin or its own: the key goes nowhere but baseUrl', async () => {
    const client = createHeraldClient({ baseUrl: proxyUrl, apiKey: 'k-redirect' });
    const away = await client.stats().catch((e: unknown) => e);
    expect(away).toBeInstanceOf(HeraldResponseError);
    expect(away).toMatchObject({ status: 307, code: 'http_307', location: `${otherUrl}/v1/stats` });
    const within = await client.getRecipientPolicy('r-1').catch((e: unknown) => e);
    expect(within).toMatchObject({ status: 302, location: '/elsewhere' });
    expect(seen.filter((s) => s.authorization === 'Bearer k-redirect').map((s) => `${s.server} ${s.path}`)).toEqual([
      'proxy /v1/stats',
      'proxy /v1/recipients/r-1/policy',
    ]);
    expect(seen.some((s) => s.server === 'other' || s.path === '/elsewhere')).toBe(false);
  });

  it('refuses a plain http: baseUrl off this machine, unless allowInsecureHttp says so', () => {
    const make = (baseUrl: string, allowInsecureHttp?: boolean) => () => createHeraldClient({ baseUrl, apiKey: 'k', allowInsecureHttp });
    for (const baseUrl of ['http://herald.example', 'http://10.0.0.5:8080', 'http://127.0.0.1.example.com']) {
      expect(make(baseUrl), baseUrl).toThrow(/plain http.*allowInsecureHttp/);
    }
    expect(make('ftp://herald.example')).toThrow(/https:/);
    expect(make('herald.example')).toThrow(/not a URL/);
    for (const baseUrl of [
      'https://herald.example',
      'http://localhost:3000',
      'http://127.0.0.2:3000/',
      'http://[::1]:3000',
      'http://api.localhost',
    ]) {
      expect(make(baseUrl), baseUrl).not.toThrow();
    }
    expect(make('http://herald.internal', true)).not.toThrow();
  });
});
