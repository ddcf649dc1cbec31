/**
 * Mailgun's webhooks end to end: the web and a worker in processes of their own, the `mailgun.js`
 * SDK sending through the Mailgun emulator, which pushes each message's events to the web's
 * `/webhooks/mailgun` as JSON, signed with the run's HMAC signing key; real Redis.
 */
import { describe, expect, it } from 'vitest';
import { mailgunWebhookSigningKey, signMailgunWebhook } from '../../src/sandbox/webhook-keys.js';
import { waitFor } from '../helpers/env.js';
import { emailWebhookSuite } from '../helpers/email-webhook-suite.js';

describe('Mailgun webhooks', () => {
  const {
    stack: stackOf,
    address,
    phone,
    notice,
    label,
    ofType,
    sentTo,
  } = emailWebhookSuite({
    provider: 'mailgun',
    tag: 'mg',
    statusReads: ['mailgun.events'],
    bounce: {
      named: 'permanent-failure',
      providerStatus: 'failed(permanent:bounce)',
      bounceType: 'permanent:bounce',
      suppressedAs: 'mailgun_bounce',
    },
    // the delivered event, twice.
    duplicatedRequests: 2,
  });

  describe('when a request does not verify', () => {
    /** A Mailgun webhook post about a real notice's message, with the given signature. */
    async function target() {
      const email = address('never');
      const id = await stackOf().createNotice(notice(email, phone(), 60));
      await waitFor(async () => ofType(await stackOf().events(id), 'email.accepted').length > 0, 10_000, 'the send');
      const [sent] = sentTo(email);
      const eventData = {
        event: 'delivered',
        id: `forged${label()}`,
        timestamp: Date.now() / 1000,
        recipient: email,
        message: { headers: { 'message-id': sent!.messageId } },
        'user-variables': { herald_key: `${id}-email` },
        'delivery-status': { code: 250, message: 'OK' },
      };
      return { id, eventData };
    }
    const post = (body: unknown) =>
      fetch(`${stackOf().web.url}/webhooks/mailgun`, {
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
          signature: { ...signMailgunWebhook(stackOf().mailgunSigningKey, now()), token: 'another-token' },
          'event-data': eventData,
        }),
        await post({
          signature: signMailgunWebhook(stackOf().mailgunSigningKey, String(Math.floor(Date.now() / 1000) - 2 * 3600)),
          'event-data': eventData,
        }),
        await post('timestamp=1&token=x&signature=y&event=delivered'),
      ];
      for (const response of refusals) {
        expect(response.status).toBe(401);
        expect(await response.json()).toMatchObject({ error: { code: 'unauthorized' } });
      }
      expect(ofType(await stackOf().events(id), 'email.observed').some((e) => e.source === 'webhook')).toBe(false);
      expect((await stackOf().view(id)).state).toBe('email_sent');
      // The same event, signed with the run's key, is taken: it was the signature that was refused.
      const taken = await post({ signature: signMailgunWebhook(stackOf().mailgunSigningKey, now()), 'event-data': eventData });
      expect(taken.status).toBe(200);
      expect((await stackOf().waitForState(id, ['email_delivered'])).state).toBe('email_delivered');
    });
  });
});
