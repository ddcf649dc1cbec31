import { connect } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { noticeRequest, policyRequest, validNotice, type ApiRequest } from '../helpers/arbitraries.js';

/**
 * Whatever a client sends to the write routes — random, hostile, oversized — Herald answers
 * with a catalogued 4xx or a success, never a 500; a 4xx leaves no trace in Redis; and every
 * request gets its answer.
 */
const prefix = testPrefix('prop');
let web: WebUnderTest;
/** How long an answer may take before the request counts as hung: far beyond any real answer. */
const HANG_MS = 10_000;

beforeAll(async () => {
  // A small body limit puts the 413 path within reach of cheap generated bodies.
  web = await startWebUnderTest(testConfig(prefix, { HERALD_BODY_LIMIT: '8192' }));
});
afterAll(async () => {
  await web.close();
  await cleanUp(prefix);
});

/**
 * Everything a request could leave behind: the keys under the prefix and their sizes. The
 * rate limiter's counters are left out: counting every request, refused ones too, is its job.
 */
async function footprint(): Promise<string> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await web.redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 5000);
    cursor = next;
    keys.push(...batch.filter((k) => !k.startsWith(`${prefix}:{rl}:`)));
  } while (cursor !== '0');
  keys.sort();
  const pipeline = web.redis.pipeline();
  for (const key of keys) pipeline.type(key);
  const types = (await pipeline.exec()) ?? [];
  const sizes = web.redis.pipeline();
  keys.forEach((key, i) => {
    const type = types[i]![1];
    if (type === 'stream') sizes.xlen(key);
    else if (type === 'zset') sizes.zcard(key);
    else if (type === 'list') sizes.llen(key);
    else sizes.hlen(key);
  });
  const counts = (await sizes.exec()) ?? [];
  return keys.map((key, i) => `${key}=${String(counts[i]![1])}`).join('\n');
}

function withinBound<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} got no answer within ${HANG_MS} ms`)), HANG_MS);
  });
  return Promise.race([work, hung]).finally(() => clearTimeout(timer));
}

async function inject(method: 'POST' | 'PUT', url: string, req: ApiRequest) {
  return withinBound(web.app.inject({ method, url, payload: req.body, headers: req.headers }), `${method} ${url}`);
}

/** A 4xx or 5xx must be the catalogued JSON error. */
function expectErrorShape(status: number, body: string) {
  if (status < 400) return;
  const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown } };
  expect(typeof parsed.error?.code).toBe('string');
  expect(typeof parsed.error?.message).toBe('string');
}

describe('POST /v1/notices with random and hostile requests', () => {
  it('never answers 5xx, never hangs, and creates nothing on a 4xx', async () => {
    await fc.assert(
      fc.asyncProperty(noticeRequest, async (req) => {
        const before = await footprint();
        const res = await inject('POST', '/v1/notices', req);
        expect(res.statusCode, res.body).toBeLessThan(500);
        expectErrorShape(res.statusCode, res.body);
        if (res.statusCode >= 400) expect(await footprint()).toBe(before);
        else {
          expect([200, 202]).toContain(res.statusCode);
          // Whatever got in has only the metadata names the API allows: no line terminator slipped past the pattern.
          const metadata = (JSON.parse(req.body.toString()) as { metadata?: Record<string, unknown> }).metadata ?? {};
          for (const name of Object.keys(metadata)) expect(name).toMatch(/^[A-Za-z0-9_.:-]{1,64}$/);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('still accepts a valid notice afterwards', async () => {
    const res = await web.call('POST', '/v1/notices', validNotice());
    expect(res.statusCode).toBe(202);
  });
});

describe('PUT /v1/recipients/:id/policy with random and hostile requests', () => {
  it('never answers 5xx, never hangs, and changes no policy on a 4xx', async () => {
    await fc.assert(
      fc.asyncProperty(policyRequest, async (req) => {
        const url = `/v1/recipients/${req.recipient}/policy`;
        const before = await footprint();
        const res = await inject('PUT', url, req);
        expect(res.statusCode, res.body).toBeLessThan(500);
        if (res.statusCode >= 400) expect(await footprint()).toBe(before);
        const read = await withinBound(web.app.inject({ method: 'GET', url, headers: req.headers }), `GET ${url}`);
        expect(read.statusCode, read.body).toBeLessThan(500);
      }),
      { numRuns: 200 },
    );
  });
});

/**
 * The same over a real socket, where the HTTP parser sees what `inject` smooths over: bad
 * framing, conflicting lengths, odd header names and bytes.
 */
describe('the write routes over a raw socket', () => {
  let port: number;
  beforeAll(async () => {
    await web.app.listen({ port: 0, host: '127.0.0.1' });
    port = (web.app.server.address() as { port: number }).port;
  });

  function raw(bytes: Buffer): Promise<number> {
    return withinBound(
      new Promise<number>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let answer = '';
        socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => {
          const status = /^HTTP\/1\.1 (\d{3})/.exec(answer);
          if (status) resolve(Number(status[1]));
          else reject(new Error(`no HTTP answer: ${JSON.stringify(answer.slice(0, 200))}`));
        });
        // Not half-closed: the server closes after its answer (Connection: close).
        socket.write(bytes);
      }),
      'a raw request',
    );
  }

  const framing = fc.constantFrom(
    'content-length',
    'chunked',
    'both',
    'duplicate-length',
    'negative-length',
    'bad-chunk',
    'bad-header-name',
    'huge-header',
  );

  it('never answers 5xx and never hangs', async () => {
    await fc.assert(
      fc.asyncProperty(noticeRequest, framing, fc.constantFrom('/v1/notices', '/v1/recipients/prop-1/policy'), async (req, frame, path) => {
        const method = path === '/v1/notices' ? 'POST' : 'PUT';
        const body = Buffer.isBuffer(req.body) ? req.body : Buffer.from(req.body, 'utf8');
        const head: string[] = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close'];
        for (const [name, value] of Object.entries(req.headers)) {
          if (name !== 'transfer-encoding' && name !== 'content-length') head.push(`${name}: ${value}`);
        }
        let payload = body;
        switch (frame) {
          case 'content-length':
            head.push(`Content-Length: ${body.length}`);
            break;
          case 'chunked':
            head.push('Transfer-Encoding: chunked');
            payload = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
            break;
          case 'both':
            head.push(`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked');
            break;
          case 'duplicate-length':
            head.push(`Content-Length: ${body.length}`, `Content-Length: ${body.length + 1}`);
            break;
          case 'negative-length':
            head.push('Content-Length: -1');
            break;
          case 'bad-chunk':
            head.push('Transfer-Encoding: chunked');
            payload = Buffer.concat([Buffer.from('zz\r\n'), body, Buffer.from('\r\n0\r\n\r\n')]);
            break;
          case 'bad-header-name':
            head.push(`Content-Length: ${body.length}`, 'Bad Header: x');
            break;
          case 'huge-header':
            head.push(`Content-Length: ${body.length}`, `X-Huge: ${'h'.repeat(20_000)}`);
            break;
        }
        const before = await footprint();
        const status = await raw(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), payload]));
        expect(status).toBeLessThan(500);
        if (status >= 400) expect(await footprint()).toBe(before);
      }),
      { numRuns: 150 },
    );
  });
});
