import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSendgridProvider, sendgridCustomArgs } from '../../src/providers/sendgrid.js';
import type { EmailProvider, MessageScope, SearchWindow, StatusObservation } from '../../src/providers/types.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { BAD_SENDGRID_KEY } from '@herald/sandbox/sendgrid-api';
import { failure, sleep, unique } from '../helpers/providers.js';

let sandbox: Sandbox;
let email: EmailProvider;
/** A sandbox whose Email Logs lag 1.5 s, for the status timelines. */
let lagging: Sandbox;
let laggingEmail: EmailProvider;
const make = (overrides: { timeoutMs?: number; apiKey?: string; apiUrl?: string; logsLagMs?: number } = {}) =>
  createSendgridProvider({
    apiKey: 'SG.sandbox-api-key',
    from: 'herald@sandbox.example',
    apiUrl: sandbox.url,
    timeoutMs: 2000,
    logsLagMs: 5000,
    ...overrides,
  });

beforeAll(async () => {
  sandbox = await startSandbox();
  email = make();
  lagging = await startSandbox({ indexLagMs: 1500 });
  laggingEmail = make({ apiUrl: lagging.url });
});
afterAll(async () => {
  await sandbox.close();
  await lagging.close();
});

const message = (to: string, idempotencyKey = `key-${unique()}`) => ({
  to,
  subject: 'Terms update',
  text: 'The terms change on Friday.',
  idempotencyKey,
});

/** A search window whose last attempt is older than the logs may lag (5 s here). */
const settled = (since: number): SearchWindow => ({ since, lastAttemptAgeMs: 5000 });

const requestsFor = (to: string) => sandbox.requests().filter((r) => r.recipient === to || r.url.includes(encodeURIComponent(to)));

/**
 * Sends to `<behaviour>+3s+<label>@example.com` through a sandbox whose logs lag 1.5 s, reads the
 * status every 250 ms until `untilMs` after sending (or until `done` says so), and returns the
 * distinct observations in the order seen. Order, not timing, is asserted: a loaded machine may
 * skip a phase's reads but can never see them out of order.
 */
async function timeline(
  behaviour: string,
  untilMs: number,
  done: (o: StatusObservation) => boolean = () => false,
): Promise<StatusObservation[]> {
  const to = `${behaviour}+3s+${unique()}@example.com`;
  const scope: MessageScope = { to, since: Date.now() };
  const sent = await laggingEmail.send(message(to));
  const started = Date.now();
  const seen: StatusObservation[] = [];
  while (Date.now() - started < untilMs) {
    const observation = await laggingEmail.status(sent.providerMessageId, scope);
    if (JSON.stringify(seen.at(-1)) !== JSON.stringify(observation)) seen.push(observation);
    if (done(observation)) break;
    await sleep(250);
  }
  return seen;
}

/** True when `seen` follows `order` (each one of its entries, none skipped backwards). */
function inOrder(seen: StatusObservation[], order: StatusObservation[]): boolean {
  const positions = seen.map((o) => order.findIndex((p) => JSON.stringify(p) === JSON.stringify(o)));
  return positions.every((p, i) => p >= 0 && (i === 0 || p > positions[i - 1]!));
}

const NOT_LISTED: StatusObservation = { providerStatus: 'not_found', status: 'pending', engagement: [] };
const PROCESSED: StatusObservation = { providerStatus: 'processed+processed', status: 'pending', engagement: [] };

describe('SendGrid adapter against the sandbox', () => {
  describe.concurrent('status over time, per behaviour', () => {
    it('delivered: pending (not in the logs yet), pending (processed), then delivered', async () => {
      const delivered: StatusObservation = { providerStatus: 'delivered+processed+delivered', status: 'delivered', engagement: [] };
      const seen = await timeline('delivered', 6000, (o) => o.status === 'delivered');
      expect(seen[0]).toEqual(NOT_LISTED);
      expect(seen.at(-1)).toEqual(delivered);
      expect(inOrder(seen, [NOT_LISTED, PROCESSED, delivered])).toBe(true);
    });

    it('never: pending forever', async () => {
      const seen = await timeline('never', 4500);
      expect(seen.map((o) => o.status)).toEqual(seen.map(() => 'pending'));
      expect(inOrder(seen, [NOT_LISTED, PROCESSED])).toBe(true);
    });

    it('bounce: bounced and suppressed after the hard bounce', async () => {
      const bounced: StatusObservation = {
        providerStatus: 'bounced+processed+bounce(bounce)',
        status: 'bounced',
        engagement: [],
        bounceType: 'HardBounce',
        suppressed: true,
        suppressionSource: 'sendgrid_hard_bounce',
      };
      const seen = await timeline('bounce', 6000, (o) => o.status === 'bounced');
      expect(seen.at(-1)).toEqual(bounced);
      expect(inOrder(seen, [NOT_LISTED, PROCESSED, bounced])).toBe(true);
    });

    it('softbounce: deferred (blocked), not suppressed', async () => {
      const blocked: StatusObservation = {
        providerStatus: 'blocked+processed+bounce(blocked)',
        status: 'deferred',
        engagement: [],
        bounceType: 'SoftBounce',
      };
      const seen = await timeline('softbounce', 6000, (o) => o.status === 'deferred');
      expect(seen.at(-1)).toEqual(blocked);
      expect(inOrder(seen, [NOT_LISTED, PROCESSED, blocked])).toBe(true);
    });

    it('deferred: deferred on deferred events', async () => {
      const deferred: StatusObservation = { providerStatus: 'deferred+processed+deferred', status: 'deferred', engagement: [] };
      const seen = await timeline('deferred', 6000, (o) => o.status === 'deferred');
      expect(seen.at(-1)).toEqual(deferred);
      expect(inOrder(seen, [NOT_LISTED, PROCESSED, deferred])).toBe(true);
    });

    it('opened: the summary says delivered, but an open is never delivery', async () => {
      const opened: StatusObservation = { providerStatus: 'delivered+processed+open', status: 'pending', engagement: ['opened'] };
      const clicked: StatusObservation = {
        providerStatus: 'delivered+processed+open+click',
        status: 'pending',
        engagement: ['opened', 'clicked'],
      };
      const seen = await timeline('opened', 9000, (o) => o.engagement.includes('clicked'));
      expect(seen).toContainEqual(opened);
      expect(seen.at(-1)).toEqual(clicked);
      expect(inOrder(seen, [NOT_LISTED, PROCESSED, opened, clicked])).toBe(true);
    });

    it('inactive: accepted, then dropped: failed and suppressed', async () => {
      const to = `inactive+${unique()}@example.com`;
      const sent = await email.send(message(to));
      await sleep(350);
      expect(await email.status(sent.providerMessageId, { to, since: Date.now() - 1000 })).toEqual({
        providerStatus: 'dropped+processed+dropped',
        status: 'failed',
        engagement: [],
        suppressed: true,
        suppressionSource: 'sendgrid_dropped',
      });
    });

    it('flaky: 500 (server_error), then 429 (rate_limited, from X-RateLimit-Reset), then accepted and delivered', async () => {
      const to = `flaky+600ms+${unique()}@example.com`;
      const since = Date.now();
      const first = await failure(email.send(message(to)));
      expect(first).toMatchObject({
        kind: 'server_error',
        httpStatus: 500,
        retryable: true,
        message: 'sendgrid: HTTP 500: internal server error',
      });
      const second = await failure(email.send(message(to)));
      expect(second).toMatchObject({ kind: 'rate_limited', httpStatus: 429 });
      // Reset is in whole epoch seconds: one second after the next whole second, less the answer's way back.
      expect(second.retryAfterMs).toBeGreaterThan(0);
      expect(second.retryAfterMs).toBeLessThanOrEqual(2000);
      const sent = await email.send(message(to));
      await sleep(900);
      expect((await email.status(sent.providerMessageId, { to, since })).status).toBe('delivered');
    });

    it('timeout / hang-status: status reads time out within timeoutMs', async () => {
      const quick = make({ timeoutMs: 300 });
      for (const behaviour of ['timeout', 'hang-status']) {
        const to = `${behaviour}+${unique()}@example.com`;
        const sent = await email.send(message(to));
        await sleep(350);
        const scope = { to, since: Date.now() - 1000 };
        // The search lists it; reading it hangs until the 300 ms timeout.
        const error = await failure(quick.status(sent.providerMessageId, scope));
        expect(error).toMatchObject({ kind: 'timeout', retryable: true });
        expect(error.elapsedMs).toBeGreaterThanOrEqual(250);
        expect(error.elapsedMs).toBeLessThan(3000);
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

  describe('send', () => {
    it('answers with the X-Message-Id and carries Herald key and metadata in custom_args', async () => {
      const to = `p+${unique()}@example.com`;
      const sent = await email.send({ ...message(to, 'notice-1-email'), metadata: { notice_id: 'notice-1' } });
      expect(sent).toEqual({ providerMessageId: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/), providerStatus: '202' });
      const [stored] = sandbox.emails().filter((e) => e.to === to);
      expect(stored?.messageId.startsWith(`${sent.providerMessageId}.`)).toBe(true);
      expect(stored).toMatchObject({ from: 'herald@sandbox.example', subject: 'Terms update', textBody: 'The terms change on Friday.' });
      expect(stored?.metadata).toEqual({ herald_key: 'notice-1-email', notice_id: 'notice-1' });
    });

    it('keeps custom_args within 10,000 bytes, Herald key first', () => {
      const args = sendgridCustomArgs('k', { a: 'x'.repeat(6000), b: 'y'.repeat(6000), c: 'z', herald_key: 'other' });
      expect(Object.keys(args)).toEqual(['herald_key', 'a', 'c']);
      expect(args['herald_key']).toBe('k');
    });

    it('a read after the first costs one call: the Email Logs ID is resolved once', async () => {
      const to = `delivered+100ms+${unique()}@example.com`;
      const scope = { to, since: Date.now() };
      const sent = await email.send(message(to));
      await sleep(400);
      const before = sandbox.requests().length;
      await email.status(sent.providerMessageId, scope);
      const first = sandbox
        .requests()
        .slice(before)
        .map((r) => r.operation);
      await email.status(sent.providerMessageId, scope);
      const second = sandbox
        .requests()
        .slice(before + first.length)
        .map((r) => r.operation);
      expect(first).toEqual(['sendgrid.logs_search', 'sendgrid.logs_message']);
      expect(second).toEqual(['sendgrid.logs_message']);
    });
  });

  describe('send rejections', () => {
    it('rejected (400, invalid address) is rejected, not suppressed, with SendGrid message and field', async () => {
      const error = await failure(email.send(message(`rejected+${unique()}@example.com`)));
      expect(error).toMatchObject({ kind: 'rejected', httpStatus: 400, suppressed: false, retryable: false });
      expect(error.message).toBe('sendgrid: HTTP 400: Does not contain a valid address. (personalizations.0.to.0.email)');
    });

    it('a bad API key (401) is a server_error: the account, not the message', async () => {
      const error = await failure(make({ apiKey: BAD_SENDGRID_KEY }).send(message('p@example.com')));
      expect(error).toMatchObject({ kind: 'server_error', httpStatus: 401 });
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

  describe('verify', () => {
    it('reads the key scopes and sends nothing', async () => {
      expect(await email.verify()).toBe('API key with 3 scopes, mail.send included');
      expect(await failure(make({ apiKey: BAD_SENDGRID_KEY }).verify())).toMatchObject({ kind: 'server_error', httpStatus: 401 });
    });
  });

  describe('injected faults', () => {
    it.each([
      ['status_500', 'server_error', 500],
      ['status_503', 'server_error', 503],
    ] as const)('%s on send → %s', async (mode, kind, httpStatus) => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'sendgrid.send', mode, match: to });
      expect(await failure(email.send(message(to)))).toMatchObject({ kind, httpStatus });
    });

    it('status_429 on a logs read → rate_limited, coming back at X-RateLimit-Reset', async () => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'sendgrid.logs_search', mode: 'status_429', retryAfterSeconds: 3, match: to });
      const sent = await email.send(message(to));
      const error = await failure(email.status(sent.providerMessageId, { to, since: Date.now() }));
      expect(error).toMatchObject({ kind: 'rate_limited', httpStatus: 429 });
      expect(error.retryAfterMs).toBeGreaterThan(1000);
      expect(error.retryAfterMs).toBeLessThanOrEqual(4000);
    });

    it('hang → timeout within timeoutMs, and nothing was sent', async () => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'sendgrid.send', mode: 'hang', match: to });
      const error = await failure(make({ timeoutMs: 400 }).send(message(to)));
      expect(error.kind).toBe('timeout');
      expect(error.elapsedMs).toBeLessThan(1200);
      expect(sandbox.emails().filter((e) => e.to === to)).toHaveLength(0);
    });
  });

  describe('findByIdempotencyKey (a send in doubt)', () => {
    it('finds an email whose send was accepted but never answered, through the Email Logs', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `notice-${unique()}-email`;
      const since = Date.now();
      sandbox.injectFault({ operation: 'sendgrid.send', mode: 'accept_then_hang', match: to });
      expect((await failure(make({ timeoutMs: 400 }).send(message(to, key)))).kind).toBe('timeout');
      const [stored] = sandbox.emails().filter((e) => e.to === to);
      expect(stored?.metadata).toEqual({ herald_key: key });

      const found = await email.findByIdempotencyKey(key, to, settled(since));
      expect(found).toEqual({ providerMessageId: stored?.messageId, providerStatus: 'processed' });
      // The full Email Logs ID reads directly.
      const before = sandbox.requests().length;
      expect((await email.status(found!.providerMessageId)).status).toBe('pending');
      expect(
        sandbox
          .requests()
          .slice(before)
          .map((r) => r.operation),
      ).toEqual(['sendgrid.logs_message']);
    });

    it('finds an email whose connection was dropped after sending', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `notice-${unique()}`;
      sandbox.injectFault({ operation: 'sendgrid.send', mode: 'accept_then_drop', match: to });
      expect((await failure(email.send(message(to, key)))).kind).toBe('server_error');
      await sleep(350);
      expect(await email.findByIdempotencyKey(key, to, settled(Date.now() - 1000))).toMatchObject({
        providerMessageId: expect.any(String),
      });
    });

    it('returns null when nothing was sent with that key to that address', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `notice-${unique()}`;
      const since = Date.now();
      await email.send(message(to, key));
      await email.send(message(`q+${unique()}@example.com`, `${key}-other`));
      await sleep(350);
      expect(await email.findByIdempotencyKey(`${key}-other`, to, settled(since))).toBeNull();
      expect(await email.findByIdempotencyKey(key, `someone+${unique()}@example.com`, settled(since))).toBeNull();
      expect(await email.findByIdempotencyKey(`never-${unique()}`, to, settled(since))).toBeNull();
      expect(await email.findByIdempotencyKey(key, to, settled(since))).toMatchObject({ providerMessageId: expect.any(String) });
    });

    it('not found while the attempt is younger than the logs may lag: stays in doubt (throws), null once older', async () => {
      const to = `p+${unique()}@example.com`;
      const since = Date.now();
      sandbox.injectFault({ operation: 'sendgrid.send', mode: 'hang', match: to });
      expect((await failure(make({ timeoutMs: 300 }).send(message(to, 'k')))).kind).toBe('timeout');
      const young = await failure(email.findByIdempotencyKey('k', to, { since, lastAttemptAgeMs: 4999 }));
      expect(young).toMatchObject({ kind: 'server_error', retryable: true });
      expect(young.message).toMatch(/not in the Email Logs yet/);
      expect(await email.findByIdempotencyKey('k', to, { since, lastAttemptAgeMs: 5000 })).toBeNull();
    });

    it('a failed read of a listed message keeps the send in doubt (throws)', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `notice-${unique()}`;
      await email.send(message(to, key));
      await sleep(350);
      sandbox.injectFault({ operation: 'sendgrid.logs_message', mode: 'status_503', match: to });
      expect(await failure(email.findByIdempotencyKey(key, to, settled(Date.now() - 1000)))).toMatchObject({
        kind: 'server_error',
        httpStatus: 503,
      });
      expect(requestsFor(to).map((r) => r.operation)).toEqual(['sendgrid.send', 'sendgrid.logs_search', 'sendgrid.logs_message']);
    });
  });
});
