/**
 * SendGrid's Event Webhook end to end: the web and a worker in processes of their own, the
 * `@sendgrid/*` SDKs sending through the SendGrid emulator, which pushes each message's events to
 * the web's `/webhooks/sendgrid`, signed with the run's ECDSA key; real Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signSendgridWebhook, sendgridWebhookKeys } from '../../src/sandbox/webhook-keys.js';
import type { StoredEntry } from '../../src/store/notices.js';
import { sleep, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startWebhookStack, type WebhookStack } from '../helpers/webhook-stack.js';

let stack: WebhookStack;
let phones = 0;
/** A fresh fictional number per notice. */
const phone = () => `+1${301 + (phones++ % 600)}5550100`;
let labels = 0;
/** A fresh address: `<behaviour>+<delay>[+<tag>]+sgwh<n>@example.com`. */
const address = (behaviour: string, ...tags: string[]) => [behaviour, ...tags, `sgwh${process.pid}x${++labels}`].join('+') + '@example.com';

beforeAll(async () => {
  stack = await startWebhookStack({ prefix: testPrefix('sg-webhooks'), env: { HERALD_EMAIL_PROVIDER: 'sendgrid' } });
});
afterAll(async () => {
  await stack?.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const notice = (email: string, to: string, deadlineInSeconds: number) =>
  noticeBody({ recipient: { id: `player-sgwh-${labels}`, email, phone: to }, deadlineInSeconds });
/** The status reads the emulator answered about one address (Email Logs searches and reads). */
const statusCalls = (email: string) =>
  stack.sandbox
    .requests()
    .filter((r) => r.recipient === email && (r.operation === 'sendgrid.logs_search' || r.operation === 'sendgrid.logs_message')).length;
const sentTo = (email: string) => stack.sandbox.emails().filter((m) => m.to === email);
const deliveriesOf = (messageId: string | undefined) => stack.sandbox.webhookDeliveries().filter((d) => d.messageId === messageId);
const metric = async (line: RegExp): Promise<number> => {
  const text = (await stack.web.call('GET', '/metrics')).text;
  return Number(line.exec(text)?.[1] ?? 0);
};

describe('SendGrid Event Webhook', () => {
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

  it('a hard-bounce webhook decides the fallback early: one SMS, the address suppressed as sendgrid_hard_bounce', async () => {
    const to = phone();
    const email = address('bounce', '2s');
    const id = await stack.createNotice(notice(email, to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_bounced');
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').find((e) => e.status === 'bounced')).toMatchObject({
      source: 'webhook',
      providerStatus: 'bounce(bounce)',
      bounceType: 'HardBounce',
    });
    expect(ofType(events, 'fallback.decided')).toHaveLength(1);
    await waitFor(async () => stack.smsTo(to) > 0, 10_000, 'the SMS');
    expect(stack.smsTo(to)).toBe(1);
    const suppression = await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(email)}`);
    expect(suppression.json).toMatchObject({ source: 'sendgrid_hard_bounce', noticeId: id });
  });

  it('a duplicated webhook is harmless: one observation of the event, the copy counted as a duplicate', async () => {
    const email = address('delivered', '2s', 'wh-dup');
    const duplicatesBefore = await metric(/^herald_webhook_events_ignored_total\{provider="sendgrid",outcome="duplicate"\} (\d+)/m);
    const id = await stack.createNotice(notice(email, phone(), 20));
    await stack.waitForState(id, ['email_delivered']);
    const [sent] = sentTo(email);
    await waitFor(
      async () => deliveriesOf(sent?.messageId).filter((d) => d.status === 200).length >= 4,
      10_000,
      'both copies of each event',
    );
    const fromWebhooks = ofType(await stack.events(id), 'email.observed').filter((e) => e.source === 'webhook');
    expect(fromWebhooks).toHaveLength(1);
    expect(fromWebhooks[0]).toMatchObject({ status: 'delivered' });
    expect(ofType(await stack.events(id), 'notice.completed')).toHaveLength(1);
    expect(await metric(/^herald_webhook_events_ignored_total\{provider="sendgrid",outcome="duplicate"\} (\d+)/m)).toBeGreaterThan(
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

  it('a send found in doubt records the full sg_message_id: its webhook still finds the notice and ends it', async () => {
    const email = address('delivered', '5s');
    stack.sandbox.injectFault({ operation: 'sendgrid.send', mode: 'accept_then_hang', match: email });
    const id = await stack.createNotice(notice(email, phone(), 40));
    await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    const events = await stack.events(id);
    const [sent] = sentTo(email);
    expect(ofType(events, 'email.accepted')).toEqual([
      expect.objectContaining({ resolvedBy: 'provider_search', providerMessageId: sent?.messageId }),
    ]);
    expect(sent?.messageId).toContain('.');
    expect(ofType(events, 'email.observed').find((e) => e.status === 'delivered')).toMatchObject({ source: 'webhook' });
  });

  it('reordered webhooks change no outcome: a deferral that arrives after the delivery it preceded leaves the notice delivered', async () => {
    const email = address('deferred-delivered', '1s', 'wh-reorder');
    const id = await stack.createNotice(notice(email, phone(), 20));
    await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    const [sent] = sentTo(email);
    // processed, deferred and delivered, pushed newest first.
    await waitFor(async () => deliveriesOf(sent?.messageId).filter((d) => d.status === 200).length >= 3, 10_000, 'every event');
    const view = await stack.view(id);
    expect(view.state).toBe('email_delivered');
    expect(view.email.status).toBe('delivered');
    const fromWebhooks = ofType(await stack.events(id), 'email.observed').filter((e) => e.source === 'webhook');
    expect(fromWebhooks.map((e) => e.status)).toEqual(['delivered', 'deferred']);
    expect(ofType(await stack.events(id), 'notice.completed')).toHaveLength(1);
  });

  describe('when a request does not verify', () => {
    /** A signed-looking Event Webhook post about a real notice's message. */
    async function target() {
      const email = address('never');
      const id = await stack.createNotice(notice(email, phone(), 60));
      await waitFor(async () => ofType(await stack.events(id), 'email.accepted').length > 0, 10_000, 'the send');
      const [sent] = sentTo(email);
      const body = JSON.stringify([
        {
          email,
          timestamp: Math.floor(Date.now() / 1000),
          event: 'delivered',
          sg_event_id: `forged-${labels}`,
          sg_message_id: sent!.messageId,
          herald_key: `${id}-email`,
        },
      ]);
      return { id, body };
    }
    const post = (body: string, headers: Record<string, string>) =>
      fetch(`${stack.web.url}/webhooks/sendgrid`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

    it('answers 401 to an unsigned, a forged or a tampered post, and stores nothing', async () => {
      const { id, body } = await target();
      const timestamp = String(Math.floor(Date.now() / 1000));
      const signed = signSendgridWebhook(stack.sendgridKeys.privateKey, timestamp, body);
      const refusals = [
        await post(body, {}),
        await post(body, {
          'x-twilio-email-event-webhook-signature': signSendgridWebhook(sendgridWebhookKeys().privateKey, timestamp, body),
          'x-twilio-email-event-webhook-timestamp': timestamp,
        }),
        await post(body.replace('"delivered"', '"bounce"'), {
          'x-twilio-email-event-webhook-signature': signed,
          'x-twilio-email-event-webhook-timestamp': timestamp,
        }),
        await post(body, {
          'x-twilio-email-event-webhook-signature': signed,
          'x-twilio-email-event-webhook-timestamp': String(Number(timestamp) + 1),
        }),
      ];
      for (const response of refusals) {
        expect(response.status).toBe(401);
        expect(await response.json()).toMatchObject({ error: { code: 'unauthorized' } });
      }
      const events = await stack.events(id);
      expect(ofType(events, 'email.observed').some((e) => e.source === 'webhook')).toBe(false);
      expect((await stack.view(id)).state).toBe('email_sent');
      // The same post, signed with the run's key, is taken: it was the signature that was refused.
      const taken = await post(body, {
        'x-twilio-email-event-webhook-signature': signed,
        'x-twilio-email-event-webhook-timestamp': timestamp,
      });
      expect(taken.status).toBe(200);
      expect((await stack.waitForState(id, ['email_delivered'])).state).toBe('email_delivered');
    });
  });
});
