import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { classifyMailgunError } from '../../src/providers/classify.js';
import { bareMessageId, createMailgunProvider, keyVariableValue, mailgunVariables } from '../../src/providers/mailgun.js';
import { mailgunObservation } from '../../src/providers/normalize.js';
import { createEmailProvider, emailUrl } from '../../src/providers/registry.js';
import type { EmailProvider, StatusObservation } from '../../src/providers/types.js';
import { startSandbox, UNKNOWN_MAILGUN_DOMAIN, type Sandbox } from '@herald/sandbox';
import { configProblems, TEST_ARCHIVE_KEY } from '../helpers/env.js';
import { failure, sleep, unique } from '../helpers/providers.js';

let sandbox: Sandbox;
let email: EmailProvider;
const DOMAIN = 'mg.sandbox.example';
const make = (overrides: { timeoutMs?: number; apiKey?: string; apiUrl?: string; domain?: string } = {}) =>
  createMailgunProvider({
    apiKey: 'sandbox-mailgun-key',
    domain: DOMAIN,
    from: 'Herald <herald@mg.sandbox.example>',
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
  metadata: { notice_id: `ntc-${unique()}` },
});

/** Sends to `<behaviour>+800ms+<label>@example.com` and reads the status at fixed points in time. */
async function timeline(behaviour: string): Promise<StatusObservation[]> {
  const sent = await email.send(message(`${behaviour}+800ms+${unique()}@example.com`));
  const started = Date.now();
  const at = async (ms: number) => {
    await sleep(Math.max(0, ms - (Date.now() - started)));
    return email.status(sent.providerMessageId);
  };
  // Before the events are listed (300 ms), after, after the delay, after twice the delay.
  return [await at(0), await at(400), await at(1100), await at(1900)];
}

describe('Mailgun adapter against the sandbox, through mailgun.js', () => {
  describe('send', () => {
    it('sends the key as a user variable and answers the id without angle brackets', async () => {
      const to = `delivered+${unique()}@example.com`;
      const key = `ntc_${unique()}-email`;
      const sent = await email.send(message(to, key));
      expect(sent.providerMessageId).toMatch(/^\d{14}\.[0-9a-f]{16}@mg\.sandbox\.example$/);
      const [stored] = sandbox.emails().filter((e) => e.to === to);
      expect(stored).toMatchObject({
        messageId: sent.providerMessageId,
        from: 'Herald <herald@mg.sandbox.example>',
        subject: 'Terms update',
      });
      expect(stored?.metadata).toEqual({ herald_key: key, notice_id: expect.stringMatching(/^ntc-/) });
      expect(
        sandbox
          .requests()
          .filter((r) => r.recipient === to)
          .map((r) => [r.operation, r.method, r.path, r.status]),
      ).toEqual([['mailgun.send', 'POST', `/v3/${DOMAIN}/messages`, 200]]);
    });
  });

  describe.concurrent('status over time, per behaviour', () => {
    it('delivered: pending (no events yet), pending (accepted), then delivered', async () => {
      const [none, accepted, later, last] = await timeline('delivered');
      expect(none).toEqual({ providerStatus: 'none', status: 'pending', engagement: [] });
      expect(accepted).toEqual({ providerStatus: 'accepted', status: 'pending', engagement: [] });
      expect(later).toEqual({ providerStatus: 'accepted+delivered', status: 'delivered', engagement: [] });
      expect(last?.status).toBe('delivered');
    });

    it('reads the status through the Logs API only, never the deprecated Events API', async () => {
      const to = `delivered+100ms+${unique()}@example.com`;
      const sent = await email.send(message(to));
      await sleep(400);
      expect(await email.status(sent.providerMessageId)).toMatchObject({ providerStatus: 'accepted+delivered', status: 'delivered' });
      const reads = sandbox.requests().filter((r) => r.recipient === to && r.operation !== 'mailgun.send');
      expect(reads.map((r) => [r.operation, r.method, r.path, r.status])).toEqual([['mailgun.logs', 'POST', '/v1/analytics/logs', 200]]);
    });

    it('never: pending forever', async () => {
      const observations = await timeline('never');
      expect(observations.map((o) => o.status)).toEqual(['pending', 'pending', 'pending', 'pending']);
    });

    it('bounce: a permanent failure is bounced, and the address suppressed', async () => {
      const [, early, later] = await timeline('bounce');
      expect(early?.status).toBe('pending');
      expect(later).toEqual({
        providerStatus: 'accepted+failed(permanent:bounce)',
        status: 'bounced',
        engagement: [],
        bounceType: 'permanent:bounce',
        errorCode: 550,
        suppressed: true,
        suppressionSource: 'mailgun_bounce',
      });
    });

    it('softbounce and deferred: a temporary failure is deferred, not suppressed', async () => {
      for (const behaviour of ['softbounce', 'deferred']) {
        const [, , later] = await timeline(behaviour);
        expect(later).toMatchObject({ status: 'deferred', providerStatus: 'accepted+failed(temporary:generic)' });
        expect(later?.suppressed).toBeUndefined();
      }
    });

    it('opened: engagement is recorded, but it is never delivered', async () => {
      const [, , opened, clicked] = await timeline('opened');
      expect(opened).toEqual({ providerStatus: 'accepted+opened', status: 'pending', engagement: ['opened'] });
      expect(clicked).toEqual({ providerStatus: 'accepted+opened+clicked', status: 'pending', engagement: ['opened', 'clicked'] });
    });

    it('inactive: accepted, then failed with suppress-bounce (605): failed and suppressed', async () => {
      const sent = await email.send(message(`inactive+${unique()}@example.com`));
      await sleep(350);
      expect(await email.status(sent.providerMessageId)).toEqual({
        providerStatus: 'accepted+failed(permanent:suppress-bounce)',
        status: 'failed',
        engagement: [],
        bounceType: 'permanent:suppress-bounce',
        errorCode: 605,
        suppressed: true,
        suppressionSource: 'mailgun_suppressed',
      });
    });

    it('flaky: 500 (server_error), then 429 (rate_limited, retry time from the message text), then accepted and delivered', async () => {
      const to = `flaky+600ms+${unique()}@example.com`;
      const first = await failure(email.send(message(to)));
      expect(first).toMatchObject({ kind: 'server_error', httpStatus: 500, retryable: true });
      const second = await failure(email.send(message(to)));
      expect(second).toMatchObject({ kind: 'rate_limited', httpStatus: 429 });
      // "try again after <date>" has whole seconds, rounded up by the sandbox: 1 s to 2 s, less the answer's transit.
      expect(second.retryAfterMs).toBeGreaterThan(500);
      expect(second.retryAfterMs).toBeLessThanOrEqual(2000);
      const sent = await email.send(message(to));
      await sleep(900);
      expect((await email.status(sent.providerMessageId)).status).toBe('delivered');
    });

    it('timeout / hang-status: status reads time out within timeoutMs (not a 400 rejection)', async () => {
      const quick = make({ timeoutMs: 300 });
      for (const behaviour of ['timeout', 'hang-status']) {
        const sent = await quick.send(message(`${behaviour}+${unique()}@example.com`));
        await sleep(350);
        const error = await failure(quick.status(sent.providerMessageId));
        expect(error).toMatchObject({ kind: 'timeout', retryable: true, httpStatus: undefined });
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

  describe('send rejections and account problems', () => {
    it('rejected: a real 400 is rejected, not retryable, not suppressed', async () => {
      const error = await failure(email.send(message(`rejected+${unique()}@example.com`)));
      expect(error).toMatchObject({ kind: 'rejected', httpStatus: 400, suppressed: false, retryable: false });
      expect(error.message).toMatch(/not a valid address/);
    });

    it('a bad API key (401 Forbidden) is a server_error: the account, not the message', async () => {
      const error = await failure(make({ apiKey: 'bad-token' }).send(message('p@example.com')));
      expect(error).toMatchObject({ kind: 'server_error', httpStatus: 401 });
    });

    it('an unknown domain (404 Domain not found) is a server_error: the configuration, not the message', async () => {
      const error = await failure(make({ domain: UNKNOWN_MAILGUN_DOMAIN }).send(message('p@example.com')));
      expect(error).toMatchObject({ kind: 'server_error', httpStatus: 404 });
      expect(error.message).toMatch(/Domain not found/);
    });

    it('a refused connection (the SDK says 400 ECONNREFUSED) is a server_error, never a rejection', async () => {
      const closed = await startSandbox();
      const url = closed.url;
      await closed.close();
      const error = await failure(make({ apiUrl: url }).send(message('p@example.com')));
      expect(error).toMatchObject({ kind: 'server_error', retryable: true, httpStatus: undefined });
      expect(error.message).toMatch(/ECONNREFUSED/);
    });

    it("the API's root answer on a wrong URL ('Incorrect url') is a server_error", () => {
      const sdkError = { type: 'MailgunAPIError', status: 400, message: 'Incorrect url', details: 'Mailgun Magnificent API' };
      expect(classifyMailgunError(sdkError)).toMatchObject({ kind: 'server_error', httpStatus: 400 });
    });

    it('a 400 "Domain ... is not allowed to send" blames the account', () => {
      const details = 'Domain sandbox123.mailgun.org is not allowed to send: Sandbox subdomains are for test purposes only.';
      expect(classifyMailgunError({ type: 'MailgunAPIError', status: 400, message: 'Bad Request', details })).toMatchObject({
        kind: 'server_error',
      });
    });

    it('a 429 without a readable date is rate_limited without a retry time', () => {
      const error = classifyMailgunError({ type: 'MailgunAPIError', status: 429, message: 'Too Many Requests', details: 'slow down' });
      expect(error).toMatchObject({ kind: 'rate_limited', retryAfterMs: undefined });
    });
  });

  describe('injected faults', () => {
    it.each([
      ['status_500', 'server_error', 500],
      ['status_503', 'server_error', 503],
    ] as const)('%s on send → %s', async (mode, kind, httpStatus) => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'mailgun.send', mode, match: to });
      expect(await failure(email.send(message(to)))).toMatchObject({ kind, httpStatus });
    });

    it('status_429 on the logs → rate_limited with the retry time of the message text', async () => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'mailgun.logs', mode: 'status_429', retryAfterSeconds: 3, match: to });
      const sent = await email.send(message(to));
      const error = await failure(email.status(sent.providerMessageId));
      expect(error).toMatchObject({ kind: 'rate_limited', httpStatus: 429 });
      expect(error.retryAfterMs).toBeGreaterThan(2500);
      expect(error.retryAfterMs).toBeLessThanOrEqual(4000);
    });

    it('hang → timeout within timeoutMs, and nothing was sent', async () => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'mailgun.send', mode: 'hang', match: to });
      const error = await failure(make({ timeoutMs: 400 }).send(message(to)));
      expect(error.kind).toBe('timeout');
      expect(error.elapsedMs).toBeLessThan(1200);
      expect(sandbox.emails().filter((e) => e.to === to)).toHaveLength(0);
    });
  });

  describe('findByIdempotencyKey (a send in doubt)', () => {
    it('finds an email whose send was accepted but never answered', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `ntc_${unique()}-email`;
      sandbox.injectFault({ operation: 'mailgun.send', mode: 'accept_then_hang', match: to });
      expect((await failure(make({ timeoutMs: 400 }).send(message(to, key)))).kind).toBe('timeout');
      const [stored] = sandbox.emails().filter((e) => e.to === to);
      expect(stored?.metadata['herald_key']).toBe(key);
      const found = await email.findByIdempotencyKey(key, to);
      expect(found).toEqual({ providerMessageId: stored?.messageId, providerStatus: 'accepted' });
      const search = sandbox.requests().filter((r) => r.recipient === to && r.operation !== 'mailgun.send');
      expect(search.map((r) => [r.operation, r.method, r.path])).toEqual([['mailgun.logs', 'POST', '/v1/analytics/logs']]);
    });

    it('finds an email whose connection was dropped after sending', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `ntc_${unique()}`;
      sandbox.injectFault({ operation: 'mailgun.send', mode: 'accept_then_drop', match: to });
      expect((await failure(email.send(message(to, key)))).kind).toBe('server_error');
      await sleep(350);
      expect(await email.findByIdempotencyKey(key, to)).toMatchObject({ providerMessageId: expect.any(String) });
    });

    it('returns null when nothing was sent with that key to that address', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `ntc_${unique()}`;
      await email.send(message(to, key));
      await email.send(message(`q+${unique()}@example.com`, `${key}-other`));
      await sleep(350);
      expect(await email.findByIdempotencyKey(`${key}-other`, to)).toBeNull();
      expect(await email.findByIdempotencyKey(key, `someone+${unique()}@example.com`)).toBeNull();
      expect(await email.findByIdempotencyKey(`never-${unique()}`, to)).toBeNull();
    });

    it('follows the log pages (their tokens) to an older send to the same address', async () => {
      const to = `p+${unique()}@example.com`;
      const key = `ntc_${unique()}-first`;
      const first = await email.send(message(to, key));
      // 300 later sends to the same address fill the first page (newest first).
      for (let i = 0; i < 300; i += 20) await Promise.all(Array.from({ length: 20 }, () => email.send(message(to))));
      await sleep(350);
      expect(await email.findByIdempotencyKey(key, to)).toEqual({ providerMessageId: first.providerMessageId, providerStatus: 'accepted' });
      // 301 accepted items, 100 a page, newest first: the first send is on the fourth page.
      const pages = sandbox.requests().filter((r) => r.operation === 'mailgun.logs' && r.recipient === to);
      expect(pages).toHaveLength(4);
    });

    it('a search that fails (5xx) throws: it never answers "not found"', async () => {
      const to = `p+${unique()}@example.com`;
      sandbox.injectFault({ operation: 'mailgun.logs', mode: 'status_503', match: to });
      expect(await failure(email.findByIdempotencyKey('k', to))).toMatchObject({ kind: 'server_error', httpStatus: 503 });
    });
  });

  describe('verify (herald doctor)', () => {
    it('reads the domain and sends nothing', async () => {
      expect(await email.verify()).toBe(`domain "${DOMAIN}" (active)`);
      expect(await failure(make({ apiKey: 'bad-token' }).verify())).toMatchObject({ kind: 'server_error', httpStatus: 401 });
    });
  });

  describe('pure helpers', () => {
    it('strips the angle brackets of a send answer id', () => {
      expect(bareMessageId('<20111114174239.25659.5817@samples.mailgun.org>')).toBe('20111114174239.25659.5817@samples.mailgun.org');
      expect(bareMessageId('abc@d')).toBe('abc@d');
    });

    it('keeps the user variables within 16 kB, Herald’s key first, a long key as its SHA-256', () => {
      const long = 'k'.repeat(300);
      expect(keyVariableValue(long)).toMatch(/^sha256:[0-9a-f]{64}$/);
      const variables = mailgunVariables('key', {
        a: 'x'.repeat(10_000),
        b: 'y'.repeat(10_000),
        c: 'z',
        herald_key: 'spoof',
        'bad name': 'v',
      });
      expect(Object.keys(variables)).toEqual(['v:herald_key', 'v:a', 'v:c']);
      expect(variables['v:herald_key']).toBe('key');
    });
  });

  describe('status mapping', () => {
    const at = (event: string, timestamp: number, extra: Record<string, unknown> = {}) => ({ event, timestamp, ...extra });

    it('sorts events by timestamp: Mailgun does not promise their order', () => {
      expect(mailgunObservation([at('delivered', 2), at('accepted', 1)])).toMatchObject({
        status: 'delivered',
        providerStatus: 'accepted+delivered',
      });
    });

    it('a temporary failure after delivery leaves it delivered; a delayed permanent bounce after it wins', () => {
      const temporary = at('failed', 3, { severity: 'temporary', reason: 'generic' });
      expect(mailgunObservation([at('accepted', 1), at('delivered', 2), temporary]).status).toBe('delivered');
      const delayed = at('failed', 3, { severity: 'permanent', reason: 'bounce', 'delivery-status': { code: 550 } });
      expect(mailgunObservation([at('accepted', 1), at('delivered', 2), delayed])).toMatchObject({ status: 'bounced', suppressed: true });
    });

    it('rejected is failed, not suppressed; unsubscribed and complained are never delivery', () => {
      expect(mailgunObservation([at('rejected', 1)])).toEqual({ providerStatus: 'rejected', status: 'failed', engagement: [] });
      expect(
        mailgunObservation([at('accepted', 1), at('opened', 2), at('clicked', 3), at('complained', 4), at('unsubscribed', 5)]),
      ).toEqual({
        providerStatus: 'accepted+opened+clicked+complained+unsubscribed',
        status: 'pending',
        engagement: ['opened', 'clicked'],
      });
    });

    it('any suppress-* reason is a suppression, not a bounce', () => {
      const failed = at('failed', 2, { severity: 'permanent', reason: 'suppress-unsubscribe', 'delivery-status': { code: 605 } });
      expect(mailgunObservation([at('accepted', 1), failed])).toMatchObject({
        status: 'failed',
        suppressed: true,
        suppressionSource: 'mailgun_suppressed',
      });
    });
  });

  describe('configuration', () => {
    const live = {
      HERALD_PROVIDERS: 'live',
      HERALD_API_KEYS: 'k'.repeat(20),
      HERALD_ARCHIVE_KEY: TEST_ARCHIVE_KEY,
      HERALD_EMAIL_PROVIDER: 'mailgun',
    };

    it('requires the Mailgun variables only when Mailgun is the chosen provider and providers are live', () => {
      const problems = configProblems(live);
      for (const name of ['MAILGUN_API_KEY', 'MAILGUN_DOMAIN', 'MAILGUN_FROM'])
        expect(problems).toContain(`${name} must be set when HERALD_PROVIDERS=live`);
      expect(problems.some((p) => p.startsWith('POSTMARK_'))).toBe(false);
      expect(configProblems({ ...live, HERALD_EMAIL_PROVIDER: 'postmark' }).some((p) => p.startsWith('MAILGUN_'))).toBe(false);
      expect(configProblems({ HERALD_EMAIL_PROVIDER: 'mailgun' }).some((p) => p.startsWith('MAILGUN_'))).toBe(false);
    });

    it('refuses a domain that is not a domain name', () => {
      expect(configProblems({ HERALD_EMAIL_PROVIDER: 'mailgun', MAILGUN_DOMAIN: 'mg.example.com/x' })).toEqual([
        'MAILGUN_DOMAIN="mg.example.com/x" must be a domain name, like mg.example.com',
      ]);
    });

    it('live defaults to https://api.mailgun.net; the registry builds the adapter named mailgun', () => {
      const twilio = { TWILIO_ACCOUNT_SID: `AC${'0'.repeat(32)}`, TWILIO_AUTH_TOKEN: 'token', TWILIO_FROM: '+15005550006' };
      const config = loadConfig({
        ...live,
        ...twilio,
        MAILGUN_API_KEY: 'key',
        MAILGUN_DOMAIN: 'mg.example.com',
        MAILGUN_FROM: 'h@mg.example.com',
      });
      expect(emailUrl(config)).toBe('https://api.mailgun.net');
      expect(createEmailProvider(config, { sandboxUrl: undefined }).name).toBe('mailgun');
      const sandboxed = loadConfig({ HERALD_EMAIL_PROVIDER: 'mailgun' });
      expect(emailUrl(sandboxed)).toBeUndefined();
      expect(createEmailProvider(sandboxed, { sandboxUrl: sandbox.url }).name).toBe('mailgun');
    });
  });
});
