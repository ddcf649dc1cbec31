import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostmarkProvider, idempotencyMetadataValue } from '../../src/providers/postmark.js';
import type { EmailProvider, StatusObservation } from '../../src/providers/types.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { failure, sleep, unique } from '../helpers/providers.js';

let sandbox: Sandbox;
let email: EmailProvider;
const make = (overrides: { timeoutMs?: number; serverToken?: string; apiUrl?: string } = {}) =>
  createPostmarkProvider({
    serverToken: 'sandbox-server-token',
    from: 'herald@sandbox.example',
    messageStream: 'outbound',
    apiUrl: sandbox.url,
    timeoutMs: 2000,
    ...overrides,
  });

beforeAll(async () => {
  sandbox = await startSandbox();
  email = make();
});
afterAll(() => sandbox.close());

const message = (to: string, idempotencyKey = `key-${unique()}`) => ({
  to,
  subject: 'Terms update',
  text: 'The terms change on Friday.',
  idempotencyKey,
});

/** Sends to `<behaviour>+800ms+<label>@example.com` and reads the status at fixed points in time. */
async function timeline(behaviour: string): Promise<StatusObservation[]> {
  const sent = await email.send(message(`${behaviour}+800ms+${unique()}@example.com`));
  const started = Date.now();
  const at = async (ms: number) => {
    await sleep(Math.max(0, ms - (Date.now() - started)));
    return email.status(sent.providerMessageId);
  };
  // Before indexing (300 ms), after indexing, after the delay, after twice the delay.
  return [await at(0), await at(400), await at(1100), await at(1900)];
}

describe('Postmark adapter against the sandbox', () => {
  describe.concurrent('status over time, per behaviour', () => {
    it('delivered: pending (701), pending, then delivered', async () => {
      const [notIndexed, early, later, last] = await timeline('delivered');
      expect(notIndexed).toEqual({ providerStatus: 'NotFound(701)', status: 'pending', engagement: [] });
      expect(early).toEqual({ providerStatus: 'Sent', status: 'pending', engagement: [] });
      expect(later).toMatchObject({ providerStatus: 'Sent+Delivered', status: 'delivered' });
      expect(last?.status).toBe('delivered');
    });

    it('never: pending forever', async () => {
      const observations = await timeline('never');
      expect(observations.map((o) => o.status)).toEqual(['pending', 'pending', 'pending', 'pending']);
    });

    it('bounce: bounced and suppressed after the hard bounce', async () => {
      const [, early, later] = await timeline('bounce');
      expect(early?.status).toBe('pending');
      expect(later).toEqual({
        providerStatus: 'Sent+Bounced(HardBounce)',
        status: 'bounced',
        engagement: [],
        bounceType: 'HardBounce',
        suppressed: true,
      });
    });

    it('softbounce: deferred, not suppressed', async () => {
      const [, , later] = await timeline('softbounce');
      expect(later).toMatchObject({ status: 'deferred', bounceType: 'SoftBounce', providerStatus: 'Sent+Bounced(SoftBounce)' });
      expect(later?.suppressed).toBeUndefined();
    });

    it('deferred: deferred on Transient events', async () => {
      const [, early, later] = await timeline('deferred');
      expect(early?.status).toBe('pending');
      expect(later).toMatchObject({ status: 'deferred', providerStatus: 'Sent+Transient' });
    });

    it('opened: engagement is recorded, but it is never delivered', async () => {
      const [, , opened, clicked] = await timeline('opened');
      expect(opened).toEqual({ providerStatus: 'Sent+Opened', status: 'pending', engagement: ['opened'] });
      expect(clicked).toEqual({ providerStatus: 'Sent+Opened+LinkClicked', status: 'pending', engagement: ['opened', 'clicked'] });
    });

    it('flaky: 500 (server_error), then 429 (rate_limited, Retry-After 1 s), then accepted and delivered', async () => {
      const to = `flaky+600ms+${unique()}@example.com`;
      const first = await failure(email.send(message(to)));
      expect(first).toMatchObject({ kind: 'server_error', httpStatus: 500, retryable: true });
      const second = await failure(email.send(message(to)));
      expect(second).toMatchObject({ kind: 'rate_limited', httpStatus: 429, retryAfterMs: 1000 });
      const sent = await email.send(message(to));
      await sleep(900);
      expect((await email.status(sent.providerMessageId)).status).toBe('delivered');
    });

    it('timeout / hang-status: status reads time out within timeoutMs', async () => {
      const quick = make({ timeoutMs: 300 });
      for (const behaviour of ['timeout', 'hang-status']) {
        const sent = await quick.send(message(`${behaviour}+${unique()}@example.com`));
        await sleep(350);
        const error = await failure(quick.status(sent.providerMessageId));
        expect(error).toMatchObject({ kind: 'timeout', retryable: true });
        expect(error.elapsedMs).toBeGreaterThanOrEqual(250);
        expect(error.elapsedMs).toBeLessThan(1000);
      }
    });

    it('slow: answers after 1.5 s, so a 1 s timeout times out and a 3 s one succeeds', async () => {
      const [tooShort, longEnough] = await Promise.allSettled([
        make({ timeoutMs: 1000 }).send(message(`slow+${unique()}@example.com`)),
        make({ timeoutMs: 3000 }).send(message(`slow+${unique()}@example.com`)),
      ]);
      expect(tooShort.status === 'rejected' && tooShort.reason).toMatchObject({ kind: 'timeout' });
      expect(longEnough.status === 'fulfilled' && longEnough.value.providerMessageId).toEqual(expect.any(String));
    });
  });

  describe('send rejections', () => {
    it('rejected (422, ErrorCode 300) is rejected, not suppressed', async () => {
      const error = await failure(email.send(message(`rejected+${unique()}@example.com`)));
      expect(error).toMatchObject({ kind: 'rejected', httpStatus: 422, providerCode: 300, suppressed: false, retryable: false });
    });

    it('inactive (422, ErrorCode 406) is rejected and suppressed', async () => {
      const error = await failure(email.send(message(`inactive+${unique()}@example.com`)));
      expect(error).toMatchObject({ kind: 'rejected', httpStatus: 422, providerCode: 406, suppressed: true });
    });

    it('a bad server token (401, ErrorCode 10) is a server_error: the account, not the message', async () => {
      const error = await failure(make({ serverToken: 'bad-token' }).send(message('p@example.com')));
      expect(error).toMatchObject({ kind: 'server_error', httpStatus: 401, providerCode: 10 });
    });

    it('a refused connection is a server_error keeping the network cause', async () => {
      const closed = await startSandbox();
      const url = closed.url;
      await closed.close();
      const error = await failure(make({ apiUrl: url }).send(message('p@example.com')));
      expect(error.kind).toBe('server_error');
      expect(error.message).toMatch(/ECONNREFUSED/);
    });
  });

  describe('injected faults', () => {
    it.each([
      ['status_500', 'server_error', 500],
      ['status_503', 'server_error', 503],
    ] as const)('%s on send → %s', async (mode, kind, httpStatus) => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'postmark.send', mode, match: to });
      expect(await failure(email.send(message(to)))).toMatchObject({ kind, httpStatus });
    });

    it('concurrent calls each get the Retry-After of their own answer', async () => {
      const [slow, slower, fine] = [`p+${unique()}@example.com`, `p+${unique()}@example.com`, `p+${unique()}@example.com`];
      const sent = await Promise.all([slow, slower, fine].map((to) => email.send(message(to))));
      sandbox.injectFault({ operation: 'postmark.details', mode: 'status_429', retryAfterSeconds: 3, match: slow });
      sandbox.injectFault({ operation: 'postmark.details', mode: 'status_429', retryAfterSeconds: 5, match: slower });
      const [first, second, third] = await Promise.allSettled(sent.map((s) => email.status(s.providerMessageId)));
      expect(first?.status === 'rejected' && first.reason).toMatchObject({ kind: 'rate_limited', retryAfterMs: 3000 });
      expect(second?.status === 'rejected' && second.reason).toMatchObject({ kind: 'rate_limited', retryAfterMs: 5000 });
      expect(third?.status).toBe('fulfilled');
    });

    it('status_429 → rate_limited with the Retry-After the sandbox sent', async () => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'postmark.details', mode: 'status_429', retryAfterSeconds: 3, match: to });
      const sent = await email.send(message(to));
      expect(await failure(email.status(sent.providerMessageId))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 3000 });
    });

    it('hang → timeout within timeoutMs, and nothing was sent', async () => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'postmark.send', mode: 'hang', match: to });
      const error = await failure(make({ timeoutMs: 400 }).send(message(to)));
      expect(error.kind).toBe('timeout');
      expect(error.elapsedMs).toBeLessThan(1200);
      expect(sandbox.emails().filter((e) => e.to === to)).toHaveLength(0);
    });

    it('works with timeouts whose seconds do not convert back exactly (1001 ms)', async () => {
      // The SDK computes AbortSignal.timeout(timeout * 1000): 1.001 * 1000 is not an integer.
      const odd = make({ timeoutMs: 1001 });
      expect((await odd.send(message(`p+${unique()}@example.com`))).providerMessageId).toEqual(expect.any(String));
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'postmark.send', mode: 'hang', match: to });
      const error = await failure(odd.send(message(to)));
      expect(error.kind).toBe('timeout');
      expect(error.elapsedMs).toBeGreaterThanOrEqual(950);
    });
  });

  describe('findByIdempotencyKey (a send in doubt)', () => {
    it('finds an email whose send was accepted but never answered', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `notice-${unique()}-email-1`;
      sandbox.injectFault({ operation: 'postmark.send', mode: 'accept_then_hang', match: to });
      expect((await failure(make({ timeoutMs: 400 }).send(message(to, key)))).kind).toBe('timeout');
      const [stored] = sandbox.emails().filter((e) => e.to === to);
      expect(stored?.metadata).toEqual({ herald_key: key });

      const found = await email.findByIdempotencyKey(key, to);
      expect(found).toEqual({ providerMessageId: stored?.messageId, providerStatus: 'Sent' });
    });

    it('finds an email whose connection was dropped after sending', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `notice-${unique()}`;
      sandbox.injectFault({ operation: 'postmark.send', mode: 'accept_then_drop', match: to });
      expect((await failure(email.send(message(to, key)))).kind).toBe('server_error');
      await sleep(350);
      expect(await email.findByIdempotencyKey(key, to)).toMatchObject({ providerMessageId: expect.any(String) });
    });

    it('returns null when nothing was sent with that key to that address', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `notice-${unique()}`;
      await email.send(message(to, key));
      await email.send(message(`q+${unique()}@example.com`, `${key}-other`));
      await sleep(350);
      expect(await email.findByIdempotencyKey(`${key}-other`, to)).toBeNull();
      expect(await email.findByIdempotencyKey(key, `someone+${unique()}@example.com`)).toBeNull();
      expect(await email.findByIdempotencyKey(`never-${unique()}`, to)).toBeNull();
    });

    it('stores keys longer than 80 characters as their SHA-256 and still finds them', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `k${'x'.repeat(100)}${unique()}`;
      const extra = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`field${i}`, 'v'.repeat(100)]));
      const sent = await email.send({ ...message(to, key), metadata: { ...extra, a_name_longer_than_20_chars: 'x' } });
      const [stored] = sandbox.emails().filter((e) => e.to === to);
      expect(Object.keys(stored?.metadata ?? {})).toHaveLength(10);
      expect(stored?.metadata['herald_key']).toBe(idempotencyMetadataValue(key));
      expect(stored?.metadata['herald_key']).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(stored?.metadata['field0']).toHaveLength(80);
      await sleep(350);
      expect(await email.findByIdempotencyKey(key, to)).toMatchObject({ providerMessageId: sent.providerMessageId });
    });
  });
});
