/**
 * The SendGrid and Mailgun webhook receivers: verification and parsing on bodies shaped like the
 * providers' documented examples, and the routes through the web app (inject, real Redis).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { mailgunWebhookSigningKey, sendgridWebhookKeys, signMailgunWebhook, signSendgridWebhook } from '@herald/sandbox/webhook-keys';
import { mailgunEvents, mailgunReceiver, verifyMailgunRequest } from '../../src/webhooks/mailgun.js';
import { sendgridEvents, sendgridVerificationKey, verifySendgridRequest } from '../../src/webhooks/sendgrid.js';
import type { WebhookRequest } from '../../src/webhooks/types.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const NOTICE = 'ntc_0a0000000000abcdefghijklmnop';
const request = (body: string | object, headers: Record<string, string> = {}): WebhookRequest => ({
  rawBody: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
  headers,
  url: '/webhooks/x',
});

describe('the SendGrid receiver', () => {
  describe('verifying the Event Webhook signature', () => {
    // The example that SendGrid's own library (@sendgrid/eventwebhook) verifies in its tests.
    const PUBLIC_KEY =
      'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==';
    const SIGNATURE = 'MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=';
    const TIMESTAMP = '1588788367';
    const PAYLOAD = JSON.stringify({ category: 'example_payload', event: 'test_event', message_id: 'message_id' });
    const signed = (payload: string, signature: string, timestamp: string) =>
      request(payload, { 'x-twilio-email-event-webhook-signature': signature, 'x-twilio-email-event-webhook-timestamp': timestamp });
    const key = sendgridVerificationKey(PUBLIC_KEY);

    it("accepts SendGrid's own example, and the key as PEM too", () => {
      expect(verifySendgridRequest(key, signed(PAYLOAD, SIGNATURE, TIMESTAMP))).toBe(true);
      const pem = `-----BEGIN PUBLIC KEY-----\n${PUBLIC_KEY.slice(0, 64)}\n${PUBLIC_KEY.slice(64)}\n-----END PUBLIC KEY-----\n`;
      expect(verifySendgridRequest(sendgridVerificationKey(pem), signed(PAYLOAD, SIGNATURE, TIMESTAMP))).toBe(true);
    });

    it('refuses another body, another timestamp, a changed signature, another key, or no headers', () => {
      expect(verifySendgridRequest(key, signed('payload', SIGNATURE, TIMESTAMP))).toBe(false);
      expect(verifySendgridRequest(key, signed(PAYLOAD, SIGNATURE, 'timestamp'))).toBe(false);
      expect(verifySendgridRequest(key, signed(PAYLOAD, SIGNATURE.replace('H2j', 'H3j'), TIMESTAMP))).toBe(false);
      expect(verifySendgridRequest(key, signed(PAYLOAD, 'bm90IGEgc2lnbmF0dXJl', TIMESTAMP))).toBe(false);
      const other = sendgridVerificationKey(sendgridWebhookKeys().publicKey);
      expect(verifySendgridRequest(other, signed(PAYLOAD, SIGNATURE, TIMESTAMP))).toBe(false);
      expect(verifySendgridRequest(key, request(PAYLOAD))).toBe(false);
    });

    it('verifies what the sandbox signs with a dev key pair', () => {
      const keys = sendgridWebhookKeys();
      const body = '[{"event":"delivered"}]';
      expect(
        verifySendgridRequest(
          sendgridVerificationKey(keys.publicKey),
          signed(body, signSendgridWebhook(keys.privateKey, '1700000000', body), '1700000000'),
        ),
      ).toBe(true);
    });

    it('refuses at start a verification key that is no ECDSA P-256 public key, naming the variable', () => {
      expect(() => sendgridVerificationKey('not a key')).toThrow(ConfigError);
      expect(() => sendgridVerificationKey('not a key')).toThrow(/SENDGRID_WEBHOOK_PUBLIC_KEY/);
    });
  });

  describe('reading the events', () => {
    const base = (event: string, n: number, extra: Record<string, unknown> = {}) => ({
      email: 'example@test.com',
      timestamp: 1513299569,
      'smtp-id': '<14c5d75ce93.dfd.64b469@ismtpd-555>',
      event,
      category: 'cat facts',
      sg_event_id: `sg_event_id-${n}`,
      sg_message_id: '14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0',
      herald_key: `${NOTICE}-email`,
      ...extra,
    });
    // The documented example: one of each event, the custom args at each event's top level.
    const docs = [
      base('processed', 0),
      base('deferred', 1, { response: '400 try again later', attempt: '5' }),
      base('delivered', 2, { response: '250 OK' }),
      base('open', 3, { useragent: 'Mozilla/4.0', ip: '255.255.255.255' }),
      base('click', 4, { url: 'http://www.sendgrid.com/' }),
      base('bounce', 5, { reason: '500 unknown recipient', status: '5.0.0', type: 'bounce', bounce_classification: 'Invalid Address' }),
      base('bounce', 6, { reason: '452 mailbox full', status: '4.2.2', type: 'blocked' }),
      base('dropped', 7, { reason: 'Bounced Address', status: '5.0.0' }),
      base('spamreport', 8),
      base('unsubscribe', 9),
      base('group_unsubscribe', 10, { asm_group_id: 10 }),
    ];
    const events = sendgridEvents(Buffer.from(JSON.stringify(docs)));

    it('leaves out `processed`, and names message, alias, notice and event of each other one', () => {
      expect(events.map((e) => e.eventId)).toEqual(docs.slice(1).map((e) => e.sg_event_id));
      expect(events[0]).toMatchObject({
        channel: 'email',
        providerMessageId: '14c5d75ce93',
        providerMessageAlias: '14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0',
        noticeId: NOTICE,
      });
    });

    it('maps each as the Email Logs read does', () => {
      const by = (n: number) => events.find((e) => e.eventId === `sg_event_id-${n}`)!.observation;
      expect(by(1)).toEqual({ providerStatus: 'deferred', status: 'deferred', engagement: [] });
      expect(by(2)).toEqual({ providerStatus: 'delivered', status: 'delivered', engagement: [] });
      expect(by(3)).toMatchObject({ status: 'pending', engagement: ['opened'] });
      expect(by(4)).toMatchObject({ status: 'pending', engagement: ['clicked'] });
      expect(by(5)).toMatchObject({
        status: 'bounced',
        providerStatus: 'bounce(bounce)',
        bounceType: 'HardBounce',
        suppressionSource: 'sendgrid_hard_bounce',
      });
      expect(by(6)).toMatchObject({ status: 'deferred', providerStatus: 'bounce(blocked)', bounceType: 'SoftBounce' });
      expect(by(6).suppressed).toBeUndefined();
      expect(by(7)).toMatchObject({ status: 'failed', suppressed: true, suppressionSource: 'sendgrid_dropped' });
      for (const n of [8, 9, 10])
        expect(by(n)).toMatchObject({ status: 'pending', suppressed: true, suppressionSource: 'sendgrid_unsubscribe' });
    });

    it("knows no notice for a message that is not Herald's, and skips events that name no message", () => {
      const [other] = sendgridEvents(Buffer.from(JSON.stringify([base('delivered', 1, { herald_key: 'someone-else' })])));
      expect(other!.noticeId).toBeUndefined();
      expect(sendgridEvents(Buffer.from(JSON.stringify([{ event: 'delivered', email: 'a@example.com' }])))).toEqual([]);
    });

    it('throws on a body that is not an array of events', () => {
      expect(() => sendgridEvents(Buffer.from('{"event":"delivered"}'))).toThrow(/not an array/);
      expect(() => sendgridEvents(Buffer.from('nope'))).toThrow(/not JSON/);
      expect(() => sendgridEvents(Buffer.from('[{"no":"event"}]'))).toThrow(/no event name/);
    });
  });
});

describe('the Mailgun receiver', () => {
  const key = 'key-0123456789abcdef0123456789abcdef';
  const now = 1_529_006_854_000;
  // The documented `delivered` example of the webhooks API.
  const deliveredEvent = {
    tags: ['my_tag_1', 'my_tag_2'],
    timestamp: 1521472262.908181,
    envelope: { transport: 'smtp', sender: 'bob@sandbox.mailgun.org', 'sending-ip': '209.61.154.250', targets: 'alice@example.com' },
    'recipient-domain': 'example.com',
    id: 'CPgfbmQMTCKtHW6uIWtuVe',
    campaigns: [],
    'user-variables': { herald_key: `${NOTICE}-email`, 'my-var-2': 'awesome' },
    flags: { 'is-routed': false, 'is-authenticated': true, 'is-system-test': false, 'is-test-mode': false },
    'log-level': 'info',
    message: {
      headers: {
        to: 'Alice <alice@example.com>',
        'message-id': '20130503182626.18666.16540@sandbox.mailgun.org',
        from: 'Bob <bob@sandbox.mailgun.org>',
        subject: 'Test delivered webhook',
      },
      attachments: [],
      size: 111,
    },
    recipient: 'alice@example.com',
    event: 'delivered',
    'delivery-status': { tls: true, 'mx-host': 'smtp-in.example.com', 'attempt-no': 1, description: '', code: 250, message: 'OK' },
  };
  const signedBody = (eventData: object, signature = signMailgunWebhook(key, String(now / 1000))) =>
    request({ signature, 'event-data': eventData });

  describe('verifying the signature', () => {
    it('accepts the HMAC of timestamp and token made with the signing key, or the parent-signature', () => {
      expect(verifyMailgunRequest(key, signedBody(deliveredEvent), now)).toBe(true);
      const parent = signMailgunWebhook(key, String(now / 1000), 'a'.repeat(50));
      const subaccount = { ...parent, signature: 'f'.repeat(64), 'parent-signature': parent.signature };
      expect(verifyMailgunRequest(key, signedBody(deliveredEvent, subaccount), now)).toBe(true);
    });

    it('refuses another key, another token, a short signature, no signature, or a body that is not JSON', () => {
      expect(verifyMailgunRequest(mailgunWebhookSigningKey(), signedBody(deliveredEvent), now)).toBe(false);
      const signature = signMailgunWebhook(key, String(now / 1000));
      expect(verifyMailgunRequest(key, signedBody(deliveredEvent, { ...signature, token: `${signature.token}x` }), now)).toBe(false);
      expect(
        verifyMailgunRequest(key, signedBody(deliveredEvent, { ...signature, signature: signature.signature.slice(0, 32) }), now),
      ).toBe(false);
      expect(verifyMailgunRequest(key, request({ 'event-data': deliveredEvent }), now)).toBe(false);
      expect(
        verifyMailgunRequest(key, request(`timestamp=${now / 1000}&token=${signature.token}&signature=${signature.signature}`), now),
      ).toBe(false);
    });

    it('honours a signature for ten minutes, and up to five minutes ahead of Herald’s clock: fifteen at most', () => {
      const body = signedBody(deliveredEvent);
      expect(verifyMailgunRequest(key, body, now + 9 * 60_000)).toBe(true);
      expect(verifyMailgunRequest(key, body, now + 11 * 60_000)).toBe(false);
      expect(verifyMailgunRequest(key, body, now - 4 * 60_000)).toBe(true);
      expect(verifyMailgunRequest(key, body, now - 6 * 60_000)).toBe(false);
      expect(mailgunReceiver(key, { now: () => now }).verify(body)).toBe(true);
    });
  });

  describe('reading the event', () => {
    const failed = (severity: string, reason: string, code: number) => ({
      ...deliveredEvent,
      id: `${severity}-${reason}`,
      event: 'failed',
      severity,
      reason,
      'delivery-status': { code, message: '', description: '', 'attempt-no': 1 },
    });

    it('names the message without angle brackets, the notice by herald_key, the event by its id', () => {
      const withBrackets = {
        ...deliveredEvent,
        message: { headers: { 'message-id': '<20130503182626.18666.16540@sandbox.mailgun.org>' } },
      };
      for (const eventData of [deliveredEvent, withBrackets]) {
        expect(mailgunEvents(signedBody(eventData))).toEqual([
          {
            channel: 'email',
            providerMessageId: '20130503182626.18666.16540@sandbox.mailgun.org',
            noticeId: NOTICE,
            eventId: 'CPgfbmQMTCKtHW6uIWtuVe',
            observation: { providerStatus: 'delivered', status: 'delivered', engagement: [] },
          },
        ]);
      }
    });

    it('maps failures, opens and clicks as the events read does, and leaves out what changes nothing', () => {
      const one = (eventData: object) => mailgunEvents(signedBody(eventData))[0]?.observation;
      expect(one(failed('permanent', 'bounce', 550))).toMatchObject({
        status: 'bounced',
        bounceType: 'permanent:bounce',
        errorCode: 550,
        suppressionSource: 'mailgun_bounce',
      });
      expect(one(failed('permanent', 'suppress-bounce', 605))).toMatchObject({
        status: 'failed',
        suppressed: true,
        suppressionSource: 'mailgun_suppressed',
      });
      expect(one(failed('temporary', 'generic', 452))).toMatchObject({ status: 'deferred', providerStatus: 'failed(temporary:generic)' });
      expect(one({ ...deliveredEvent, event: 'opened' })).toMatchObject({ status: 'pending', engagement: ['opened'] });
      expect(one({ ...deliveredEvent, event: 'clicked' })).toMatchObject({ status: 'pending', engagement: ['clicked'] });
      for (const event of ['accepted', 'unsubscribed', 'complained'])
        expect(mailgunEvents(signedBody({ ...deliveredEvent, event }))).toEqual([]);
    });

    it('throws on a body without event-data', () => {
      expect(() => mailgunEvents(request({ signature: {} }))).toThrow(/event-data/);
      expect(() => mailgunEvents(request({ 'event-data': { event: 'delivered' } }))).toThrow(/id/);
    });
  });
});

describe('the routes', () => {
  const sendgrid = sendgridWebhookKeys();
  const mailgunKey = mailgunWebhookSigningKey();
  let prefix: string;
  /** SendGrid's route: SendGrid is the email provider. */
  let web: WebUnderTest;
  /** Mailgun's route: Mailgun is the email provider. */
  let mg: WebUnderTest;
  let bare: WebUnderTest;
  beforeAll(async () => {
    prefix = testPrefix('webhook-routes');
    web = await startWebUnderTest(
      testConfig(prefix, {
        HERALD_EMAIL_PROVIDER: 'sendgrid',
        SENDGRID_WEBHOOK_PUBLIC_KEY: sendgrid.publicKey,
        HERALD_METRICS_CACHE_MS: '0',
      }),
    );
    mg = await startWebUnderTest(testConfig(prefix, { HERALD_EMAIL_PROVIDER: 'mailgun', MAILGUN_WEBHOOK_SIGNING_KEY: mailgunKey }));
    bare = await startWebUnderTest(testConfig(prefix));
  });
  afterAll(async () => {
    await web?.close();
    await mg?.close();
    await bare?.close();
    await cleanUp(prefix);
  });

  const post = (app: WebUnderTest, path: string, body: string, headers: Record<string, string> = {}) =>
    app.app.inject({ method: 'POST', url: path, payload: body, headers: { 'content-type': 'application/json', ...headers } });
  const sendgridPost = (body: string) => {
    const timestamp = String(Math.floor(Date.now() / 1000));
    return post(web, '/webhooks/sendgrid', body, {
      'x-twilio-email-event-webhook-signature': signSendgridWebhook(sendgrid.privateKey, timestamp, body),
      'x-twilio-email-event-webhook-timestamp': timestamp,
    });
  };
  const ignored = async (provider: string, outcome: string) => {
    const text = (await web.call('GET', '/metrics')).body;
    return Number(
      new RegExp(`^herald_webhook_events_ignored_total\\{provider="${provider}",outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0,
    );
  };
  const unknownEvent = (n: number) =>
    JSON.stringify([
      { event: 'delivered', sg_event_id: `ev-${n}`, sg_message_id: `unknown${n}.filter0001`, herald_key: `${NOTICE}-email` },
    ]);

  it('answer 404 where their secret is not configured', async () => {
    expect((await post(bare, '/webhooks/sendgrid', '[]')).statusCode).toBe(404);
    expect((await post(bare, '/webhooks/mailgun', '{}')).statusCode).toBe(404);
  });

  it('answer 404 where their provider is not the chosen one, whatever secret is set', async () => {
    // Postmark is the email provider here: neither key opens its route.
    const postmark = await startWebUnderTest(
      testConfig(prefix, { SENDGRID_WEBHOOK_PUBLIC_KEY: sendgrid.publicKey, MAILGUN_WEBHOOK_SIGNING_KEY: mailgunKey }),
    );
    try {
      expect((await post(postmark, '/webhooks/sendgrid', unknownEvent(9))).statusCode).toBe(404);
      const signature = signMailgunWebhook(mailgunKey, String(Math.floor(Date.now() / 1000)));
      expect(
        (await post(postmark, '/webhooks/mailgun', JSON.stringify({ signature, 'event-data': deliveredEventFor('x@mg') }))).statusCode,
      ).toBe(404);
      expect((await post(mg, '/webhooks/sendgrid', unknownEvent(10))).statusCode).toBe(404);
    } finally {
      await postmark.close();
    }
  });

  it('answer 401 `unauthorized` to a post that does not verify', async () => {
    const unsigned = await post(web, '/webhooks/sendgrid', unknownEvent(1));
    expect(unsigned.statusCode).toBe(401);
    expect(unsigned.json()).toMatchObject({ error: { code: 'unauthorized' } });
    const mailgun = await post(
      mg,
      '/webhooks/mailgun',
      JSON.stringify({ signature: signMailgunWebhook('other', String(Math.floor(Date.now() / 1000))), 'event-data': {} }),
    );
    expect(mailgun.statusCode).toBe(401);
  });

  it('answer 200 to a verified event about a message Herald does not know, and count it', async () => {
    const before = await ignored('sendgrid', 'unknown_message');
    const answer = await sendgridPost(unknownEvent(2));
    expect(answer.statusCode).toBe(200);
    expect(answer.json()).toEqual({ received: 1 });
    expect(await ignored('sendgrid', 'unknown_message')).toBe(before + 1);
    const mailgunBefore = await ignored('mailgun', 'unknown_message');
    const signature = signMailgunWebhook(mailgunKey, String(Math.floor(Date.now() / 1000)));
    const mailgun = await post(
      mg,
      '/webhooks/mailgun',
      JSON.stringify({ signature, 'event-data': { ...deliveredEventFor('unknown@mg.example'), id: 'x1' } }),
    );
    expect(mailgun.statusCode).toBe(200);
    expect(await ignored('mailgun', 'unknown_message')).toBe(mailgunBefore + 1);
  });

  it('answer 400 `validation_failed` to a verified body that is not the provider’s', async () => {
    const answer = await sendgridPost('{"event":"delivered"}');
    expect(answer.statusCode).toBe(400);
    expect(answer.json()).toMatchObject({ error: { code: 'validation_failed' } });
    const signature = signMailgunWebhook(mailgunKey, String(Math.floor(Date.now() / 1000)));
    const mailgun = await post(mg, '/webhooks/mailgun', JSON.stringify({ signature }));
    expect(mailgun.statusCode).toBe(400);
  });
});

function deliveredEventFor(messageId: string) {
  return {
    event: 'delivered',
    timestamp: Date.now() / 1000,
    message: { headers: { 'message-id': messageId } },
    'user-variables': { herald_key: `${NOTICE}-email` },
  };
}
