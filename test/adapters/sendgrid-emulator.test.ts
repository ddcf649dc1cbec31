import sendgridClient from '@sendgrid/client';
import sendgridMail from '@sendgrid/mail';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { BAD_SENDGRID_KEY, parseQuery } from '@herald/sandbox/sendgrid-api';
import { sleep, type HttpAnswer } from '../helpers/sandbox.js';

let sandbox: Sandbox;
beforeAll(async () => {
  // A 1 s index lag: wide enough that "not listed yet" holds on a loaded machine.
  sandbox = await startSandbox({ indexLagMs: LAG_MS });
});
afterAll(() => sandbox.close());
beforeEach(() => sandbox.reset());

const KEY = 'SG.sandbox-api-key';
const LAG_MS = 1000;
/** Past the index lag. */
const pastTheLag = () => sleep(LAG_MS + 100);

/** A SendGrid API call with a bearer key, over plain HTTP. */
async function sendgrid(method: string, path: string, body?: unknown, key: string | null = KEY): Promise<HttpAnswer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (key !== null) headers['authorization'] = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(sandbox.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text === '' ? null : JSON.parse(text) };
}

const mail = (to: string, extra: Record<string, unknown> = {}) => ({
  personalizations: [{ to: [{ email: to }] }],
  from: { email: 'herald@sandbox.example' },
  subject: 'Terms update',
  content: [{ type: 'text/plain', value: 'The terms change on Friday.' }],
  ...extra,
});

const search = (query: string, limit = 100) => sendgrid('POST', '/v3/logs', { query, limit });

describe('SendGrid emulator', () => {
  describe('when the API key is missing or bad', () => {
    it('answers 401 in SendGrid error shape and records the request', async () => {
      const missing = await sendgrid('POST', '/v3/mail/send', mail('a@example.com'), null);
      expect(missing).toMatchObject({ status: 401, body: { errors: [{ message: 'authorization required', field: null }] } });
      const bad = await sendgrid('POST', '/v3/mail/send', mail('a@example.com'), BAD_SENDGRID_KEY);
      expect(bad.status).toBe(401);
      expect(sandbox.emails()).toHaveLength(0);
      expect(sandbox.requests().map((r) => [r.provider, r.operation, r.status])).toEqual([
        ['sendgrid', 'sendgrid.send', 401],
        ['sendgrid', 'sendgrid.send', 401],
      ]);
    });
  });

  describe('POST /v3/mail/send', () => {
    it('answers 202 with an empty body and X-Message-Id, and keeps the message with its custom_args', async () => {
      const sent = await sendgrid(
        'POST',
        '/v3/mail/send',
        mail('p42@example.com', { custom_args: { herald_key: 'k1' }, categories: ['herald'] }),
      );
      expect(sent.status).toBe(202);
      expect(sent.body).toBeNull();
      const xMessageId = sent.headers.get('x-message-id');
      expect(xMessageId).toMatch(/^[A-Za-z0-9_-]{22}$/);
      const [stored] = sandbox.emails();
      expect(stored).toMatchObject({
        to: 'p42@example.com',
        subject: 'Terms update',
        metadata: { herald_key: 'k1' },
        tag: 'herald',
        behaviour: 'delivered',
      });
      expect(stored?.messageId.startsWith(`${xMessageId}.`)).toBe(true);
    });

    it('refuses what SendGrid refuses with 400 and the field at fault', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ from: undefined }, 'from.email'],
        [{ personalizations: [{ to: [] }] }, 'personalizations.0.to'],
        [{ subject: '' }, 'subject'],
        [{ content: [] }, 'content'],
        [{ custom_args: { big: 'x'.repeat(10_001) } }, 'custom_args'],
        [{ custom_args: { n: 1 } }, 'custom_args'],
      ];
      for (const [extra, field] of cases) {
        const answer = await sendgrid('POST', '/v3/mail/send', mail('a@example.com', extra));
        expect(answer.status, field).toBe(400);
        expect(answer.body.errors[0]).toMatchObject({ field, message: expect.any(String), help: expect.any(String) });
      }
      const invalid = await sendgrid('POST', '/v3/mail/send', mail('not-an-address'));
      expect(invalid.body).toMatchObject({
        errors: [{ message: 'Does not contain a valid address.', field: 'personalizations.0.to.0.email' }],
      });
      expect(sandbox.emails()).toHaveLength(0);
    });

    it('answers bad JSON and unknown paths in SendGrid error shape', async () => {
      const response = await fetch(`${sandbox.url}/v3/mail/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: '{nope',
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ errors: [{ message: expect.stringMatching(/^Bad Request/) }] });
      const unknown = await sendgrid('GET', '/v3/nothing-here');
      expect(unknown).toMatchObject({ status: 404, body: { errors: [{ message: expect.stringMatching(/not found/), field: null }] } });
    });

    it('accepts a suppressed address and drops it, as SendGrid does', async () => {
      expect((await sendgrid('POST', '/v3/mail/send', mail('inactive@example.com'))).status).toBe(202);
      await pastTheLag();
      const listed = await search("to_email = 'inactive@example.com'");
      expect(listed.body.messages).toEqual([expect.objectContaining({ status: 'dropped', reason: 'Bounced Address' })]);
    });

    it('429 answers carry X-RateLimit-* headers, Reset in epoch seconds', async () => {
      sandbox.injectFault({ operation: 'sendgrid.send', mode: 'status_429', retryAfterSeconds: 5 });
      const answer = await sendgrid('POST', '/v3/mail/send', mail('a@example.com'));
      expect(answer).toMatchObject({ status: 429, body: { errors: [{ message: 'too many requests', field: null }] } });
      const reset = Number(answer.headers.get('x-ratelimit-reset'));
      expect(reset * 1000 - Date.now()).toBeGreaterThan(4000);
      expect(answer.headers.get('x-ratelimit-remaining')).toBe('0');
    });
  });

  describe('the Email Logs', () => {
    it('list nothing before the index lag, then the message, newest first', async () => {
      const since = new Date(Date.now() - 1000).toISOString();
      await sendgrid('POST', '/v3/mail/send', mail('log@example.com', { custom_args: { herald_key: 'a' } }));
      // The first message listed proves the lag has passed for it, not for the next one.
      await pastTheLag();
      await sendgrid('POST', '/v3/mail/send', mail('log@example.com', { custom_args: { herald_key: 'b' } }));
      await sendgrid('POST', '/v3/mail/send', mail('other@example.com'));
      const query = `to_email = 'log@example.com' AND sg_message_id_created_at >= TIMESTAMP "${since}"`;
      const early = (await search(query)).body.messages;
      const newestAt = sandbox.emails().filter((e) => e.to === 'log@example.com')[1]!.createdAt;
      // Unless the machine was too slow to ask within the lag, the newest is not listed yet.
      if (Date.now() < newestAt + LAG_MS) expect(early.map((m: { sg_message_id: string }) => m.sg_message_id)).toHaveLength(1);
      await pastTheLag();
      const listed = (await search(query)).body.messages;
      const [newest, oldest] = sandbox
        .emails()
        .filter((e) => e.to === 'log@example.com')
        .reverse();
      expect(listed.map((m: { sg_message_id: string }) => m.sg_message_id)).toEqual([newest?.messageId, oldest?.messageId]);
      expect(listed[0]).toEqual({
        from_email: 'herald@sandbox.example',
        sg_message_id: newest?.messageId,
        subject: 'Terms update',
        to_email: 'log@example.com',
        reason: null,
        status: 'processed',
        sg_message_id_created_at: new Date(newest!.createdAt).toISOString(),
      });
      expect(
        (await search(`to_email = 'log@example.com' AND sg_message_id_created_at > TIMESTAMP "2999-01-01T00:00:00Z"`)).body.messages,
      ).toEqual([]);
      expect((await search("to_email = 'log@example.com'", 1)).body.messages).toHaveLength(1);
    });

    it('show a message with its events and custom_args; the summary counts an open as delivered', async () => {
      await sendgrid('POST', '/v3/mail/send', mail('opened+100ms@example.com', { custom_args: { herald_key: 'k' } }));
      const [stored] = sandbox.emails();
      expect((await sendgrid('GET', `/v3/logs/${stored!.messageId}`)).body).toEqual({
        errors: [{ message: 'not found', field: 'sg_message_id', help: expect.any(String) }],
      });
      await pastTheLag();
      const shown = await sendgrid('GET', `/v3/logs/${stored!.messageId}`);
      expect(shown.status).toBe(200);
      expect(shown.body).toMatchObject({ sg_message_id: stored!.messageId, status: 'delivered', custom_args: { herald_key: 'k' } });
      expect(shown.body.events.map((e: { event: string }) => e.event)).toEqual(['processed', 'open', 'click']);
      expect(shown.body.events[1]).toMatchObject({
        sg_message_id: stored!.messageId,
        email: 'opened+100ms@example.com',
        timestamp: expect.any(Number),
      });
    });

    it('tell hard bounces (type bounce) from soft ones (type blocked)', async () => {
      await sendgrid('POST', '/v3/mail/send', mail('bounce+50ms@example.com'));
      await sendgrid('POST', '/v3/mail/send', mail('softbounce+50ms@example.com'));
      await pastTheLag();
      const [hard, soft] = sandbox.emails();
      const events = async (id: string) => (await sendgrid('GET', `/v3/logs/${id}`)).body;
      expect(await events(hard!.messageId)).toMatchObject({
        status: 'bounced',
        events: [{ event: 'processed' }, { event: 'bounce', type: 'bounce' }],
      });
      expect(await events(soft!.messageId)).toMatchObject({
        status: 'blocked',
        events: [{ event: 'processed' }, { event: 'bounce', type: 'blocked' }],
      });
    });

    it('refuse queries outside the documented fields and operators', async () => {
      for (const query of [
        "from_email = 'a@example.com'",
        "to_email IN ('a@example.com')",
        "status = 'delivered'",
        "to_email = 'a' OR subject = 'b'",
      ]) {
        const answer = await search(query);
        expect(answer.status, query).toBe(400);
        expect(answer.body.errors[0]).toMatchObject({ field: 'query', message: expect.stringMatching(/^invalid query/) });
      }
      expect((await sendgrid('POST', '/v3/logs', { query: '', limit: 1001 })).status).toBe(400);
      expect(parseQuery(`status IN ('delivered', "bounced") AND subject = "a 'b' AND c"`)).toEqual([
        { field: 'status', operator: 'IN', values: ['delivered', 'bounced'] },
        { field: 'subject', operator: '=', values: ["a 'b' AND c"] },
      ]);
    });
  });

  describe('through the real SDK', () => {
    it('the SDK sends the wire shape the emulator reads, and reaches the logs with its client', async () => {
      const { Client } = sendgridClient as unknown as { Client: new () => typeof sendgridClient };
      const { MailService } = sendgridMail as unknown as { MailService: new () => typeof sendgridMail };
      const client = new Client();
      client.setApiKey(KEY);
      client.setDefaultRequest('baseUrl', sandbox.url);
      const service = new MailService();
      service.setClient(client);
      const [response] = await service.send({
        to: 'sdk@example.com',
        from: 'herald@sandbox.example',
        subject: 'S',
        text: 'T',
        html: '<p>T</p>',
        customArgs: { herald_key: 'k-1' },
      });
      expect(response.statusCode).toBe(202);
      const [stored] = sandbox.emails();
      expect(stored).toMatchObject({ to: 'sdk@example.com', textBody: 'T', htmlBody: '<p>T</p>', metadata: { herald_key: 'k-1' } });
      expect(stored?.messageId.startsWith(`${response.headers['x-message-id']}.`)).toBe(true);
      await pastTheLag();
      const [, body] = await client.request({
        method: 'POST',
        url: '/v3/logs',
        body: { query: "to_email = 'sdk@example.com'", limit: 10 },
      });
      expect(body).toMatchObject({ messages: [{ sg_message_id: stored?.messageId }] });
    });
  });
});
