/**
 * Postmark and Twilio webhooks end to end: the emulators push each message's events
 * to the listening web app, as the providers do (Postmark's JSON with the basic-auth credentials,
 * Twilio's signed status callbacks to the StatusCallback URL the worker's send carried); the
 * worker runs in its own process, the SDKs talk HTTP to the emulators, Redis is real.
 *
 * The poll floor is 3 s here, so that a webhook (a second after the event's cause) comes before
 * any planned check: a notice settled by its webhook shows no status read at all.
 */
import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import {
  POSTMARK_WEBHOOK_AUTH,
  startWebhookStack,
  TWILIO_WEBHOOK_TOKEN,
  WEBHOOK_PUBLIC_URL,
  type WebhookStack,
} from '../helpers/webhook-app.js';

let stack: WebhookStack;
let labels = 0;
let phones = 0;
/** A sandbox address of this run's own: `<behaviour>+<tags>+wh<n>@example.com`. */
const address = (behaviour: string) => `${behaviour}+wh${process.pid}x${++labels}@example.com`;
/** A fresh fictional number per notice; `suffix` picks the emulator's behaviour (00 delivered, 05 stays sent). */
const phone = (suffix = '00') => `+1${301 + (phones++ % 600)}55501${suffix}`;

beforeAll(async () => {
  stack = await startWebhookStack('webhooks', { HERALD_MIN_POLL_INTERVAL_MS: '3000' });
}, 90_000);
afterAll(async () => {
  await stack?.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const fromWebhook = (events: StoredEntry[], type: string) => ofType(events, type).filter((e) => e.source === 'webhook');
const requestsFor = (recipient: string, operation: string) =>
  stack.sandbox.requests().filter((r) => r.recipient === recipient && r.operation === operation);
const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`;
/** The value of one sample of /metrics, 0 when absent. */
async function metric(name: string, labels: string): Promise<number> {
  const line = (await stack.metrics()).split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

/** An email notice whose first planned check comes long after its webhooks. */
function emailNotice(email: string, to = phone()) {
  return noticeBody({
    recipient: { id: `player-wh-${++labels}`, email, phone: to },
    deadlineInSeconds: 30,
    policy: { firstCheckAfterSeconds: 12 },
  });
}

/** A notice that falls back to SMS at once: its email is never delivered and its deadline is near. */
function smsNotice(to: string) {
  return noticeBody({ recipient: { id: `player-wh-${++labels}`, email: address('never'), phone: to }, deadlineInSeconds: 3 });
}

/** A Postmark Delivery webhook for a message, as Postmark shapes it. */
function deliveryWebhook(messageId: string, noticeId: string, email: string): string {
  return JSON.stringify({
    RecordType: 'Delivery',
    ServerID: 1,
    MessageStream: 'outbound',
    MessageID: messageId,
    Recipient: email,
    Tag: '',
    DeliveredAt: new Date().toISOString(),
    Details: 'smtp;250 2.0.0 OK',
    Metadata: { herald_key: `${noticeId}-email` },
  });
}

/** A Twilio status callback signed with `token` over the public URL and the path. */
function statusCallback(noticeId: string, sid: string, status: string, token = TWILIO_WEBHOOK_TOKEN) {
  const path = `/webhooks/twilio?notice=${noticeId}`;
  const params = {
    AccountSid: 'AC00000000000000000000000000000000',
    ApiVersion: '2010-04-01',
    MessageSid: sid,
    MessageStatus: status,
    SmsSid: sid,
    SmsStatus: status,
  };
  const headers = {
    'content-type': 'application/x-www-form-urlencoded',
    'x-twilio-signature': twilio.getExpectedTwilioSignature(token, WEBHOOK_PUBLIC_URL + path, params),
  };
  return { path, headers, body: new URLSearchParams(params).toString() };
}

describe('Postmark webhooks', () => {
  it('a Delivery webhook ends the notice: one webhook observation, checks saved, and no status read of the message', async () => {
    const email = address('delivered+1s');
    const savedBefore = await metric('herald_status_checks_saved_total', 'channel="email"');
    const id = await stack.createNotice(emailNotice(email));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const events = await stack.events(id);
    const observed = ofType(events, 'email.observed');
    expect(observed).toHaveLength(1);
    expect(observed[0]).toMatchObject({ source: 'webhook', status: 'delivered', providerStatus: 'Sent+Delivered' });
    expect(observed[0]!.checksSaved).toBeGreaterThan(0);
    expect(ofType(events, 'notice.completed')).toEqual([expect.objectContaining({ state: 'email_delivered' })]);
    expect(await metric('herald_status_checks_saved_total', 'channel="email"')).toBeGreaterThanOrEqual(
      savedBefore + (observed[0]!.checksSaved as number),
    );
    // The first planned check came and went: its job was dropped, so Postmark was never asked.
    const plan = (await stack.view(id)).plannedChecks as string[];
    await waitFor(async () => Date.now() > Date.parse(plan[0]!) + 1500, 30_000, 'the first planned check to pass');
    expect(requestsFor(email, 'postmark.details')).toHaveLength(0);
    expect(fromWebhook(await stack.events(id), 'email.observed')).toHaveLength(1);
  });

  it('refuses a webhook with the wrong credentials (401) and stores nothing; the same body with the right ones is recorded', async () => {
    const email = address('never');
    const id = await stack.createNotice(emailNotice(email));
    await stack.waitForState(id, ['email_sent']);
    const before = await stack.events(id);
    const messageId = ofType(before, 'email.accepted')[0]!.providerMessageId as string;
    const body = deliveryWebhook(messageId, id, email);
    for (const authorization of [basic('herald-hooks:guessed'), '']) {
      const refused = await stack.post(
        '/webhooks/postmark',
        { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
        body,
      );
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.text).error.code).toBe('unauthorized');
    }
    expect(await stack.events(id)).toEqual(before);
    expect((await stack.view(id)).state).toBe('email_sent');

    const accepted = await stack.post(
      '/webhooks/postmark',
      { 'content-type': 'application/json', authorization: basic(POSTMARK_WEBHOOK_AUTH) },
      body,
    );
    expect(accepted.status).toBe(200);
    await stack.waitForState(id, ['email_delivered']);
    expect(fromWebhook(await stack.events(id), 'email.observed')).toEqual([expect.objectContaining({ status: 'delivered' })]);
  });

  it('an Open after the delivery is recorded as engagement and changes nothing of the delivered notice', async () => {
    const email = address('delivered+1s');
    const id = await stack.createNotice(emailNotice(email));
    await stack.waitForState(id, ['email_delivered']);
    const messageId = ofType(await stack.events(id), 'email.accepted')[0]!.providerMessageId as string;
    const open = JSON.stringify({
      RecordType: 'Open',
      MessageStream: 'outbound',
      Metadata: { herald_key: `${id}-email` },
      FirstOpen: true,
      Recipient: email,
      MessageID: messageId,
      ReceivedAt: new Date().toISOString(),
      Platform: 'WebMail',
      ReadSeconds: 5,
      Tag: '',
      UserAgent: 'Mozilla/5.0',
    });
    const res = await stack.post(
      '/webhooks/postmark',
      { 'content-type': 'application/json', authorization: basic(POSTMARK_WEBHOOK_AUTH) },
      open,
    );
    expect(res.status).toBe(200);
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').at(-1)).toMatchObject({ source: 'webhook', status: 'pending', engagement: ['opened'] });
    expect(ofType(events, 'notice.completed')).toHaveLength(1);
    const view = await stack.view(id);
    expect(view.state).toBe('email_delivered');
    expect(view.email.status).toBe('delivered');
  });

  it('a duplicated webhook is harmless: one observation, and the duplicate counted', async () => {
    const email = address('delivered+1s+wh-dup');
    const duplicatesBefore = await metric('herald_webhook_events_ignored_total', 'provider="postmark",outcome="duplicate"');
    const id = await stack.createNotice(emailNotice(email));
    await stack.waitForState(id, ['email_delivered']);
    const messageId = ofType(await stack.events(id), 'email.accepted')[0]!.providerMessageId as string;
    const pushed = await waitFor(
      async () => {
        const deliveries = stack.sandbox.webhookDeliveries().filter((d) => d.messageId === messageId);
        return deliveries.length === 2 && deliveries.every((d) => d.status === 200) ? deliveries : undefined;
      },
      20_000,
      'both deliveries of the webhook to be answered',
    );
    expect(pushed.every((d) => d.faults.includes('duplicate'))).toBe(true);
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed')).toHaveLength(1);
    expect(ofType(events, 'notice.completed')).toHaveLength(1);
    expect(await metric('herald_webhook_events_ignored_total', 'provider="postmark",outcome="duplicate"')).toBeGreaterThan(
      duplicatesBefore,
    );
  });

  it('webhooks in reverse order (Delivery before Transient) change no outcome: delivered, and the delay recorded late', async () => {
    const email = address('deferred-delivered+1s+wh-reorder');
    const id = await stack.createNotice(emailNotice(email));
    await stack.waitForState(id, ['email_delivered']);
    const messageId = ofType(await stack.events(id), 'email.accepted')[0]!.providerMessageId as string;
    await waitFor(
      async () => stack.sandbox.webhookDeliveries().filter((d) => d.messageId === messageId && d.status === 200).length === 2,
      20_000,
      'both reordered webhooks to be answered',
    );
    const events = await stack.events(id);
    expect(fromWebhook(events, 'email.observed').map((e) => e.status)).toEqual(['delivered', 'deferred']);
    expect(ofType(events, 'notice.completed')).toEqual([expect.objectContaining({ state: 'email_delivered' })]);
    const view = await stack.view(id);
    expect(view.state).toBe('email_delivered');
    expect(view.email.status).toBe('delivered');
  });

  it('a notice whose webhook was dropped still ends delivered, through its planned check', async () => {
    const email = address('delivered+1s+wh-drop');
    const id = await stack.createNotice(emailNotice(email));
    await stack.waitForState(id, ['email_delivered'], 40_000);
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').at(-1)).toMatchObject({ source: 'poll', status: 'delivered' });
    expect(fromWebhook(events, 'email.observed')).toHaveLength(0);
    const messageId = ofType(events, 'email.accepted')[0]!.providerMessageId as string;
    expect(stack.sandbox.webhookDeliveries().filter((d) => d.messageId === messageId)).toEqual([
      expect.objectContaining({ faults: ['drop'], status: undefined, tries: 0 }),
    ]);
    expect(requestsFor(email, 'postmark.details').length).toBeGreaterThan(0);
  });

  it('a hard-bounce webhook decides the fallback early: email_bounced, the address suppressed, one SMS', async () => {
    const to = phone();
    const id = await stack.createNotice(emailNotice(address('bounce+1s'), to));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_bounced');
    const events = await stack.events(id);
    expect(fromWebhook(events, 'email.observed')).toEqual([
      expect.objectContaining({ status: 'bounced', bounceType: 'HardBounce', providerStatus: 'Sent+Bounced(HardBounce)' }),
    ]);
    expect(ofType(events, 'email.observed').filter((e) => e.source === 'poll')).toHaveLength(0);
    expect(ofType(events, 'suppression.added')).toEqual([expect.objectContaining({ channel: 'email', source: 'postmark_hard_bounce' })]);
    expect(ofType(events, 'fallback.decided')).toHaveLength(1);
    // The web recorded it and answered at once (no provider call of its own, nothing to retry).
    const messageId = ofType(events, 'email.accepted')[0]!.providerMessageId as string;
    expect(stack.sandbox.webhookDeliveries().filter((d) => d.messageId === messageId)).toEqual([
      expect.objectContaining({ status: 200, tries: 1 }),
    ]);
    await stack.waitForState(id, ['sms_delivered']);
    expect(stack.smsTo(to)).toBe(1);
  });

  it('an event about a message Herald does not know gets 200, and counts in /metrics', async () => {
    const before = await metric('herald_webhook_events_ignored_total', 'provider="postmark",outcome="unknown_message"');
    const body = deliveryWebhook('00000000-0000-4000-8000-000000000000', 'ntc_0000000000000000000000000000', 'someone@example.com');
    const res = await stack.post(
      '/webhooks/postmark',
      { 'content-type': 'application/json', authorization: basic(POSTMARK_WEBHOOK_AUTH) },
      body,
    );
    expect(res.status).toBe(200);
    expect(await metric('herald_webhook_events_ignored_total', 'provider="postmark",outcome="unknown_message"')).toBe(before + 1);
  });
});

describe('Twilio status callbacks', () => {
  it('the send carries a StatusCallback; the delivered callback ends the notice with checks saved and no status read', async () => {
    const to = phone('00');
    const id = await stack.createNotice(smsNotice(to));
    await stack.waitForState(id, ['sms_delivered', 'sms_failed']);
    const events = await stack.events(id);
    const observed = ofType(events, 'sms.observed');
    expect(observed.filter((e) => e.source === 'poll')).toHaveLength(0);
    const delivered = observed.filter((e) => e.status === 'delivered');
    expect(delivered).toEqual([expect.objectContaining({ source: 'webhook', providerStatus: 'delivered' })]);
    expect(delivered[0]!.checksSaved).toBeGreaterThan(0);
    expect(ofType(events, 'notice.completed')).toEqual([expect.objectContaining({ state: 'sms_delivered' })]);
    const sid = ofType(events, 'sms.accepted')[0]!.providerMessageId as string;
    const callbacks = stack.sandbox.webhookDeliveries().filter((d) => d.messageId === sid);
    expect(callbacks.length).toBeGreaterThan(0);
    expect(callbacks.every((d) => d.path === `/webhooks/twilio?notice=${id}`)).toBe(true);
    // The first SMS check (one poll floor after the send) came and went without a read.
    await waitFor(
      async () => Date.now() > Date.parse(ofType(events, 'sms.accepted')[0]!.at as string) + 4500,
      30_000,
      'the first SMS check to pass',
    );
    expect(requestsFor(to, 'twilio.fetch')).toHaveLength(0);
  });

  it('refuses a forged or unsigned callback (401) and stores nothing; a signed one is recorded', async () => {
    const to = phone('05');
    const id = await stack.createNotice(smsNotice(to));
    await stack.waitForState(id, ['sms_sent']);
    const sid = ofType(await stack.events(id), 'sms.accepted')[0]!.providerMessageId as string;
    // The emulator's own callbacks (queued, sending, sent) are in before the forgery.
    await waitFor(
      async () => stack.sandbox.webhookDeliveries().filter((d) => d.messageId === sid && d.status === 200).length >= 3,
      20_000,
      'the sent callback',
    );
    const before = await stack.events(id);
    const forged = statusCallback(id, sid, 'delivered', 'not-the-token');
    const unsigned = { ...statusCallback(id, sid, 'delivered'), headers: { 'content-type': 'application/x-www-form-urlencoded' } };
    for (const request of [forged, unsigned]) {
      const res = await stack.post(request.path, request.headers, request.body);
      expect(res.status).toBe(401);
      expect(JSON.parse(res.text).error.code).toBe('unauthorized');
    }
    expect(await stack.events(id)).toEqual(before);
    expect((await stack.view(id)).state).toBe('sms_sent');

    const signed = statusCallback(id, sid, 'delivered');
    expect((await stack.post(signed.path, signed.headers, signed.body)).status).toBe(200);
    await stack.waitForState(id, ['sms_delivered']);
    expect(fromWebhook(await stack.events(id), 'sms.observed').filter((e) => e.status === 'delivered')).toHaveLength(1);
  });

  it('duplicated callbacks are harmless: one observation per status', async () => {
    const to = phone('00');
    const duplicatesBefore = await metric('herald_webhook_events_ignored_total', 'provider="twilio",outcome="duplicate"');
    stack.sandbox.setWebhookFaults({ duplicate: 1 });
    let id: string;
    try {
      id = await stack.createNotice(smsNotice(to));
      await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    } finally {
      stack.sandbox.setWebhookFaults({});
    }
    await stack.waitForState(id, ['sms_delivered']);
    const sid = ofType(await stack.events(id), 'sms.accepted')[0]!.providerMessageId as string;
    await waitFor(
      async () => {
        const deliveries = stack.sandbox.webhookDeliveries().filter((d) => d.messageId === sid);
        return deliveries.length >= 6 && deliveries.every((d) => d.status === 200);
      },
      20_000,
      'every callback and its duplicate to be answered',
    );
    const observed = ofType(await stack.events(id), 'sms.observed');
    const statuses = observed.map((e) => e.providerStatus);
    expect(new Set(statuses).size).toBe(statuses.length);
    expect(observed.filter((e) => e.status === 'delivered')).toHaveLength(1);
    expect(ofType(await stack.events(id), 'notice.completed')).toHaveLength(1);
    expect(await metric('herald_webhook_events_ignored_total', 'provider="twilio",outcome="duplicate"')).toBeGreaterThan(duplicatesBefore);
  });

  it('an SMS whose callbacks were all dropped still ends delivered, through its planned check', async () => {
    const to = phone('00');
    stack.sandbox.setWebhookFaults({ drop: 1 });
    let id: string;
    try {
      id = await stack.createNotice(smsNotice(to));
      await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    } finally {
      stack.sandbox.setWebhookFaults({});
    }
    await stack.waitForState(id, ['sms_delivered']);
    const events = await stack.events(id);
    expect(fromWebhook(events, 'sms.observed')).toHaveLength(0);
    expect(ofType(events, 'sms.observed').at(-1)).toMatchObject({ source: 'poll', status: 'delivered' });
    expect(requestsFor(to, 'twilio.fetch').length).toBeGreaterThan(0);
  });

  it('a callback about a message Herald does not know gets 200, and counts in /metrics', async () => {
    const before = await metric('herald_webhook_events_ignored_total', 'provider="twilio",outcome="unknown_message"');
    const unknown = statusCallback('ntc_0000000000000000000000000000', 'SM00000000000000000000000000000000', 'delivered');
    expect((await stack.post(unknown.path, unknown.headers, unknown.body)).status).toBe(200);
    expect(await metric('herald_webhook_events_ignored_total', 'provider="twilio",outcome="unknown_message"')).toBe(before + 1);
  });
});
