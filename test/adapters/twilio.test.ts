import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTwilioProvider, type TwilioProviderOptions } from '../../src/providers/twilio.js';
import type { SmsProvider } from '../../src/providers/types.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { ACCOUNT_SID, AUTH_TOKEN, failure, sleep, startOfSecond } from '../helpers/providers.js';

let sandbox: Sandbox;
let sms: SmsProvider;
const make = (overrides: Partial<TwilioProviderOptions> = {}) =>
  createTwilioProvider({
    accountSid: ACCOUNT_SID,
    authToken: AUTH_TOKEN,
    from: '+15005550006',
    apiUrl: sandbox.url,
    timeoutMs: 2000,
    ...overrides,
  });

beforeAll(async () => {
  sandbox = await startSandbox();
  sms = make();
});
afterAll(() => sandbox.close());

/** A number of the given behaviour, with an area code of its own so tests do not share lists. */
let areaCode = 200;
const number = (suffix: string) => `+1${++areaCode}55501${suffix}`;

describe('Twilio adapter against the sandbox', () => {
  describe.concurrent('status over time, per behaviour', () => {
    it('00 delivered: queued (pending), then delivered after about a second', async () => {
      const sent = await sms.send({ to: number('00'), body: 'Terms change on Friday' });
      expect(sent).toEqual({ providerMessageId: expect.stringMatching(/^SM[0-9a-f]{32}$/), providerStatus: 'queued' });
      expect(await sms.status(sent.providerMessageId)).toEqual({ providerStatus: 'queued', status: 'pending', engagement: [] });
      await sleep(1100);
      expect(await sms.status(sent.providerMessageId)).toEqual({ providerStatus: 'delivered', status: 'delivered', engagement: [] });
    });

    it('01 undelivered: failed with error 30003', async () => {
      const sent = await sms.send({ to: number('01'), body: 'x' });
      await sleep(1100);
      expect(await sms.status(sent.providerMessageId)).toEqual({
        providerStatus: 'undelivered',
        status: 'failed',
        engagement: [],
        errorCode: 30003,
      });
    });

    it('02 failed: failed with error 30006', async () => {
      const sent = await sms.send({ to: number('02'), body: 'x' });
      await sleep(700);
      expect(await sms.status(sent.providerMessageId)).toMatchObject({ providerStatus: 'failed', status: 'failed', errorCode: 30006 });
    });

    it('05 stays sent: pending forever', async () => {
      const sent = await sms.send({ to: number('05'), body: 'x' });
      await sleep(1100);
      expect(await sms.status(sent.providerMessageId)).toMatchObject({ providerStatus: 'sent', status: 'pending' });
    });

    it('04 flaky: 500 (server_error), then 429 (rate_limited, Retry-After 1 s), then queued', async () => {
      const to = number('04');
      expect(await failure(sms.send({ to, body: 'x' }))).toMatchObject({ kind: 'server_error', httpStatus: 500, providerCode: 20500 });
      expect(await failure(sms.send({ to, body: 'x' }))).toMatchObject({
        kind: 'rate_limited',
        httpStatus: 429,
        providerCode: 20429,
        retryAfterMs: 1000,
      });
      expect((await sms.send({ to, body: 'x' })).providerStatus).toBe('queued');
    });

    it('06 slow: a 1 s timeout times out, a 3 s one gets the answer', async () => {
      const [tooShort, longEnough] = await Promise.allSettled([
        make({ timeoutMs: 1000 }).send({ to: number('06'), body: 'x' }),
        make({ timeoutMs: 3000 }).send({ to: number('06'), body: 'x' }),
      ]);
      expect(tooShort.status === 'rejected' && tooShort.reason).toMatchObject({ kind: 'timeout' });
      expect(longEnough.status === 'fulfilled' && longEnough.value.providerStatus).toBe('queued');
    });

    it('07 status calls hang: timeout within timeoutMs', async () => {
      const quick = make({ timeoutMs: 300 });
      const sent = await quick.send({ to: number('07'), body: 'x' });
      const error = await failure(quick.status(sent.providerMessageId));
      expect(error).toMatchObject({ kind: 'timeout', retryable: true });
      expect(error.elapsedMs).toBeGreaterThanOrEqual(250);
      expect(error.elapsedMs).toBeLessThan(1000);
    });
  });

  describe('send rejections', () => {
    it('03 opted out (21610): rejected and suppressed', async () => {
      const error = await failure(sms.send({ to: number('03'), body: 'x' }));
      expect(error).toMatchObject({ kind: 'rejected', httpStatus: 400, providerCode: 21610, suppressed: true, retryable: false });
    });

    it('an invalid number (21211): rejected, not suppressed', async () => {
      const error = await failure(sms.send({ to: '12345', body: 'x' }));
      expect(error).toMatchObject({ kind: 'rejected', providerCode: 21211, suppressed: false });
    });

    it('a bad auth token (401, 20003): server_error', async () => {
      const error = await failure(make({ authToken: 'bad-token' }).send({ to: number('00'), body: 'x' }));
      expect(error).toMatchObject({ kind: 'server_error', httpStatus: 401, providerCode: 20003 });
    });

    it('sends through a Messaging Service when no sender number is configured', async () => {
      const viaService = make({ from: undefined, messagingServiceSid: `MG${'b'.repeat(32)}` });
      expect((await viaService.send({ to: number('00'), body: 'x' })).providerStatus).toBe('accepted');
    });
  });

  describe('injected faults', () => {
    it.each([
      ['status_500', 'server_error', 500],
      ['status_503', 'server_error', 503],
      ['status_429', 'rate_limited', 429],
    ] as const)('%s on create → %s', async (mode, kind, httpStatus) => {
      const to = number('00');
      sandbox.injectFault({ operation: 'twilio.create', mode, match: to });
      const error = await failure(sms.send({ to, body: 'x' }));
      expect(error).toMatchObject({ kind, httpStatus });
      expect(error.retryAfterMs).toBe(kind === 'rate_limited' ? 1000 : undefined);
    });

    it('hang → timeout within timeoutMs, and nothing was created', async () => {
      const to = number('00');
      sandbox.injectFault({ operation: 'twilio.create', mode: 'hang', match: to });
      const error = await failure(make({ timeoutMs: 400 }).send({ to, body: 'x' }));
      expect(error.kind).toBe('timeout');
      expect(error.elapsedMs).toBeLessThan(1200);
      expect(sandbox.sms().filter((m) => m.to === to)).toHaveLength(0);
    });
  });

  describe('findSince (a send in doubt)', () => {
    it('finds a dropped send by body and creation time, across pages, ignoring older and other messages', async () => {
      const to = number('05');
      const paged = make({ pageSize: 2 });
      const body = 'Your terms change on Friday';
      await sms.send({ to, body }); // same body, but before the attempt
      await startOfSecond();
      const since = Date.now();
      await sms.send({ to, body: 'another notice' });
      sandbox.injectFault({ operation: 'twilio.create', mode: 'accept_then_drop', match: to });
      expect((await failure(sms.send({ to, body }))).kind).toBe('server_error');
      await sms.send({ to, body: 'a third notice' });
      await sms.send({ to, body: 'a fourth notice' });
      await sms.send({ to: number('05'), body }); // same body, other number

      const dropped = sandbox
        .sms()
        .filter((m) => m.to === to && m.body === body)
        .at(-1);
      const listsBefore = sandbox.requests().filter((r) => r.operation === 'twilio.list').length;
      expect(await paged.findSince(to, since, body)).toEqual([{ providerMessageId: dropped?.sid, providerStatus: 'queued' }]);
      // Five messages to the number, two per page: three pages.
      expect(sandbox.requests().filter((r) => r.operation === 'twilio.list').length - listsBefore).toBe(3);
    });

    it('counts a message created earlier in the same second as `since` (date_created has second precision)', async () => {
      const to = number('00');
      await startOfSecond();
      const sent = await sms.send({ to, body: 'same second' });
      const since = Date.now();
      expect(await sms.findSince(to, since, 'same second')).toEqual([
        { providerMessageId: sent.providerMessageId, providerStatus: 'queued' },
      ]);
      expect(await sms.findSince(to, since + 1000, 'same second')).toEqual([]);
    });

    it('returns nothing when nothing was sent', async () => {
      expect(await sms.findSince(number('00'), Date.now() - 60_000, 'x')).toEqual([]);
    });
  });

  describe('cancel', () => {
    it('cancels a scheduled message, which then reads as failed (canceled)', async () => {
      const service = `MG${'c'.repeat(32)}`;
      const raw = twilio(ACCOUNT_SID, AUTH_TOKEN);
      raw.api.baseUrl = sandbox.url;
      const scheduled = await raw.messages.create({
        to: number('00'),
        body: 'later',
        messagingServiceSid: service,
        scheduleType: 'fixed',
        sendAt: new Date(Date.now() + 30 * 60_000),
      });
      expect(scheduled.status).toBe('scheduled');
      await sms.cancel(scheduled.sid);
      expect(await sms.status(scheduled.sid)).toEqual({ providerStatus: 'canceled', status: 'failed', engagement: [] });
      expect(await failure(sms.cancel(scheduled.sid))).toMatchObject({ kind: 'rejected', providerCode: 30409 });
    });

    it('refuses to cancel a message that is not scheduled (30409)', async () => {
      const sent = await sms.send({ to: number('00'), body: 'now' });
      expect(await failure(sms.cancel(sent.providerMessageId))).toMatchObject({ kind: 'rejected', httpStatus: 400, providerCode: 30409 });
    });
  });

  it('reads an unknown message as rejected (404, 20404)', async () => {
    expect(await failure(sms.status(`SM${'9'.repeat(32)}`))).toMatchObject({ kind: 'rejected', httpStatus: 404, providerCode: 20404 });
  });

  it('ignores TWILIO_EDGE / TWILIO_REGION: apiUrl alone decides the host', async () => {
    // A host name, not an IP: the SDK would rewrite `localhost` to `localhost.dublin.ie1.localhost`
    // (an IPv4 literal happens to survive, because URL refuses the rewritten hostname).
    const saved = { edge: process.env.TWILIO_EDGE, region: process.env.TWILIO_REGION };
    process.env.TWILIO_EDGE = 'dublin';
    process.env.TWILIO_REGION = 'ie1';
    try {
      const provider = make({ apiUrl: `http://localhost:${sandbox.port}` });
      expect((await provider.send({ to: number('00'), body: 'x' })).providerStatus).toBe('queued');
    } finally {
      for (const [key, value] of [
        ['TWILIO_EDGE', saved.edge],
        ['TWILIO_REGION', saved.region],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});
