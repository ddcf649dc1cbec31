/**
 * The Postmark and Twilio webhook receivers: verification and parsing of bodies shaped like the
 * providers' documented examples, and the routes through `inject` on real Redis (401 with
 * nothing stored, 400 for a body that is not the provider's, 200 and a metric for an unknown
 * message, 404 for a route that is not configured).
 */
import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postmarkReceiver } from '../../src/webhooks/postmark.js';
import { twilioReceiver, twilioStatusCallbackUrl } from '../../src/webhooks/twilio.js';
import type { WebhookRequest } from '../../src/webhooks/types.js';
import { WebhookPayloadError } from '../../src/webhooks/types.js';
import { configProblems, plainRedis, testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const AUTH = 'herald-hooks:s3cret-pass-of-the-test';
const TOKEN = 'twilio-token-of-the-test';
const PUBLIC_URL = 'https://herald.example.test';
const NOTICE = 'ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab';
const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString('base64')}`;

/** A Postmark webhook request; `authorization` null sends none. */
function postmarkRequest(body: unknown, authorization: string | null = basic(AUTH)): WebhookRequest {
  return {
    rawBody: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
    headers: authorization === null ? {} : { authorization },
    url: '/webhooks/postmark',
  };
}

/** A status callback signed as Twilio signs it: over the URL it calls and the form's parameters. */
function twilioRequest(
  params: Record<string, string>,
  url = `/webhooks/twilio?notice=${NOTICE}`,
  token = TOKEN,
  signedBase = PUBLIC_URL,
): WebhookRequest {
  return {
    rawBody: Buffer.from(new URLSearchParams(params).toString()),
    headers: { 'x-twilio-signature': twilio.getExpectedTwilioSignature(token, signedBase + url, params) },
    url,
  };
}

// Shaped like Postmark's documented webhook examples (postmarkapp.com/developer/webhooks).
const delivery = {
  RecordType: 'Delivery',
  ServerID: 23,
  MessageStream: 'outbound',
  MessageID: '883953f4-6105-42a2-a16a-77a8eac79483',
  Recipient: 'john@example.com',
  Tag: 'welcome-email',
  DeliveredAt: '2019-11-05T16:33:54.9070259Z',
  Details: 'Test delivery webhook details',
  Metadata: { herald_key: `${NOTICE}-email`, a_key: 'a_value' },
};
const hardBounce = {
  RecordType: 'Bounce',
  MessageStream: 'outbound',
  // Postmark's documented example, as it sends it: a bounce ID past 2^53, which JSON numbers round.
  // oxlint-disable-next-line no-loss-of-precision
  ID: 4323372036854775807,
  Type: 'HardBounce',
  TypeCode: 1,
  Name: 'Hard bounce',
  Tag: 'Test',
  MessageID: '883953f4-6105-42a2-a16a-77a8eac79483',
  Metadata: { herald_key: `${NOTICE}-email` },
  ServerID: 23,
  Description: 'The server was unable to deliver your message (ex: unknown user, mailbox not found).',
  Details: 'Test bounce details',
  Email: 'john@example.com',
  From: 'sender@example.com',
  BouncedAt: '2019-11-05T16:33:54.9070259Z',
  DumpAvailable: true,
  Inactive: true,
  CanActivate: true,
  Subject: 'Test subject',
  Content: 'Test content',
};
const open = {
  RecordType: 'Open',
  MessageStream: 'outbound',
  Metadata: { herald_key: `${NOTICE}-email` },
  FirstOpen: true,
  Recipient: 'john@example.com',
  MessageID: '883953f4-6105-42a2-a16a-77a8eac79483',
  ReceivedAt: '2019-11-05T16:33:54.9070259Z',
  Platform: 'WebMail',
  ReadSeconds: 5,
  Tag: 'welcome-email',
  UserAgent: 'Mozilla/5.0',
  OS: { Name: 'OS X 10.7 Lion', Family: 'OS X 10', Company: 'Apple Computer, Inc.' },
  Client: { Name: 'Chrome 35.0.1916.153', Family: 'Chrome', Company: 'Google' },
  Geo: { IP: '188.2.95.4', City: 'Novi Sad', Country: 'Serbia' },
};
const click = {
  RecordType: 'Click',
  MessageStream: 'outbound',
  Metadata: { herald_key: `${NOTICE}-email` },
  Recipient: 'john@example.com',
  MessageID: '00000000-0000-0000-0000-000000000000',
  ReceivedAt: '2017-10-25T15:21:11.3323211Z',
  Platform: 'Desktop',
  ClickLocation: 'HTML',
  OriginalLink: 'https://example.com',
  Tag: 'welcome-email',
  UserAgent: 'Mozilla/5.0',
};
const unsubscribe = {
  RecordType: 'SubscriptionChange',
  MessageID: '883953f4-6105-42a2-a16a-77a8eac79483',
  ServerID: 123456,
  MessageStream: 'outbound',
  ChangedAt: '2020-02-01T10:53:34.416071Z',
  Recipient: 'bounced-address@wildbit.com',
  Origin: 'Recipient',
  SuppressSending: true,
  SuppressionReason: 'HardBounce',
  Tag: 'my-tag',
  Metadata: { herald_key: `${NOTICE}-email` },
};

describe('postmarkReceiver', () => {
  const receiver = postmarkReceiver(AUTH);

  it('verifies the basic-auth credentials of the webhook URL, and nothing else', () => {
    expect(receiver.verify(postmarkRequest(delivery))).toBe(true);
    expect(receiver.verify(postmarkRequest(delivery, `basic   ${Buffer.from(AUTH).toString('base64')}`))).toBe(true);
    expect(receiver.verify(postmarkRequest(delivery, basic('herald-hooks:wrong')))).toBe(false);
    expect(receiver.verify(postmarkRequest(delivery, basic('other:s3cret-pass-of-the-test')))).toBe(false);
    expect(receiver.verify(postmarkRequest(delivery, basic(`${AUTH}x`)))).toBe(false);
    expect(receiver.verify(postmarkRequest(delivery, null))).toBe(false);
    expect(receiver.verify(postmarkRequest(delivery, `Bearer ${AUTH}`))).toBe(false);
    expect(receiver.verify(postmarkRequest(delivery, 'Basic'))).toBe(false);
  });

  it('takes its credentials as user:password, and the configuration names a malformed value', () => {
    expect(configProblems({ HERALD_POSTMARK_WEBHOOK_AUTH: AUTH })).toEqual([]);
    for (const bad of ['no-colon', ':password', 'user:']) {
      expect(configProblems({ HERALD_POSTMARK_WEBHOOK_AUTH: bad })).toEqual([
        expect.stringContaining('HERALD_POSTMARK_WEBHOOK_AUTH must be user:password'),
      ]);
    }
  });

  it('maps a Delivery to delivered, with the notice from Herald’s metadata key', () => {
    const [event] = receiver.events(postmarkRequest(delivery));
    expect(event).toMatchObject({
      channel: 'email',
      providerMessageId: delivery.MessageID,
      noticeId: NOTICE,
      observation: { status: 'delivered', providerStatus: 'Sent+Delivered', engagement: [] },
    });
    expect(event!.eventId).toContain('Delivery');
  });

  it('maps a hard Bounce to bounced and suppressed, a Transient or soft one to deferred, as a status read does', () => {
    expect(receiver.events(postmarkRequest(hardBounce))[0]!.observation).toEqual({
      providerStatus: 'Sent+Bounced(HardBounce)',
      status: 'bounced',
      engagement: [],
      bounceType: 'HardBounce',
      suppressed: true,
    });
    for (const [Type, TypeCode] of [
      ['Transient', 2],
      ['SoftBounce', 4096],
    ] as const) {
      const observation = receiver.events(postmarkRequest({ ...hardBounce, Type, TypeCode, Inactive: false }))[0]!.observation;
      expect(observation).toMatchObject({ status: 'deferred', bounceType: Type });
      expect(observation.suppressed).toBeUndefined();
    }
    const complaint = receiver.events(
      postmarkRequest({ ...hardBounce, RecordType: 'SpamComplaint', Type: 'SpamComplaint', TypeCode: 512 }),
    );
    expect(complaint[0]!.observation).toMatchObject({ status: 'bounced', bounceType: 'SpamComplaint', suppressed: true });
  });

  it('maps an Open and a Click to engagement only, never to delivery', () => {
    expect(receiver.events(postmarkRequest(open))[0]!.observation).toEqual({
      providerStatus: 'Sent+Opened',
      status: 'pending',
      engagement: ['opened'],
    });
    expect(receiver.events(postmarkRequest(click))[0]!.observation).toEqual({
      providerStatus: 'Sent+LinkClicked',
      status: 'pending',
      engagement: ['clicked'],
    });
  });

  it('maps a SubscriptionChange that suppresses sending to failed and suppressed; a resubscription records nothing', () => {
    expect(receiver.events(postmarkRequest(unsubscribe))[0]!.observation).toMatchObject({ status: 'failed', suppressed: true });
    expect(receiver.events(postmarkRequest({ ...unsubscribe, SuppressSending: false }))).toEqual([]);
  });

  it('tells events apart by RecordType, message and the event’s own time or bounce ID, and the same event alike', () => {
    const id = (body: object) => receiver.events(postmarkRequest(body))[0]!.eventId;
    expect(id(delivery)).toBe(id({ ...delivery }));
    expect(id(hardBounce)).not.toBe(id({ ...hardBounce, ID: 42 }));
    expect(id(open)).not.toBe(id({ ...open, ReceivedAt: '2019-11-05T16:40:00Z' }));
    expect(new Set([id(delivery), id(hardBounce), id(open), id(unsubscribe)]).size).toBe(4);
  });

  it('knows no notice for a key that is not Herald’s, a digest of a long key, or no metadata', () => {
    for (const Metadata of [{ herald_key: `sha256:${'a'.repeat(64)}` }, { herald_key: 'ntc_zz-email' }, { other: 'x' }, undefined]) {
      expect(receiver.events(postmarkRequest({ ...delivery, Metadata }))[0]!.noticeId).toBeUndefined();
    }
  });

  it('refuses a body that is not Postmark’s; leaves out records Herald has no use for', () => {
    for (const body of ['not json', '[]', '"x"', { MessageID: 'x' }, { RecordType: 'Delivery' }, { ...delivery, DeliveredAt: undefined }]) {
      expect(() => receiver.events(postmarkRequest(body))).toThrow(WebhookPayloadError);
    }
    expect(receiver.events(postmarkRequest({ RecordType: 'Inbound', MessageID: 'x' }))).toEqual([]);
  });
});

describe('twilioReceiver', () => {
  const receiver = twilioReceiver(TOKEN, PUBLIC_URL);
  const callback = {
    AccountSid: 'AC0123',
    ApiVersion: '2010-04-01',
    From: '+15005550006',
    MessageSid: 'SM0123',
    MessageStatus: 'delivered',
    SmsSid: 'SM0123',
    SmsStatus: 'delivered',
    To: '+12025550100',
  };

  it('checks X-Twilio-Signature over HERALD_PUBLIC_URL + the path and query, with the form', () => {
    expect(receiver.verify(twilioRequest(callback))).toBe(true);
    expect(receiver.verify(twilioRequest(callback, undefined, 'another-token'))).toBe(false);
    expect(receiver.verify(twilioRequest(callback, undefined, TOKEN, 'https://elsewhere.example'))).toBe(false);
    const tampered = twilioRequest(callback);
    expect(
      receiver.verify({ ...tampered, rawBody: Buffer.from(new URLSearchParams({ ...callback, MessageStatus: 'failed' }).toString()) }),
    ).toBe(false);
    expect(receiver.verify({ ...tampered, url: `/webhooks/twilio?notice=ntc_0b01jd4yq3k2m5n6p7r8s9t0v1ab` })).toBe(false);
    expect(receiver.verify({ ...tampered, headers: {} })).toBe(false);
  });

  it('maps the status as the adapter’s status read does, with the notice from the callback URL', () => {
    expect(receiver.events(twilioRequest(callback))).toEqual([
      {
        channel: 'sms',
        providerMessageId: 'SM0123',
        noticeId: NOTICE,
        eventId: 'SM0123\ndelivered',
        observation: { providerStatus: 'delivered', status: 'delivered', engagement: [] },
      },
    ]);
    const undelivered = receiver.events(twilioRequest({ ...callback, MessageStatus: 'undelivered', ErrorCode: '30003' }))[0]!;
    expect(undelivered.observation).toEqual({ providerStatus: 'undelivered', status: 'failed', engagement: [], errorCode: 30003 });
    expect(receiver.events(twilioRequest({ ...callback, MessageStatus: 'failed', ErrorCode: '21610' }))[0]!.observation.suppressed).toBe(
      true,
    );
    expect(receiver.events(twilioRequest({ ...callback, MessageStatus: 'sent' }))[0]!.observation.status).toBe('pending');
    expect(receiver.events(twilioRequest(callback, '/webhooks/twilio'))[0]!.noticeId).toBeUndefined();
  });

  it('refuses a callback without a message or a status', () => {
    expect(() => receiver.events(twilioRequest({ MessageStatus: 'sent' }))).toThrow(WebhookPayloadError);
    expect(() => receiver.events(twilioRequest({ MessageSid: 'SM1' }))).toThrow(WebhookPayloadError);
  });

  it('builds the StatusCallback URL the adapter sends, under HERALD_PUBLIC_URL', () => {
    expect(twilioStatusCallbackUrl(`${PUBLIC_URL}/`, NOTICE)).toBe(`${PUBLIC_URL}/webhooks/twilio?notice=${NOTICE}`);
  });
});

describe('the webhook routes', () => {
  const prefix = testPrefix('whroutes');
  let web: WebUnderTest;

  beforeAll(async () => {
    web = await startWebUnderTest(
      testConfig(prefix, {
        HERALD_POSTMARK_WEBHOOK_AUTH: AUTH,
        HERALD_PUBLIC_URL: PUBLIC_URL,
        TWILIO_AUTH_TOKEN: TOKEN,
        HERALD_METRICS_CACHE_MS: '0',
      }),
    );
  });
  afterAll(async () => {
    await web?.close();
    await cleanUp(prefix);
  });

  const post = (path: string, request: WebhookRequest) =>
    web.app.inject({
      method: 'POST',
      url: path,
      payload: request.rawBody,
      headers: {
        'content-type': path.includes('twilio') ? 'application/x-www-form-urlencoded' : 'application/json',
        ...(request.headers as Record<string, string>),
      },
    });
  const keys = async () => {
    const redis = plainRedis();
    const found = await redis.keys(`${prefix}:*`);
    await redis.quit();
    return found.sort();
  };
  const metrics = async () => (await web.app.inject({ method: 'GET', url: '/metrics' })).body;

  it('answers 401 with Herald’s error, and stores nothing, when a request does not verify', async () => {
    const before = await keys();
    const refused = [
      await post('/webhooks/postmark', postmarkRequest(delivery, basic('herald-hooks:guess'))),
      await post('/webhooks/postmark', postmarkRequest(delivery, null)),
      await post(
        `/webhooks/twilio?notice=${NOTICE}`,
        twilioRequest({ MessageSid: 'SM1', MessageStatus: 'delivered' }, undefined, 'forged'),
      ),
      await post(`/webhooks/twilio?notice=${NOTICE}`, { ...twilioRequest({ MessageSid: 'SM1', MessageStatus: 'delivered' }), headers: {} }),
    ];
    for (const res of refused) {
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('unauthorized');
    }
    expect(await keys()).toEqual(before);
  });

  it('answers 400 validation_failed to a verified body that is not the provider’s', async () => {
    const res = await post('/webhooks/postmark', postmarkRequest({ Hello: 'world' }));
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_failed');
  });

  it('answers 200 to an event about an unknown message, and counts it in /metrics', async () => {
    const unknown = { ...delivery, MessageID: 'not-ours', Metadata: {} };
    expect((await post('/webhooks/postmark', postmarkRequest(unknown))).statusCode).toBe(200);
    const ofNoNotice = { ...delivery, MessageID: 'not-ours-either' };
    expect((await post('/webhooks/postmark', postmarkRequest(ofNoNotice))).statusCode).toBe(200);
    const sms = twilioRequest({ MessageSid: 'SMunknown', MessageStatus: 'delivered' });
    const res = await post(`/webhooks/twilio?notice=${NOTICE}`, sms);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ received: 1 });
    const text = await metrics();
    expect(text).toMatch(/herald_webhook_events_ignored_total\{provider="postmark",outcome="unknown_message"\} 2/);
    expect(text).toMatch(/herald_webhook_events_ignored_total\{provider="twilio",outcome="unknown_message"\} 1/);
  });

  it('has no route for a provider whose secret is unset', async () => {
    expect((await web.app.inject({ method: 'POST', url: '/webhooks/sendgrid', payload: '[]' })).statusCode).toBe(404);
  });
});
