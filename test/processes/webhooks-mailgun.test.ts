/**
 * Mailgun's webhooks end to end: the web and a worker in processes of their own, the `mailgun.js`
 * SDK sending through the Mailgun emulator, which pushes each message's events to the web's
 * `/webhooks/mailgun` as JSON, signed with the run's HMAC signing key; real Redis.
 */
import { describe, expect, it } from 'vitest';
import { mailgunWebhookSigningKey, signMailgunWebhook } from '@herald/sandbox/webhook-keys';
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
    statusReads: ['mailgun.logs'],
    bounce: {
      named: 'permanent-failure',
      providerStatus: 'failed(permanent:bounce)',
      bounceType: 'permanent:bounce',
      suppressedAs: 'mailgun_bounce',
    },
    // the delivered event, twice.
    duplicatedRequests: 2,
  });

  const post = (body: unknown) =>
    fetch(`${stackOf().web.url}/webhooks/mailgun`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const now = () => String(Math.floor(Date.now() / 1000));

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

    it('refuses a signature older than ten minutes: the window is fifteen minutes at most', async () => {
      const { id, eventData } = await target();
      const elevenMinutesAgo = String(Math.floor(Date.now() / 1000) - 11 * 60);
      const late = await post({ signature: signMailgunWebhook(stackOf().mailgunSigningKey, elevenMinutesAgo), 'event-data': eventData });
      expect(late.status).toBe(401);
      expect((await stackOf().view(id)).state).toBe('email_sent');
    });
  });

  describe('when a signed request is replayed', () => {
    // Mailgun's signature covers its timestamp and token, not the event: one observed request
    // would otherwise sign any event, for any notice, as often as its window allows.
    it('takes each (timestamp, token) once: the request itself, or another event under its signature, is refused the second time', async () => {
      const stack = stackOf();
      const delivered = address('never');
      const bounced = address('never');
      const a = await stack.createNotice(notice(delivered, phone(), 60));
      const b = await stack.createNotice(notice(bounced, phone(), 60));
      for (const id of [a, b]) await waitFor(async () => ofType(await stack.events(id), 'email.accepted').length > 0, 10_000, 'the send');
      const signature = signMailgunWebhook(stack.mailgunSigningKey, now());
      const event = (email: string, id: string, fields: Record<string, unknown>) => ({
        id: `replay${label()}-${id}`,
        timestamp: Date.now() / 1000,
        recipient: email,
        message: { headers: { 'message-id': sentTo(email)[0]!.messageId } },
        'user-variables': { herald_key: `${id}-email` },
        ...fields,
      });
      const delivery = {
        signature,
        'event-data': event(delivered, a, { event: 'delivered', 'delivery-status': { code: 250, message: 'OK' } }),
      };
      expect((await post(delivery)).status).toBe(200);
      await stack.waitForState(a, ['email_delivered']);

      // The same request again, and a permanent bounce of another notice under the same signature.
      const replayed = await post(delivery);
      const forged = await post({
        signature,
        'event-data': event(bounced, b, { event: 'failed', severity: 'permanent', reason: 'bounce', 'delivery-status': { code: 550 } }),
      });
      for (const response of [replayed, forged]) {
        expect(response.status).toBe(401);
        expect(await response.json()).toMatchObject({ error: { code: 'unauthorized' } });
      }
      expect((await stack.view(b)).state).toBe('email_sent');
      expect(ofType(await stack.events(b), 'email.observed').some((e) => e.source === 'webhook')).toBe(false);
      expect((await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(bounced)}`)).status).toBe(404);
      expect(ofType(await stack.events(a), 'email.observed').filter((e) => e.source === 'webhook')).toHaveLength(1);
    });
  });
});
