/**
 * Every provider adapter keeps its connections open between calls (its own keep-alive agents,
 * src/providers/transport.ts), closes them when told, and a connection the server closes does not
 * turn a send into a refusal or a second message. The adapters talk to the sandbox through a TCP
 * relay that counts the connections it is given.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAwsSmsProvider } from '../../src/providers/aws-sms.js';
import { createInfraiEmailProvider, createInfraiSmsProvider } from '../../src/providers/infrai.js';
import { createMailgunProvider } from '../../src/providers/mailgun.js';
import { createPostmarkProvider } from '../../src/providers/postmark.js';
import { createSendgridProvider } from '../../src/providers/sendgrid.js';
import { createSesProvider } from '../../src/providers/ses.js';
import { createTwilioProvider } from '../../src/providers/twilio.js';
import type { EmailProvider, SmsProvider } from '../../src/providers/types.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { ACCOUNT_SID, AUTH_TOKEN, failure, sleep, unique } from '../helpers/providers.js';
import { Relay } from '../helpers/relay.js';

let sandbox: Sandbox;
const relays: Relay[] = [];
const relay = async () => {
  const started = await new Relay(sandbox.port).start();
  relays.push(started);
  return started;
};

beforeAll(async () => {
  sandbox = await startSandbox({ indexLagMs: 0 });
});
afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop()));
});
afterAll(() => sandbox.close());

const aws = (url: string) => ({
  region: 'us-east-1',
  credentials: { accessKeyId: 'AKIASANDBOX', secretAccessKey: 'sandbox-secret' },
  endpoint: url,
  timeoutMs: 2000,
});

const emailAdapters: Record<string, (url: string) => EmailProvider> = {
  postmark: (apiUrl) =>
    createPostmarkProvider({
      serverToken: 'sandbox-server-token',
      from: 'herald@sandbox.example',
      messageStream: 'outbound',
      apiUrl,
      timeoutMs: 2000,
    }),
  sendgrid: (apiUrl) =>
    createSendgridProvider({ apiKey: 'SG.sandbox-api-key', from: 'herald@sandbox.example', apiUrl, timeoutMs: 2000, logsLagMs: 1000 }),
  mailgun: (apiUrl) =>
    createMailgunProvider({
      apiKey: 'sandbox-mailgun-key',
      domain: 'mg.sandbox.example',
      from: 'herald@mg.sandbox.example',
      apiUrl,
      timeoutMs: 2000,
    }),
  ses: (url) =>
    createSesProvider({ ...aws(url), from: 'herald@sandbox.example', configurationSet: 'herald', feed: undefined, feedAbsenceMs: 120_000 }),
  infrai: (apiUrl) => createInfraiEmailProvider({ apiKey: 'sandbox-infrai-key', from: 'herald@sandbox.example', apiUrl, timeoutMs: 2000 }),
};

const smsAdapters: Record<string, (url: string) => SmsProvider> = {
  twilio: (apiUrl) =>
    createTwilioProvider({ accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN, from: '+15005550006', apiUrl, timeoutMs: 2000 }),
  'aws-sms': (url) =>
    createAwsSmsProvider({ ...aws(url), originationIdentity: '+15005550006', configurationSet: 'herald', feed: undefined }),
  infrai: (apiUrl) => createInfraiSmsProvider({ apiKey: 'sandbox-infrai-key', from: 'herald@sandbox.example', apiUrl, timeoutMs: 2000 }),
};

const email = (to = `delivered+${unique()}@example.com`) => ({
  to,
  subject: 'Terms update',
  text: 'The terms change on Friday.',
  idempotencyKey: `ntc_${unique()}-email`,
});
const sms = () => ({ to: '+12025550100', body: `Terms change Monday ${unique()}`, idempotencyKey: `ntc_${unique()}-sms` });

/** Lets the client see a close from the relay's side before it picks a socket again. */
const settle = () => sleep(50);

/** A provider's case for the tables below: its name, its adapter, what the sandbox holds of its channel, and one send. */
function sendCase(name: string) {
  const isEmail = name in emailAdapters;
  return [
    name,
    () => (isEmail ? emailAdapters[name]! : smsAdapters[name]!) as (url: string) => EmailProvider | SmsProvider,
    () => (isEmail ? sandbox.emails().length : sandbox.sms().length),
    (a: EmailProvider | SmsProvider) => (isEmail ? (a as EmailProvider).send(email()) : (a as SmsProvider).send(sms())),
  ] as const;
}

describe('provider connections', () => {
  describe.each(Object.entries(emailAdapters))('the %s email adapter', (_name, make) => {
    it('sends one call after another over one connection, and closes it on close()', async () => {
      const through = await relay();
      const adapter = make(through.url);
      for (let i = 0; i < 4; i += 1) await adapter.send(email());
      expect(through.connections).toBe(1);
      expect(through.open).toBe(1);
      adapter.close?.();
      await settle();
      expect(through.open).toBe(0);
    });
  });

  describe.each(Object.entries(smsAdapters))('the %s SMS adapter', (_name, make) => {
    it('sends one call after another over one connection, and closes it on close()', async () => {
      const through = await relay();
      const adapter = make(through.url);
      for (let i = 0; i < 4; i += 1) await adapter.send(sms());
      expect(through.connections).toBe(1);
      adapter.close?.();
      await settle();
      expect(through.open).toBe(0);
    });
  });

  describe('when the server closes an idle connection', () => {
    it.each([sendCase('postmark'), sendCase('twilio')])(
      '%s: the next send opens a new connection and is made once',
      async (_name, adapterOf, sent, send) => {
        const through = await relay();
        const adapter = adapterOf()(through.url);
        const before = sent();
        await send(adapter);
        through.closeAll();
        await settle();
        await send(adapter);
        expect(through.connections).toBe(2);
        expect(sent() - before).toBe(2);
        adapter.close?.();
      },
    );
  });

  describe('when a kept connection is cut as a send is written on it', () => {
    it.each([sendCase('postmark'), sendCase('twilio'), sendCase('aws-sms'), sendCase('sendgrid')])(
      '%s: the send fails as a transport error (left in doubt, never a refusal) and nothing is resent',
      async (_name, adapterOf, sent, send) => {
        const through = await relay();
        const adapter = adapterOf()(through.url);
        const before = sent();
        await send(adapter);
        through.cutReusedConnections = true;
        const error = await failure(send(adapter));
        // A transport error: `server_error`, or `timeout` where the SDK names a reset so (the AWS SDK); both leave a send in doubt.
        expect(['server_error', 'timeout']).toContain(error.kind);
        expect(error.message).toMatch(/ECONNRESET|socket hang up/);
        expect(error.httpStatus).toBeUndefined();
        await settle();
        // The adapter does not retry on its own: one connection was used, and the sandbox holds the first message only.
        expect(through.connections).toBe(1);
        expect(sent() - before).toBe(1);
        adapter.close?.();
      },
    );
  });
});
