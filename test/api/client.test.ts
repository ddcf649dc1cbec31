import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { TEST_API_KEY, testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

// Imported by the package's own name, as a caller would: `exports["./client"]` of package.json.
const { createHeraldClient, HeraldApiError, HeraldResponseError, HeraldTimeoutError } = await import('herald/client');

describe('the typed client (herald/client) against a running Herald', () => {
  let stack: Stack;
  let baseUrl: string;
  let herald: ReturnType<typeof createHeraldClient>;

  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('client') });
    baseUrl = await stack.web.app.listen({ port: 0, host: '127.0.0.1' });
    herald = createHeraldClient({ baseUrl, apiKey: TEST_API_KEY });
  });
  afterAll(() => stack.close());

  it('creates a notice, replays it by its idempotency key, and waits for it to end', async () => {
    const body = noticeBody({ recipient: { id: 'client-1', email: 'delivered+300ms@example.com', phone: '+12025550100' }, deadlineInSeconds: 30 });
    const created = await herald.createNotice(body as never, { idempotencyKey: 'client-test-1' });
    expect(created).toMatchObject({ state: 'accepted', replayed: false });
    expect(created.plannedChecks.length).toBeGreaterThan(0);
    const again = await herald.createNotice(body as never, { idempotencyKey: 'client-test-1' });
    expect(again).toMatchObject({ id: created.id, replayed: true });

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
    expect((bad as InstanceType<typeof HeraldApiError>).details).toEqual(expect.arrayContaining([expect.objectContaining({ path: expect.any(String) })]));

    await expect(herald.getNotice('ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    const stranger = createHeraldClient({ baseUrl, apiKey: 'not-a-key-of-this-herald' });
    await expect(stranger.stats()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('gives up waiting with the notice as last read', async () => {
    const { id } = await herald.createNotice(noticeBody({ recipient: { id: 'client-3', email: 'never@example.com' }, deadlineInSeconds: 600 }) as never);
    const timedOut = await herald.waitFor(id, { state: 'sms_delivered', timeoutMs: 300, intervalMs: 100 }).catch((error: unknown) => error);
    expect(timedOut).toBeInstanceOf(HeraldTimeoutError);
    expect((timedOut as InstanceType<typeof HeraldTimeoutError>).last.id).toBe(id);
  });

  it('manages suppressions, recipient policies and reads stats', async () => {
    const added = await herald.suppressions.add({ channel: 'email', address: 'Client.Suppressed@Example.com', reason: 'asked by the player' });
    expect(added).toMatchObject({ channel: 'email', address: 'client.suppressed@example.com', source: 'manual' });
    expect(await herald.suppressions.get('email', 'client.suppressed@example.com')).toMatchObject({ reason: 'asked by the player' });
    await herald.suppressions.remove('email', 'client.suppressed@example.com');
    await expect(herald.suppressions.get('email', 'client.suppressed@example.com')).rejects.toMatchObject({ status: 404 });

    const { version } = await herald.putRecipientPolicy('client-policy', { consent: { email: true, sms: false }, region: 'JP' });
    expect(version).toBe(1);
    expect(await herald.getRecipientPolicy('client-policy')).toMatchObject({ version: 1, consent: { email: true, sms: false }, region: 'JP' });

    const stats = await herald.stats({ from: new Date(Date.now() - 3_600_000), to: new Date() });
    expect(stats.notices).toBeGreaterThanOrEqual(3);
    expect(stats.window.from <= stats.from).toBe(true);
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
