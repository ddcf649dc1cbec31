/**
 * SendGrid's Event Webhook end to end: the web and a worker in processes of their own, the
 * `@sendgrid/*` SDKs sending through the SendGrid emulator, which pushes each message's events to
 * the web's `/webhooks/sendgrid`, signed with the run's ECDSA key; real Redis.
 */
import { describe, expect, it } from 'vitest';
import { signSendgridWebhook, sendgridWebhookKeys } from '@herald/sandbox/webhook-keys';
import { waitFor } from '../helpers/env.js';
import { emailWebhookSuite } from '../helpers/email-webhook-suite.js';

describe('SendGrid Event Webhook', () => {
  const {
    stack: stackOf,
    address,
    phone,
    notice,
    label,
    ofType,
    sentTo,
    deliveriesOf,
  } = emailWebhookSuite({
    provider: 'sendgrid',
    tag: 'sg',
    statusReads: ['sendgrid.logs_search', 'sendgrid.logs_message'],
    bounce: { named: 'hard-bounce', providerStatus: 'bounce(bounce)', bounceType: 'HardBounce', suppressedAs: 'sendgrid_hard_bounce' },
    // processed and delivered, each twice.
    duplicatedRequests: 4,
  });

  it('a send found in doubt records the full sg_message_id: its webhook still finds the notice and ends it', async () => {
    const email = address('delivered', '5s');
    stackOf().sandbox.injectFault({ operation: 'sendgrid.send', mode: 'accept_then_hang', match: email });
    const id = await stackOf().createNotice(notice(email, phone(), 40));
    await stackOf().waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    const events = await stackOf().events(id);
    const [sent] = sentTo(email);
    expect(ofType(events, 'email.accepted')).toEqual([
      expect.objectContaining({ resolvedBy: 'provider_search', providerMessageId: sent?.messageId }),
    ]);
    expect(sent?.messageId).toContain('.');
    expect(ofType(events, 'email.observed').find((e) => e.status === 'delivered')).toMatchObject({ source: 'webhook' });
  });

  it('reordered webhooks change no outcome: a deferral that arrives after the delivery it preceded leaves the notice delivered', async () => {
    const email = address('deferred-delivered', '1s', 'wh-reorder');
    const id = await stackOf().createNotice(notice(email, phone(), 20));
    await stackOf().waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    const [sent] = sentTo(email);
    // processed, deferred and delivered, pushed newest first.
    await waitFor(async () => deliveriesOf(sent?.messageId).filter((d) => d.status === 200).length >= 3, 10_000, 'every event');
    const view = await stackOf().view(id);
    expect(view.state).toBe('email_delivered');
    expect(view.email.status).toBe('delivered');
    const fromWebhooks = ofType(await stackOf().events(id), 'email.observed').filter((e) => e.source === 'webhook');
    expect(fromWebhooks.map((e) => e.status)).toEqual(['delivered', 'deferred']);
    expect(ofType(await stackOf().events(id), 'notice.completed')).toHaveLength(1);
  });

  describe('when a request does not verify', () => {
    /** A signed-looking Event Webhook post about a real notice's message. */
    async function target() {
      const email = address('never');
      const id = await stackOf().createNotice(notice(email, phone(), 60));
      await waitFor(async () => ofType(await stackOf().events(id), 'email.accepted').length > 0, 10_000, 'the send');
      const [sent] = sentTo(email);
      const body = JSON.stringify([
        {
          email,
          timestamp: Math.floor(Date.now() / 1000),
          event: 'delivered',
          sg_event_id: `forged-${label()}`,
          sg_message_id: sent!.messageId,
          herald_key: `${id}-email`,
        },
      ]);
      return { id, body };
    }
    const post = (body: string, headers: Record<string, string>) =>
      fetch(`${stackOf().web.url}/webhooks/sendgrid`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });

    it('answers 401 to an unsigned, a forged or a tampered post, and stores nothing', async () => {
      const { id, body } = await target();
      const timestamp = String(Math.floor(Date.now() / 1000));
      const signed = signSendgridWebhook(stackOf().sendgridKeys.privateKey, timestamp, body);
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
      const events = await stackOf().events(id);
      expect(ofType(events, 'email.observed').some((e) => e.source === 'webhook')).toBe(false);
      expect((await stackOf().view(id)).state).toBe('email_sent');
      // The same post, signed with the run's key, is taken: it was the signature that was refused.
      const taken = await post(body, {
        'x-twilio-email-event-webhook-signature': signed,
        'x-twilio-email-event-webhook-timestamp': timestamp,
      });
      expect(taken.status).toBe(200);
      expect((await stackOf().waitForState(id, ['email_delivered'])).state).toBe('email_delivered');
    });
  });
});
