/**
 * The whole flow with HERALD_EMAIL_PROVIDER=mailgun: the HTTP API and a worker, the real
 * `mailgun.js` SDK talking HTTP to the Mailgun emulator, Twilio for the fallback, real Redis.
 * The Mailgun emulator runs in a sandbox of its own (MAILGUN_API_URL) so the test can read
 * what it received and inject its faults; the SMS go to the stack's sandbox.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';

let stack: Stack;
let mailgun: Sandbox;
const MAILGUN_DOMAIN = 'mg.sandbox.example';
let phones = 0;
/** A fresh fictional number per notice. */
const phone = () => `+1${301 + (phones++ % 600)}5550100`;
let labels = 0;
/** A sandbox address of this run's own: `<behaviour>[+delay]+mg<n>@example.com`. */
const address = (behaviour: string) => `${behaviour}+mg${process.pid}x${++labels}@example.com`;

beforeAll(async () => {
  mailgun = await startSandbox();
  stack = await startStack({
    prefix: testPrefix('mailgun'),
    env: { HERALD_EMAIL_PROVIDER: 'mailgun', MAILGUN_API_URL: mailgun.url, MAILGUN_DOMAIN },
  });
});
afterAll(async () => {
  await stack?.close();
  await mailgun?.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const emailsTo = (to: string) => mailgun.emails().filter((e) => e.to === to);

function notice(email: string, to: string, deadlineInSeconds: number) {
  return noticeBody({ recipient: { id: `player-mg-${++labels}`, email, phone: to }, deadlineInSeconds });
}

describe('with HERALD_EMAIL_PROVIDER=mailgun', () => {
  describe('when the email is delivered before the deadline', () => {
    it('ends email_delivered through the Mailgun Logs API, sends no SMS, and names the provider', async () => {
      const to = phone();
      const email = address('delivered+300ms');
      const id = await stack.createNotice(notice(email, to, 8));
      const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
      expect(view.state).toBe('email_delivered');
      const events = await stack.events(id);
      expect(ofType(events, 'email.requested')[0]).toMatchObject({ provider: 'mailgun-sandbox', idempotencyKey: `${id}-email` });
      expect(ofType(events, 'email.observed').at(-1)).toMatchObject({ status: 'delivered', providerStatus: 'accepted+delivered' });
      expect(ofType(events, 'fallback.decided')).toHaveLength(0);
      expect(stack.smsTo(to)).toBe(0);
      const [sent] = emailsTo(email);
      expect(sent?.metadata).toMatchObject({ herald_key: `${id}-email`, notice_id: id });
      expect(ofType(events, 'email.accepted')[0]).toMatchObject({ providerMessageId: sent?.messageId });
      // One send and the status reads: each a request to the emulator's API, the reads to the Logs
      // API (never the deprecated Events API).
      const calls = mailgun.requests().filter((r) => r.recipient === email);
      expect(calls[0]).toMatchObject({ operation: 'mailgun.send', status: 200 });
      expect(calls.length).toBeGreaterThan(1);
      expect(calls.slice(1).map((r) => [r.operation, r.method, r.path, r.status])).toEqual(
        calls.slice(1).map(() => ['mailgun.logs', 'POST', '/v1/analytics/logs', 200]),
      );
      // Each read asks for the message's items in the domain, by the id without its angle brackets.
      expect((calls[1]!.search as { filter: unknown }).filter).toEqual({
        AND: [
          { attribute: 'domain', comparator: '=', values: [{ label: MAILGUN_DOMAIN, value: MAILGUN_DOMAIN }] },
          { attribute: 'message-id', comparator: '=', values: [{ label: sent!.messageId, value: sent!.messageId }] },
        ],
      });
    });
  });

  describe('when the email is never delivered', () => {
    it('falls back at the deadline with exactly one decision and one SMS, named twilio', async () => {
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
  });

  describe('when the email hard-bounces', () => {
    it('falls back early with email_bounced and suppresses the address', async () => {
      const to = phone();
      const id = await stack.createNotice(notice(address('bounce+200ms'), to, 30));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_bounced');
      expect(Date.parse(view.fallback.decidedAt)).toBeLessThan(Date.parse(view.deadline));
      const events = await stack.events(id);
      expect(ofType(events, 'email.observed').some((e) => e.status === 'bounced' && e.bounceType === 'permanent:bounce')).toBe(true);
      expect(ofType(events, 'suppression.added')).toEqual([expect.objectContaining({ channel: 'email', source: 'mailgun_bounce' })]);
      expect(ofType(events, 'fallback.decided')).toHaveLength(1);
      expect(stack.smsTo(to)).toBe(1);
    });
  });

  describe('when the address is on Mailgun’s suppression list', () => {
    it('is accepted, then fails with suppress-bounce: email_suppressed at the first status read, and Herald suppresses it too', async () => {
      const to = phone();
      const id = await stack.createNotice(notice(address('inactive'), to, 30));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_suppressed');
      const events = await stack.events(id);
      expect(ofType(events, 'email.accepted')).toHaveLength(1);
      expect(ofType(events, 'email.observed').at(-1)).toMatchObject({
        status: 'failed',
        providerStatus: 'accepted+failed(permanent:suppress-bounce)',
      });
      expect(ofType(events, 'suppression.added')).toEqual([expect.objectContaining({ channel: 'email', source: 'mailgun_suppressed' })]);
      expect(stack.smsTo(to)).toBe(1);
    });
  });

  describe('when the email is opened but never delivered', () => {
    it('records the engagement and still falls back at the deadline', async () => {
      const to = phone();
      const id = await stack.createNotice(notice(address('opened+300ms'), to, 3));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_deadline_elapsed');
      const observed = ofType(await stack.events(id), 'email.observed');
      expect(observed.some((e) => (e.engagement as string[] | undefined)?.includes('opened') && e.status === 'pending')).toBe(true);
      expect(stack.smsTo(to)).toBe(1);
    });
  });

  describe('when Mailgun refuses the send (a real 400)', () => {
    it('falls back at once with email_rejected', async () => {
      const to = phone();
      const id = await stack.createNotice(notice(address('rejected'), to, 30));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_rejected');
      expect(ofType(await stack.events(id), 'provider.error')[0]).toMatchObject({ kind: 'rejected', retryable: false, httpStatus: 400 });
    });
  });

  describe('when the send is flaky (a 500, then a 429)', () => {
    it('sends exactly one email and follows the retry time from the 429 text', async () => {
      const email = address('flaky+200ms');
      const id = await stack.createNotice(notice(email, phone(), 15));
      await stack.waitForState(id, ['email_delivered']);
      expect(emailsTo(email)).toHaveLength(1);
      const errors = ofType(await stack.events(id), 'provider.error');
      expect(errors.map((e) => e.kind)).toEqual(['server_error', 'rate_limited']);
      const limited = errors[1]!;
      expect(limited.retryAfterMs).toBeGreaterThan(500);
      expect(limited.retryAfterMs).toBeLessThanOrEqual(2000);
    });
  });

  describe('when the send is accepted but its answer never arrives', () => {
    it('finds the email among the accepted events by its user variable instead of sending a second one', async () => {
      const email = address('delivered+300ms');
      mailgun.injectFault({ operation: 'mailgun.send', mode: 'accept_then_hang', match: email });
      const id = await stack.createNotice(notice(email, phone(), 15));
      await stack.waitForState(id, ['email_delivered']);
      expect(emailsTo(email)).toHaveLength(1);
      const events = await stack.events(id);
      expect(ofType(events, 'provider.error')[0]).toMatchObject({ kind: 'timeout', operation: 'send', channel: 'email' });
      expect(ofType(events, 'email.accepted')).toEqual([
        expect.objectContaining({ resolvedBy: 'provider_search', providerMessageId: emailsTo(email)[0]!.messageId }),
      ]);
    });
  });

  describe('when the send never reached Mailgun', () => {
    it('searches, finds nothing, and sends once more: one email in all', async () => {
      const email = address('delivered+300ms');
      mailgun.injectFault({ operation: 'mailgun.send', mode: 'hang', match: email });
      const id = await stack.createNotice(notice(email, phone(), 15));
      await stack.waitForState(id, ['email_delivered']);
      expect(emailsTo(email)).toHaveLength(1);
      const events = await stack.events(id);
      expect(ofType(events, 'email.requested').map((e) => e.attempt)).toEqual([1, 2]);
      // One search, through the Logs API: the accepted items of the domain to the address.
      const searches = mailgun
        .requests()
        .filter((r) => r.recipient === email && r.operation === 'mailgun.logs' && (r.search as { events?: string[] }).events !== undefined);
      expect(searches.map((r) => r.search)).toEqual([
        expect.objectContaining({
          events: ['accepted'],
          filter: {
            AND: [
              { attribute: 'domain', comparator: '=', values: [{ label: MAILGUN_DOMAIN, value: MAILGUN_DOMAIN }] },
              { attribute: 'recipient', comparator: '=', values: [{ label: email, value: email }] },
            ],
          },
        }),
      ]);
    });
  });

  describe('when the send is in doubt and Mailgun cannot be searched', () => {
    it('never sends the email again: the attempt stays in doubt and the deadline decides, with one SMS', async () => {
      const to = phone();
      const email = address('delivered+300ms');
      mailgun.injectFault({ operation: 'mailgun.send', mode: 'accept_then_hang', match: email });
      mailgun.injectFault({ operation: 'mailgun.logs', mode: 'status_503', match: email, count: 1000 });
      const id = await stack.createNotice(notice(email, to, 5));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_deadline_elapsed');
      expect(emailsTo(email)).toHaveLength(1);
      const events = await stack.events(id);
      expect(ofType(events, 'email.requested')).toHaveLength(1);
      expect(ofType(events, 'provider.error').some((e) => e.operation === 'search' && e.kind === 'server_error')).toBe(true);
      expect(ofType(events, 'fallback.decided')).toHaveLength(1);
      expect(stack.smsTo(to)).toBe(1);
      mailgun.clearFaults();
    });
  });

  describe('when the worker is its own process, configured by the environment alone', () => {
    it('sends through Mailgun, says the emulator stands in, and reaches email_delivered', async () => {
      const env = { HERALD_EMAIL_PROVIDER: 'mailgun', MAILGUN_API_URL: mailgun.url, MAILGUN_DOMAIN };
      const own = await startStack({ prefix: testPrefix('mailgun-proc'), inProcessWorker: false, env });
      const worker = new WorkerProcess({ ...own.env, LOG_LEVEL: 'info' }).start();
      try {
        const email = address('delivered+300ms');
        await waitFor(async () => worker.ready, 60_000, 'the worker process to run');
        const id = await own.createNotice(notice(email, phone(), 30));
        await own.waitForState(id, ['email_delivered'], 30_000);
        expect(ofType(await own.events(id), 'email.requested')[0]).toMatchObject({ provider: 'mailgun-sandbox' });
        expect(emailsTo(email)).toHaveLength(1);
        expect(worker.output).toContain('log entries name the provider mailgun-sandbox');
      } finally {
        await worker.stop();
        await own.close();
      }
    });
  });
});
