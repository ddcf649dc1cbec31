/**
 * Mailgun's webhooks end to end: the web and a worker in processes of their own, the `mailgun.js`
 * SDK sending through the Mailgun emulator, which pushes each message's events to the web's
 * `/webhooks/mailgun` as JSON, signed with the run's HMAC signing key; real Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mailgunWebhookSigningKey, signMailgunWebhook } from '../../src/sandbox/webhook-keys.js';
import type { StoredEntry } from '../../src/store/notices.js';
import { sleep, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startWebhookStack, type WebhookStack } from '../helpers/webhook-stack.js';

let stack: WebhookStack;
let phones = 0;
/** A fresh fictional number per notice. */
const phone = () => `+1${301 + (phones++ % 600)}5550100`;
let labels = 0;
/** A fresh address: `<behaviour>+<delay>[+<tag>]+mgwh<n>@example.com`. */
const address = (behaviour: string, ...tags: string[]) => [behaviour, ...tags, `mgwh${process.pid}x${++labels}`].join('+') + '@example.com';

beforeAll(async () => {
  stack = await startWebhookStack({ prefix: testPrefix('mg-webhooks'), env: { HERALD_EMAIL_PROVIDER: 'mailgun' } });
});
afterAll(async () => {
  await stack?.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const notice = (email: string, to: string, deadlineInSeconds: number) =>
  noticeBody({ recipient: { id: `player-mgwh-${labels}`, email, phone: to }, deadlineInSeconds });
/** The status reads the emulator answered about one address (events reads). */
const statusCalls = (email: string) =>
  stack.sandbox.requests().filter((r) => r.recipient === email && r.operation === 'mailgun.events').length;
const sentTo = (email: string) => stack.sandbox.emails().filter((m) => m.to === email);
const deliveriesOf = (messageId: string | undefined) => stack.sandbox.webhookDeliveries().filter((d) => d.messageId === messageId);
const metric = async (line: RegExp): Promise<number> => {
  const text = (await stack.web.call('GET', '/metrics')).text;
  return Number(line.exec(text)?.[1] ?? 0);
};

describe('Mailgun webhooks', () => {
  it('a signed delivery ends the notice from the webhook: checks saved, no status call after it', async () => {
    const email = address('delivered', '2s');
    const savedBefore = await metric(/^herald_status_checks_saved_total\{channel="email"\} (\d+)/m);
    const id = await stack.createNotice(notice(email, phone(), 20));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const events = await stack.events(id);
    const delivered = ofType(events, 'email.observed').filter((e) => e.status === 'delivered');
    expect(delivered).toEqual([expect.objectContaining({ source: 'webhook', providerStatus: 'delivered', event: expect.any(String) })]);
    expect(delivered[0]!.checksSaved).toBeGreaterThan(0);
    expect(ofType(events, 'notice.completed')).toHaveLength(1);
    // The webhook, signed by the emulator, was answered 200.
    const [sent] = sentTo(email);
    expect(deliveriesOf(sent?.messageId).some((d) => d.status === 200)).toBe(true);
    // The plan's first check was due 5 s after creation: past it, no status read was made.
    const calls = statusCalls(email);
    const created = Date.parse(ofType(events, 'notice.accepted')[0]!.at as string);
    await sleep(Math.max(0, created + 7_000 - Date.now()));
    expect(statusCalls(email)).toBe(calls);
    expect(ofType(await stack.events(id), 'email.observed').every((e) => e.source === 'webhook')).toBe(true);
    expect(await metric(/^herald_status_checks_saved_total\{channel="email"\} (\d+)/m)).toBeGreaterThanOrEqual(
      savedBefore + (delivered[0]!.checksSaved as number),
    );
  });

  it('a permanent-failure webhook decides the fallback early: one SMS, the address suppressed as mailgun_bounce', async () => {
    const to = phone();
    const email = address('bounce', '2s');
    const id = await stack.createNotice(notice(email, to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_bounced');
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').find((e) => e.status === 'bounced')).toMatchObject({
      source: 'webhook',
      providerStatus: 'failed(permanent:bounce)',
      bounceType: 'permanent:bounce',
    });
    expect(ofType(events, 'fallback.decided')).toHaveLength(1);
    await waitFor(async () => stack.smsTo(to) > 0, 10_000, 'the SMS');
    expect(stack.smsTo(to)).toBe(1);
    const suppression = await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(email)}`);
    expect(suppression.json).toMatchObject({ source: 'mailgun_bounce', noticeId: id });
  });

  it('a duplicated webhook is harmless: one observation of the event, the copy counted as a duplicate', async () => {
    const email = address('delivered', '2s', 'wh-dup');
    const duplicatesBefore = await metric(/^herald_webhook_events_ignored_total\{provider="mailgun",outcome="duplicate"\} (\d+)/m);
    const id = await stack.createNotice(notice(email, phone(), 20));
    await stack.waitForState(id, ['email_delivered']);
    const [sent] = sentTo(email);
    await waitFor(
      async () => deliveriesOf(sent?.messageId).filter((d) => d.status === 200).length >= 2,
      10_000,
      'both copies of the event',
    );
    const fromWebhooks = ofType(await stack.events(id), 'email.observed').filter((e) => e.source === 'webhook');
    expect(fromWebhooks).toHaveLength(1);
    expect(fromWebhooks[0]).toMatchObject({ status: 'delivered' });
    expect(ofType(await stack.events(id), 'notice.completed')).toHaveLength(1);
    expect(await metric(/^herald_webhook_events_ignored_total\{provider="mailgun",outcome="duplicate"\} (\d+)/m)).toBeGreaterThan(
      duplicatesBefore,
    );
  });

  it('a notice whose webhook was dropped still ends email_delivered, through its planned checks', async () => {
    const email = address('delivered', '1s', 'wh-drop');
    const id = await stack.createNotice(notice(email, phone(), 8));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const observed = ofType(await stack.events(id), 'email.observed');
    expect(observed.find((e) => e.status === 'delivered')).toMatchObject({ source: 'poll' });
    expect(observed.some((e) => e.source === 'webhook')).toBe(false);
    const [sent] = sentTo(email);
    const dropped = deliveriesOf(sent?.messageId);
    expect(dropped.length).toBeGreaterThan(0);
    expect(dropped.every((d) => d.faults.includes('drop') && d.status === undefined)).toBe(true);
    expect(statusCalls(email)).toBeGreaterThan(0);
  });

  describe('when a request does not verify', () => {
    /** A Mailgun webhook post about a real notice's message, with the given signature. */
    async function target() {
      const email = address('never');
      const id = await stack.createNotice(notice(email, phone(), 60));
      await waitFor(async () => ofType(await stack.events(id), 'email.accepted').length > 0, 10_000, 'the send');
      const [sent] = sentTo(email);
      const eventData = {
        event: 'delivered',
        id: `forged${labels}`,
        timestamp: Date.now() / 1000,
        recipient: email,
        message: { headers: { 'message-id': sent!.messageId } },
        'user-variables': { herald_key: `${id}-email` },
        'delivery-status': { code: 250, message: 'OK' },
      };
      return { id, eventData };
    }
    const post = (body: unknown) =>
      fetch(`${stack.web.url}/webhooks/mailgun`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
    const now = () => String(Math.floor(Date.now() / 1000));

    it('answers 401 to an unsigned, a forged or a stale post, and stores nothing', async () => {
      const { id, eventData } = await target();
      const refusals = [
        await post({ 'event-data': eventData }),
        await post({ signature: signMailgunWebhook(mailgunWebhookSigningKey(), now()), 'event-data': eventData }),
        await post({
          signature: { ...signMailgunWebhook(stack.mailgunSigningKey, now()), token: 'another-token' },
          'event-data': eventData,
        }),
        await post({
          signature: signMailgunWebhook(stack.mailgunSigningKey, String(Math.floor(Date.now() / 1000) - 2 * 3600)),
          'event-data': eventData,
        }),
        await post('timestamp=1&token=x&signature=y&event=delivered'),
      ];
      for (const response of refusals) {
        expect(response.status).toBe(401);
        expect(await response.json()).toMatchObject({ error: { code: 'unauthorized' } });
      }
      expect(ofType(await stack.events(id), 'email.observed').some((e) => e.source === 'webhook')).toBe(false);
      expect((await stack.view(id)).state).toBe('email_sent');
      // The same event, signed with the run's key, is taken: it was the signature that was refused.
      const taken = await post({ signature: signMailgunWebhook(stack.mailgunSigningKey, now()), 'event-data': eventData });
      expect(taken.status).toBe(200);
      expect((await stack.waitForState(id, ['email_delivered'])).state).toBe('email_delivered');
    });
  });
});
