import { connect } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../src/http/errors.js';
import { plainRedis, testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const ADMIN = 'admin-token-edges-0123456789';

/** Asserts Herald's own error shape with `code`, and nothing of Fastify's default shape. */
function expectHeraldError(res: { statusCode: number; body: string; headers: Record<string, unknown> }, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = JSON.parse(res.body);
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(ERROR_CATALOGUE[code as keyof typeof ERROR_CATALOGUE].status).toBe(status);
  expect(res.body).not.toMatch(/FST_ERR|"statusCode"|Internal Server Error/);
}

/** Sends raw bytes over TCP and resolves with the status and body of the answer. */
async function rawHttp(url: string, request: string): Promise<{ statusCode: number; body: string; headers: Record<string, string> }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.write(request);
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString()));
  await new Promise<void>((resolve) => socket.on('close', () => resolve()));
  const [head, body = ''] = text.split('\r\n\r\n');
  const [statusLine, ...headerLines] = head!.split('\r\n');
  const headers = Object.fromEntries(
    headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { statusCode: Number(statusLine!.split(' ')[1]), body, headers };
}

describe('the web edge', () => {
  let web: WebUnderTest;
  let base: string;
  const prefix = testPrefix('edges');
  const keyCount = async () => {
    const redis = plainRedis();
    try {
      // The per-key rate limit counts every request; anything else would be stored content.
      return (await redis.keys(`${prefix}:*`)).filter((k) => !k.includes(':{rl}:')).length;
    } finally {
      await redis.quit();
    }
  };
  beforeAll(async () => {
    web = await startWebUnderTest(testConfig(prefix, { HERALD_ADMIN_TOKEN: ADMIN }));
    base = await web.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });

  describe('when the path is badly percent-encoded', () => {
    it('answers 400 validation_failed on API, admin and unknown routes alike', async () => {
      expectHeraldError(await web.call('GET', '/v1/notices/%E0%A4%A'), 400, 'validation_failed');
      expectHeraldError(
        await web.call('GET', '/admin/notices/%E0%A4%A', undefined, { authorization: `Bearer ${ADMIN}` }),
        400,
        'validation_failed',
      );
      expectHeraldError(await web.call('GET', '/nowhere/%ZZ%E0'), 400, 'validation_failed');
    });
  });

  describe('when the path is over-long', () => {
    it('answers 414 uri_too_long for a 10 KB path, whatever route it aims at, without echoing it', async () => {
      const long = 'a'.repeat(10_000);
      for (const url of [`/v1/notices/${long}`, `/admin/notices/${long}`, `/v1/stats?from=${long}`, `/${long}`]) {
        const res = await web.call('GET', url, undefined, { authorization: `Bearer ${ADMIN}` });
        expectHeraldError(res, 414, 'uri_too_long');
        expect(res.body.length).toBeLessThan(500);
      }
    });
    it('answers 414 uri_too_long for a route parameter over the router limit', async () => {
      expectHeraldError(await web.call('GET', `/v1/suppressions/email/${'b'.repeat(400)}`), 414, 'uri_too_long');
    });
    it('answers 431 headers_too_large over a real socket when the request line and headers pass Node’s limit', async () => {
      const res = await rawHttp(base, `GET /v1/notices/${'c'.repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      expectHeraldError(res, 431, 'headers_too_large');
    });
    it('answers 400 validation_failed to a request that is not HTTP', async () => {
      expectHeraldError(await rawHttp(base, 'HELLO THERE\r\n\r\n'), 400, 'validation_failed');
    });
  });

  describe('when the body is not JSON', () => {
    it('answers 415 unsupported_media_type to text/plain and other types, and stores nothing', async () => {
      const before = await keyCount();
      const plain = JSON.stringify(noticeBody());
      for (const type of ['text/plain', 'text/plain; charset=utf-8', 'application/xml', 'multipart/form-data; boundary=x']) {
        expectHeraldError(await web.call('POST', '/v1/notices', plain, { 'content-type': type }), 415, 'unsupported_media_type');
      }
      expectHeraldError(
        await web.call('POST', '/v1/notices/ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa/cancel', 'x', { 'content-type': 'text/plain' }),
        415,
        'unsupported_media_type',
      );
      expectHeraldError(await web.call('POST', '/v1/suppressions', 'x', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
      expect(await keyCount()).toBe(before);
    });
    it('answers 415 to a text/plain login post too: the form takes a form', async () => {
      expectHeraldError(
        await web.call('POST', '/admin/login', `token=${ADMIN}`, { authorization: '', 'content-type': 'text/plain' }),
        415,
        'unsupported_media_type',
      );
    });
  });

  describe('when the admin cookie is malformed', () => {
    for (const cookie of [
      'herald_admin=%E0%A4%A',
      'herald_admin=',
      '=;;herald_admin',
      `herald_admin=${'x'.repeat(5000)}`,
      'herald_admin="<script>"',
    ]) {
      it(`treats ${JSON.stringify(cookie.slice(0, 30))} as no login: 401 for tools, the login form for browsers`, async () => {
        expectHeraldError(await web.call('GET', '/admin/queues', undefined, { authorization: '', cookie }), 401, 'unauthorized');
        const page = await web.call('GET', '/admin/queues', undefined, { authorization: '', cookie, accept: 'text/html' });
        expect(page.statusCode).toBe(303);
        expect(page.headers.location).toMatch(/^\/admin\/login\?next=/);
      });
    }
  });

  describe('when the login’s return-to holds control characters or leaves the admin pages', () => {
    const login = (next: string) =>
      web.call('POST', '/admin/login', `token=${ADMIN}&next=${encodeURIComponent(next)}`, {
        authorization: '',
        'content-type': 'application/x-www-form-urlencoded',
      });
    for (const next of [
      '/admin/q\r\nSet-Cookie: x=1',
      '/admin/q\nX: 1',
      '/admin/q\u0000',
      '/admin/q\t',
      '/admin/ q',
      '/admin/\\\\evil.example',
      '//evil.example',
      '/admin//evil.example',
      'https://evil.example',
      `/admin/${'q'.repeat(600)}`,
      '/adminx',
      '/admin\\evil.example',
    ]) {
      it(`redirects to the overview instead of ${JSON.stringify(next.slice(0, 30))}`, async () => {
        const res: LightMyRequestResponse = await login(next);
        expect(res.statusCode).toBe(303);
        expect(res.headers.location).toBe('/admin');
      });
    }
    it('keeps the overview itself, with its query', async () => {
      expect((await login('/admin')).headers.location).toBe('/admin');
      expect((await login('/admin?tenant=acme')).headers.location).toBe('/admin?tenant=acme');
    });
    it('keeps a plain admin path with its query', async () => {
      expect((await login('/admin/notices/ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa?x=1')).headers.location).toBe(
        '/admin/notices/ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa?x=1',
      );
    });
    it('never writes a bad return-to into the login form', async () => {
      const page = await web.call('GET', `/admin/login?next=${encodeURIComponent('/admin/q"><script>alert(1)</script>')}`, undefined, {
        authorization: '',
      });
      expect(page.statusCode).toBe(200);
      expect(page.body).not.toContain('<script>');
      expect(page.body).toContain('name="next" value="/admin"');
    });
  });
});
