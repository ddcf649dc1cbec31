/**
 * The whole flow with HERALD_EMAIL_PROVIDER=sendgrid: the HTTP API, a real worker, the
 * `@sendgrid/*` SDKs talking HTTP to the SendGrid emulator, on real Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { runHerald } from '../helpers/archive.js';
import { ACCOUNT_SID } from '../helpers/sandbox.js';
import { REDIS_URL, TEST_API_KEY, TEST_ARCHIVE_KEY, testArchiveUrl, testPrefix } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';

let stack: Stack;
let phones = 0;
/** A fresh fictional number per notice; the last two digits choose the SMS behaviour. */
const phone = (behaviour = '00') => `+1${301 + (phones++ % 600)}55501${behaviour}`;
let labels = 0;
/** A fresh address with a behaviour: `<behaviour>[+<delay>]+sg<n>@example.com`. */
const address = (behaviour: string, delay?: string) => `${behaviour}${delay ? `+${delay}` : ''}+sg${++labels}@example.com`;

beforeAll(async () => {
  stack = await startStack({ prefix: testPrefix('sendgrid'), env: { HERALD_EMAIL_PROVIDER: 'sendgrid' } });
});
afterAll(async () => {
  await stack.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const emailsTo = (to: string) => stack.sandbox.emails().filter((m) => m.to === to);
const operationsFor = (to: string) =>
  stack.sandbox
    .requests()
    .filter((r) => r.recipient === to)
    .map((r) => r.operation);

function notice(email: string, to: string | undefined, deadlineInSeconds: number) {
  return noticeBody({ recipient: { id: `player-sg-${labels}`, email, ...(to ? { phone: to } : {}) }, deadlineInSeconds });
}

describe('with HERALD_EMAIL_PROVIDER=sendgrid', () => {
  it('a delivered email ends email_delivered, with no SMS, the provider named sendgrid-sandbox', async () => {
    const to = phone();
    const email = address('delivered', '300ms');
    const id = await stack.createNotice(notice(email, to, 6));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const events = await stack.events(id);
    expect(ofType(events, 'email.requested')[0]).toMatchObject({ provider: 'sendgrid-sandbox', idempotencyKey: `${id}-email` });
    const [sent] = emailsTo(email);
    expect(sent?.metadata).toEqual({ herald_key: `${id}-email`, notice_id: id });
    const accepted = ofType(events, 'email.accepted')[0];
    expect(sent?.messageId.startsWith(`${accepted?.providerMessageId}.`)).toBe(true);
    expect(ofType(events, 'email.observed').at(-1)).toMatchObject({ status: 'delivered', providerStatus: 'delivered+processed+delivered' });
    expect(ofType(events, 'fallback.decided')).toHaveLength(0);
    expect(stack.smsTo(to)).toBe(0);
    // Status reads go to the Email Logs, never to the rate-limited Email Activity API.
    expect(operationsFor(email)).toContain('sendgrid.logs_message');
    expect(stack.sandbox.requests().some((r) => r.path.startsWith('/v3/messages'))).toBe(false);
  });

  it('an email never delivered falls back at the deadline: one decision, one SMS named twilio-sandbox', async () => {
    const to = phone();
    const id = await stack.createNotice(notice(address('never'), to, 3));
    const view = await stack.waitForState(id, ['sms_delivered']);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = await stack.events(id);
    const decided = ofType(events, 'fallback.decided');
    expect(decided).toHaveLength(1);
    expect(Date.parse(decided[0]!.decidedAt as string)).toBeGreaterThanOrEqual(Date.parse(decided[0]!.deadline as string));
    expect(decided[0]).toMatchObject({ lastEmailStatus: 'pending' });
    expect(ofType(events, 'email.observed').length).toBeGreaterThanOrEqual(2);
    expect(ofType(events, 'sms.requested')[0]).toMatchObject({ provider: 'twilio-sandbox' });
    expect(stack.smsTo(to)).toBe(1);
  });

  it('a hard bounce falls back early with email_bounced and suppresses the address', async () => {
    const to = phone();
    const email = address('bounce', '200ms');
    const id = await stack.createNotice(notice(email, to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_bounced');
    expect(Date.parse(view.fallback.decidedAt)).toBeLessThan(Date.parse(view.deadline));
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').some((e) => e.status === 'bounced' && e.bounceType === 'HardBounce')).toBe(true);
    expect(ofType(events, 'fallback.decided')).toHaveLength(1);
    expect(stack.smsTo(to)).toBe(1);
    const suppression = await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(email)}`);
    expect(suppression.statusCode).toBe(200);
    expect(suppression.json()).toMatchObject({ source: 'sendgrid_hard_bounce', noticeId: id });
  });

  it('an email only opened (the logs summary says delivered) still falls back at the deadline', async () => {
    const to = phone();
    const id = await stack.createNotice(notice(address('opened', '300ms'), to, 3));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const observed = ofType(await stack.events(id), 'email.observed');
    expect(observed.some((e) => (e.engagement as string[] | undefined)?.includes('opened') && e.status === 'pending')).toBe(true);
    expect(observed.some((e) => String(e.providerStatus).startsWith('delivered+'))).toBe(true);
    expect(observed.some((e) => e.status === 'delivered')).toBe(false);
    expect(stack.smsTo(to)).toBe(1);
  });

  it('a suppressed address (accepted, then dropped) falls back early with email_suppressed', async () => {
    const to = phone();
    const email = address('inactive');
    const id = await stack.createNotice(notice(email, to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_suppressed');
    const suppression = await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(email)}`);
    expect(suppression.json()).toMatchObject({ source: 'sendgrid_dropped', noticeId: id });
    expect(ofType(await stack.events(id), 'email.observed').at(-1)).toMatchObject({
      status: 'failed',
      providerStatus: 'dropped+processed+dropped',
    });
    expect(stack.smsTo(to)).toBe(1);
  });

  it('a refused send (400) falls back at once with email_rejected', async () => {
    const to = phone();
    const id = await stack.createNotice(notice(address('rejected'), to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_rejected');
    expect(ofType(await stack.events(id), 'provider.error')[0]).toMatchObject({ kind: 'rejected', retryable: false, httpStatus: 400 });
    expect(stack.smsTo(to)).toBe(1);
  });

  it('a flaky send (a 500, then a 429) sends exactly one email, following X-RateLimit-Reset', async () => {
    const email = address('flaky', '200ms');
    const id = await stack.createNotice(notice(email, phone(), 15));
    await stack.waitForState(id, ['email_delivered']);
    expect(emailsTo(email)).toHaveLength(1);
    const errors = ofType(await stack.events(id), 'provider.error');
    expect(errors.map((e) => e.kind)).toEqual(['server_error', 'rate_limited']);
    expect(errors[1]!.retryAfterMs).toBeGreaterThan(0);
  });

  it('a send accepted but never answered is found in the Email Logs by its custom_args: no second email', async () => {
    const email = address('delivered', '300ms');
    stack.sandbox.injectFault({ operation: 'sendgrid.send', mode: 'accept_then_hang', match: email });
    const id = await stack.createNotice(notice(email, phone(), 15));
    await stack.waitForState(id, ['email_delivered']);
    expect(emailsTo(email)).toHaveLength(1);
    const events = await stack.events(id);
    expect(ofType(events, 'provider.error')[0]).toMatchObject({ kind: 'timeout', operation: 'send', channel: 'email' });
    expect(ofType(events, 'email.requested')).toHaveLength(1);
    expect(ofType(events, 'email.accepted')).toEqual([
      expect.objectContaining({ resolvedBy: 'provider_search', providerMessageId: emailsTo(email)[0]?.messageId }),
    ]);
  });

  it('a send that never reached SendGrid is searched for, not found, and sent once', async () => {
    const email = address('delivered', '300ms');
    stack.sandbox.injectFault({ operation: 'sendgrid.send', mode: 'hang', match: email });
    const id = await stack.createNotice(notice(email, phone(), 15));
    await stack.waitForState(id, ['email_delivered']);
    expect(emailsTo(email)).toHaveLength(1);
    const events = await stack.events(id);
    expect(ofType(events, 'email.requested').map((e) => e.attempt)).toEqual([1, 2]);
    const operations = operationsFor(email);
    expect(operations.indexOf('sendgrid.logs_search')).toBeLessThan(operations.lastIndexOf('sendgrid.send'));
  });

  it('when the Email Logs cannot be searched, the send stays in doubt and the deadline decides: one email, one SMS', async () => {
    const to = phone();
    const email = address('delivered', '300ms');
    stack.sandbox.injectFault({ operation: 'sendgrid.send', mode: 'accept_then_hang', match: email });
    stack.sandbox.injectFault({ operation: 'sendgrid.logs_search', mode: 'status_503', count: 1000, match: email });
    const id = await stack.createNotice(notice(email, to, 5));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered'], 30_000);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = await stack.events(id);
    expect(ofType(events, 'email.requested')).toHaveLength(1);
    expect(ofType(events, 'provider.error').some((e) => e.operation === 'search' && e.httpStatus === 503)).toBe(true);
    expect(ofType(events, 'fallback.decided')).toHaveLength(1);
    expect(emailsTo(email)).toHaveLength(1);
    expect(stack.smsTo(to)).toBe(1);
  });
});

describe('with live SendGrid settings (the Email Logs may lag 30 s), against the emulator', () => {
  let live: Stack;
  beforeAll(async () => {
    live = await startStack({
      prefix: testPrefix('sendgrid-live'),
      env: {
        HERALD_PROVIDERS: 'live',
        HERALD_ARCHIVE_KEY: TEST_ARCHIVE_KEY,
        HERALD_EMAIL_PROVIDER: 'sendgrid',
        SENDGRID_API_KEY: 'SG.live-test-key',
        SENDGRID_FROM: 'notices@example.com',
        TWILIO_ACCOUNT_SID: ACCOUNT_SID,
        TWILIO_AUTH_TOKEN: 'a-live-twilio-token-of-the-test',
        TWILIO_FROM: '+15005550006',
      },
    });
  });
  afterAll(async () => {
    await live?.close();
  });

  it('a send that may not be listed yet is not sent again: it stays in doubt and the deadline decides', async () => {
    const to = phone();
    const email = address('delivered', '300ms');
    live.sandbox.injectFault({ operation: 'sendgrid.send', mode: 'hang', match: email });
    const id = await live.createNotice(notice(email, to, 6));
    const view = await live.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = await live.events(id);
    expect(ofType(events, 'email.requested')).toEqual([expect.objectContaining({ provider: 'sendgrid', attempt: 1 })]);
    const searches = ofType(events, 'provider.error').filter((e) => e.operation === 'search');
    expect(searches.length).toBeGreaterThanOrEqual(1);
    // The searches were answered (200): the logs simply did not list it, which proves nothing yet.
    expect(searches.every((e) => e.kind === 'server_error' && e.httpStatus === undefined)).toBe(true);
    const searched = live.sandbox.requests().filter((r) => r.operation === 'sendgrid.logs_search' && r.recipient === email);
    expect(searched.length).toBeGreaterThanOrEqual(1);
    expect(searched.every((r) => r.status === 200)).toBe(true);
    expect(live.sandbox.emails().filter((m) => m.to === email)).toHaveLength(0);
    expect(live.smsTo(to)).toBe(1);
  });
});

describe('SendGrid configuration', () => {
  const live = () => ({
    REDIS_URL,
    HERALD_PREFIX: testPrefix('sendgrid-doctor'),
    HERALD_API_KEYS: TEST_API_KEY,
    HERALD_ARCHIVE_URL: testArchiveUrl(),
    HERALD_PROVIDERS: 'live',
    HERALD_ARCHIVE_KEY: TEST_ARCHIVE_KEY,
    HERALD_EMAIL_PROVIDER: 'sendgrid',
    SENDGRID_API_KEY: 'SG.doctor-key',
    SENDGRID_FROM: 'notices@example.com',
    SENDGRID_API_URL: stack.sandbox.url,
    TWILIO_ACCOUNT_SID: 'AC00000000000000000000000000000001',
    TWILIO_AUTH_TOKEN: 'doctor-auth',
    TWILIO_FROM: '+15005550006',
    TWILIO_API_URL: stack.sandbox.url,
  });
  const problems = (env: Record<string, string | undefined>): string[] => {
    try {
      loadConfig(env);
      return [];
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
  };

  it('a live start needs SENDGRID_API_KEY and SENDGRID_FROM, and no Postmark variable', () => {
    expect(problems(live())).toEqual([]);
    expect(problems({ ...live(), SENDGRID_API_KEY: undefined, SENDGRID_FROM: undefined })).toEqual([
      'SENDGRID_API_KEY must be set when HERALD_PROVIDERS=live',
      'SENDGRID_FROM must be set when HERALD_PROVIDERS=live',
    ]);
    expect(problems({ ...live(), SENDGRID_API_URL: 'ftp://example.com' })[0]).toMatch(
      /^SENDGRID_API_URL="ftp:\/\/example.com" must be a URL/,
    );
    expect(loadConfig({ ...live(), SENDGRID_API_URL: undefined }).sendgrid.apiUrl).toBe('https://api.sendgrid.com');
  });

  it('herald doctor reads the key scopes (sending nothing), and names SENDGRID_API_KEY when the key is refused', async () => {
    const before = stack.sandbox.emails().length;
    const ok = await runHerald(['doctor'], live());
    expect(ok.stdout).toMatch(/^ok +sendgrid +API key with 3 scopes, mail.send included at http:\/\/127\.0\.0\.1:\d+/m);
    expect(stack.sandbox.emails()).toHaveLength(before);
    const refused = await runHerald(['doctor'], { ...live(), SENDGRID_API_KEY: 'SG.bad-key' });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^FAIL +sendgrid +\S+ refused the credentials \(HTTP 401\)\n +fix: check SENDGRID_API_KEY/m);
  });
});
