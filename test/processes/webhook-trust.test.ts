/**
 * What a webhook may write into a notice's trail, through real web and worker processes, the
 * emulators and real Redis: a route is on only for the chosen provider with a secret set for it;
 * an event speaks only of an attempt its own provider made; a completed notice takes a bounded
 * number of late observations; and a webhook route's body is bounded before anything is verified.
 */
import twilio from 'twilio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signSendgridWebhook } from '@herald/sandbox/webhook-keys';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { WebProcess } from '../helpers/web-process.js';
import { startWebhookStack, type WebhookStack } from '../helpers/webhook-stack.js';

const PUBLIC_URL = 'https://herald.trust.test';
const POSTMARK_AUTH = 'hooks:postmark-secret-of-the-trust-test';
/** What the sandbox stands in with for TWILIO_AUTH_TOKEN, published in the source. */
const SANDBOX_TWILIO_TOKEN = 'sandbox-auth-token';

let stack: WebhookStack;
let n = 0;
const label = () => `trust${process.pid}x${++n}`;
const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);

beforeAll(async () => {
  // Email by Postmark (its webhook on), SMS by AWS End User Messaging: Twilio is not the SMS provider.
  stack = await startWebhookStack({
    prefix: testPrefix('trust'),
    env: { HERALD_SMS_PROVIDER: 'aws-sms', HERALD_PUBLIC_URL: PUBLIC_URL, HERALD_POSTMARK_WEBHOOK_AUTH: POSTMARK_AUTH },
  });
});
afterAll(async () => {
  await stack?.close();
});

/** A Twilio status callback for `noticeId`'s SMS, signed as Twilio signs: over the public URL called and the form. */
function twilioCallback(token: string, noticeId: string, params: Record<string, string>) {
  const path = `/webhooks/twilio?notice=${noticeId}`;
  return {
    path,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': twilio.getExpectedTwilioSignature(token, PUBLIC_URL + path, params),
    },
    body: new URLSearchParams(params).toString(),
  };
}

async function post(url: string, path: string, headers: Record<string, string>, body: string | Buffer) {
  const response = await fetch(`${url}${path}`, { method: 'POST', headers, body, signal: AbortSignal.timeout(15_000) });
  return { status: response.status, text: await response.text() };
}

describe('a webhook route is on only for the chosen provider, with a secret set for it', () => {
  it('refuses a Twilio callback signed with the sandbox default under HERALD_SMS_PROVIDER=aws-sms: the SMS stays sms_sent', async () => {
    const id = await stack.createNotice(
      noticeBody({
        recipient: { id: `player-${label()}`, email: `never+${label()}@example.com`, phone: '+12025550105' },
        deadlineInSeconds: 2,
      }),
    );
    const view = await stack.waitForState(id, ['sms_sent']);
    const forged = { MessageSid: view.sms.providerMessageId as string, MessageStatus: 'delivered', AccountSid: `AC${'0'.repeat(32)}` };
    const callback = twilioCallback(SANDBOX_TWILIO_TOKEN, id, forged);
    expect((await post(stack.web.url, callback.path, callback.headers, callback.body)).status).toBe(404);

    // A TWILIO_AUTH_TOKEN left set from an earlier Twilio set-up opens nothing either.
    const leftover = 'token-left-from-an-earlier-setup';
    const other = await new WebProcess({ ...stack.env, TWILIO_AUTH_TOKEN: leftover }).start();
    try {
      const signed = twilioCallback(leftover, id, forged);
      expect((await post(other.url, signed.path, signed.headers, signed.body)).status).toBe(404);
    } finally {
      await other.stop('SIGTERM');
    }
    expect((await stack.view(id)).state).toBe('sms_sent');
    expect(ofType(await stack.events(id), 'sms.observed').some((e) => e.source === 'webhook')).toBe(false);
  });
});

describe("an event changes a notice only when its provider made the channel's attempt", () => {
  it('a SendGrid delivery naming a message Postmark sent changes nothing, and is counted', async () => {
    const email = `never+${label()}@example.com`;
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: `player-${label()}`, email, phone: '+12025550100' }, deadlineInSeconds: 60 }),
    );
    await waitFor(async () => ofType(await stack.events(id), 'email.accepted').length > 0, 10_000, 'the send');
    const messageId = (await stack.view(id)).email.providerMessageId as string;
    // The same deployment after its email provider changed to SendGrid, with the SendGrid webhook on.
    const sendgrid = await new WebProcess({ ...stack.env, HERALD_EMAIL_PROVIDER: 'sendgrid' }).start();
    try {
      const body = JSON.stringify([
        {
          email,
          timestamp: Math.floor(Date.now() / 1000),
          event: 'delivered',
          sg_event_id: `ev-${label()}`,
          sg_message_id: `${messageId}.filter0001`,
          herald_key: `${id}-email`,
        },
      ]);
      const timestamp = String(Math.floor(Date.now() / 1000));
      const answer = await post(
        sendgrid.url,
        '/webhooks/sendgrid',
        {
          'content-type': 'application/json',
          'x-twilio-email-event-webhook-timestamp': timestamp,
          'x-twilio-email-event-webhook-signature': signSendgridWebhook(stack.sendgridKeys.privateKey, timestamp, body),
        },
        body,
      );
      expect(answer.status).toBe(200);
      const metrics = (await sendgrid.call('GET', '/metrics')).text;
      expect(metrics).toMatch(/^herald_webhook_events_ignored_total\{provider="sendgrid",outcome="other_provider"\} [1-9]/m);
    } finally {
      await sendgrid.stop('SIGTERM');
    }
    expect((await stack.view(id)).state).toBe('email_sent');
    expect(ofType(await stack.events(id), 'email.observed').some((e) => e.source === 'webhook')).toBe(false);
  });
});

describe('a completed notice records a bounded number of late webhook observations', () => {
  it('50 opens after the delivery add at most 5 entries to its trail; the rest are counted', async () => {
    const email = `delivered+1s+${label()}@example.com`;
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: `player-${label()}`, email, phone: '+12025550100' }, deadlineInSeconds: 60 }),
    );
    await stack.waitForState(id, ['email_delivered']);
    const before = (await stack.events(id)).length;
    const messageId = (await stack.view(id)).email.providerMessageId as string;
    const authorization = `Basic ${Buffer.from(POSTMARK_AUTH).toString('base64')}`;
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        post(
          stack.web.url,
          '/webhooks/postmark',
          { 'content-type': 'application/json', authorization },
          JSON.stringify({
            RecordType: 'Open',
            MessageID: messageId,
            Recipient: email,
            ReceivedAt: new Date(Date.now() + i * 1000).toISOString(),
            Metadata: { herald_key: `${id}-email` },
          }),
        ),
      ),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const events = await stack.events(id);
    expect(events.length - before).toBeLessThanOrEqual(5);
    const late = ofType(events, 'email.observed').filter((e) => e.source === 'webhook');
    expect(late.length).toBe(5);
    expect(ofType(events, 'notice.completed')).toHaveLength(1);
    const metrics = (await stack.web.call('GET', '/metrics')).text;
    // The rest were counted: over the limit, or (any that lost every race for the notice) not stored.
    const counted = (outcome: string) =>
      Number(
        new RegExp(`^herald_webhook_events_ignored_total\\{provider="postmark",outcome="${outcome}"\\} (\\d+)$`, 'm').exec(metrics)?.[1] ??
          0,
      );
    expect(counted('over_limit')).toBeGreaterThan(0);
    expect(counted('over_limit') + counted('not_applicable')).toBe(45);
  });
});

describe('webhook routes bound what a request costs before it is verified', () => {
  let web: WebProcess;
  beforeAll(async () => {
    // Twilio's route on (Twilio is the SMS provider here), with the failure limit as in production.
    web = await new WebProcess(
      testEnv(testPrefix('whlimits'), {
        HERALD_PUBLIC_URL: PUBLIC_URL,
        TWILIO_AUTH_TOKEN: 'twilio-token-of-the-limits-test',
        HERALD_POSTMARK_WEBHOOK_AUTH: POSTMARK_AUTH,
        HERALD_AUTH_FAILURES_PER_MINUTE: '20',
        // Each test below comes from an address of its own, so one test's failures do not limit another.
        HERALD_TRUST_PROXY: '127.0.0.1',
      }),
    ).start();
  });
  afterAll(async () => {
    await web?.stop('SIGTERM');
  });

  it('answers 413 to a 1 MB form at /webhooks/twilio, and /healthz answers meanwhile', async () => {
    const big = Buffer.from(`MessageSid=SM1&MessageStatus=delivered&Body=${'x'.repeat(1024 * 1024)}`);
    const form = { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': 'AAAA' };
    const [a, b, c, health] = await Promise.all([
      post(web.url, '/webhooks/twilio?notice=ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab', form, big),
      post(web.url, '/webhooks/twilio?notice=ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab', form, big),
      post(web.url, '/webhooks/twilio?notice=ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab', form, big),
      fetch(`${web.url}/healthz`).then((r) => r.status),
    ]);
    for (const answer of [a, b, c]) {
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.text)).toMatchObject({ error: { code: 'payload_too_large' } });
    }
    expect(health).toBe(200);
    // Just over Twilio's 64 KiB is refused too; the other routes take up to 256 KiB.
    expect((await post(web.url, '/webhooks/twilio', form, Buffer.alloc(64 * 1024 + 1, 0x61))).status).toBe(413);
    const json = { 'content-type': 'application/json', authorization: `Basic ${Buffer.from(POSTMARK_AUTH).toString('base64')}` };
    expect((await post(web.url, '/webhooks/postmark', json, `{"x":"${'y'.repeat(256 * 1024)}"}`)).status).toBe(413);
  });

  it('refuses a form with more fields than Twilio sends before checking its signature', async () => {
    const fields = Array.from({ length: 500 }, (_, i) => `F${i}=v`).join('&');
    const answer = await post(
      web.url,
      '/webhooks/twilio?notice=ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab',
      { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': 'AAAA' },
      `MessageSid=SM1&MessageStatus=delivered&${fields}`,
    );
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text)).toMatchObject({ error: { code: 'validation_failed' } });
  });

  it("refuses an unknown signature algorithm without the SDK's console warning", async () => {
    const callback = twilioCallback('twilio-token-of-the-limits-test', 'ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab', {
      MessageSid: 'SMy',
      MessageStatus: 'sent',
    });
    const before = web.output.length;
    const answer = await post(
      web.url,
      callback.path,
      {
        ...callback.headers,
        'x-forwarded-for': '203.0.113.8',
        'x-twilio-webhooks-signature-settings': 'algorithm=HMAC_MD5-from-the-caller',
      },
      callback.body,
    );
    expect(answer.status).toBe(401);
    await waitFor(async () => web.output.slice(before).includes('unknown signature algorithm'), 10_000, 'the refusal in the log');
    const written = web.output.slice(before);
    expect(written).not.toContain('[Twilio]: Unsupported');
    expect(written).toMatch(/"msg":"webhook refused: an unknown signature algorithm"/);
  });

  it('counts webhooks that do not verify in the failure limit: past it, 429', async () => {
    const limited = { 'x-forwarded-for': '203.0.113.7' };
    const answers: number[] = [];
    for (let i = 0; i < 22; i += 1) {
      const callback = twilioCallback('not-the-token', 'ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab', {
        MessageSid: `SM${i}`,
        MessageStatus: 'delivered',
      });
      answers.push((await post(web.url, callback.path, { ...callback.headers, ...limited }, callback.body)).status);
    }
    expect(answers.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(answers.slice(20)).toEqual([429, 429]);
    // A callback signed with the right token is still taken from the same address.
    const signed = twilioCallback('twilio-token-of-the-limits-test', 'ntc_0a01jd4yq3k2m5n6p7r8s9t0v1ab', {
      MessageSid: 'SMx',
      MessageStatus: 'delivered',
    });
    expect((await post(web.url, signed.path, { ...signed.headers, ...limited }, signed.body)).status).toBe(200);
  });
});
