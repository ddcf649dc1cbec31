import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { postmark, sleep, twilioApi } from '../helpers/sandbox.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox();
});
afterAll(() => sandbox.close());
beforeEach(() => sandbox.reset());

const email = (to: string) => ({ From: 'herald@sandbox.example', To: to, Subject: 's', TextBody: 't' });
const control = async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${sandbox.url}/__sandbox${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? null : JSON.parse(text) };
};

describe('sandbox controls over HTTP (/__sandbox/)', () => {
  it('injects a fault that applies `count` times, then lets requests through', async () => {
    const created = await control('POST', '/faults', { operation: 'postmark.send', mode: 'status_503', count: 2 });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: expect.any(String), operation: 'postmark.send', mode: 'status_503', remaining: 2 });
    expect((await control('GET', '/faults')).body).toHaveLength(1);

    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await postmark(sandbox.url, 'POST', '/email', email('a@example.com'))).status);
    expect(statuses).toEqual([503, 503, 200]);
    expect((await control('GET', '/faults')).body).toEqual([]);
    const requests = (await control('GET', '/requests?operation=postmark.send')).body;
    expect(requests.map((r: any) => [r.status, r.fault ?? null])).toEqual([
      [503, 'status_503'],
      [503, 'status_503'],
      [200, null],
    ]);
  });

  it('applies a fault with `match` only to recipients containing it', async () => {
    await control('POST', '/faults', { operation: 'twilio.create', mode: 'status_429', retryAfterSeconds: 7, match: '5550105' });
    const other = await twilioApi(sandbox.url, 'POST', '/Messages.json', { To: '+12025550100', From: '+15005550006', Body: 'x' });
    expect(other.status).toBe(201);
    const matched = await twilioApi(sandbox.url, 'POST', '/Messages.json', { To: '+12025550105', From: '+15005550006', Body: 'x' });
    expect(matched).toMatchObject({ status: 429, body: { code: 20429 } });
    expect(matched.headers.get('retry-after')).toBe('7');
  });

  it('refuses malformed faults with 400 and clears faults with DELETE', async () => {
    expect((await control('POST', '/faults', { operation: 'postmark.nope', mode: 'hang' })).status).toBe(400);
    expect((await control('POST', '/faults', { operation: 'postmark.send', mode: 'explode' })).status).toBe(400);
    expect((await control('POST', '/faults', { operation: 'postmark.send', mode: 'hang', count: 0 })).status).toBe(400);
    await control('POST', '/faults', { operation: 'postmark.send', mode: 'hang' });
    expect((await control('DELETE', '/faults')).status).toBe(204);
    expect(sandbox.faults()).toEqual([]);
  });

  it('lists emails and SMS with filters, and forgets everything on reset', async () => {
    await postmark(sandbox.url, 'POST', '/email', email('alice@example.com'));
    await postmark(sandbox.url, 'POST', '/email', email('bob@example.com'));
    await twilioApi(sandbox.url, 'POST', '/Messages.json', { To: '+12025550100', From: '+15005550006', Body: 'x' });
    expect((await control('GET', '/emails?to=alice')).body.map((e: any) => e.to)).toEqual(['alice@example.com']);
    expect((await control('GET', '/sms')).body).toMatchObject([{ to: '+12025550100', body: 'x', status: 'queued' }]);
    expect((await control('POST', '/reset')).status).toBe(204);
    expect((await control('GET', '/emails')).body).toEqual([]);
    expect((await control('GET', '/requests')).body).toEqual([]);
  });
});

describe('faults that never answer', () => {
  it('`hang` keeps the request open and creates nothing', async () => {
    sandbox.injectFault({ operation: 'postmark.send', mode: 'hang' });
    const attempt = fetch(`${sandbox.url}/email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-postmark-server-token': 't' },
      body: JSON.stringify(email('hang@example.com')),
      signal: AbortSignal.timeout(300),
    });
    await expect(attempt).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(sandbox.emails()).toHaveLength(0);
    expect(sandbox.requests()).toMatchObject([{ operation: 'postmark.send', status: null, outcome: 'hang', fault: 'hang' }]);
  });

  it('`accept_then_drop` creates the message, then destroys the connection', async () => {
    sandbox.injectFault({ operation: 'twilio.create', mode: 'accept_then_drop' });
    await expect(
      twilioApi(sandbox.url, 'POST', '/Messages.json', { To: '+12025550100', From: '+15005550006', Body: 'dropped' }),
    ).rejects.toThrow();
    expect(sandbox.sms()).toMatchObject([{ to: '+12025550100', body: 'dropped' }]);
    expect(sandbox.requests()).toMatchObject([{ operation: 'twilio.create', outcome: 'dropped' }]);
  });

  it('`accept_then_hang` creates the message and never answers', async () => {
    sandbox.injectFault({ operation: 'postmark.send', mode: 'accept_then_hang' });
    const attempt = fetch(`${sandbox.url}/email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-postmark-server-token': 't' },
      body: JSON.stringify(email('p1@example.com')),
      signal: AbortSignal.timeout(300),
    });
    await expect(attempt).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(sandbox.emails()).toMatchObject([{ to: 'p1@example.com' }]);
  });
});

describe('lifecycle and bounds', () => {
  it('close() ends hanging requests, and a second close() returns the same promise', async () => {
    const own = await startSandbox();
    own.injectFault({ operation: 'postmark.send', mode: 'hang' });
    const hanging = fetch(`${own.url}/email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-postmark-server-token': 't' },
      body: JSON.stringify(email('a@example.com')),
    });
    await sleep(100);
    const started = Date.now();
    const first = own.close();
    expect(own.close()).toBe(first);
    await first;
    await expect(hanging).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('keeps at most maxMessages messages, dropping the oldest', async () => {
    const own = await startSandbox({ maxMessages: 3 });
    try {
      for (let i = 0; i < 5; i++) await postmark(own.url, 'POST', '/email', email(`n${i}@example.com`));
      expect(own.emails().map((e) => e.to)).toEqual(['n2@example.com', 'n3@example.com', 'n4@example.com']);
    } finally {
      await own.close();
    }
  });
});

describe('webhook controls over HTTP (/__sandbox/webhooks)', () => {
  let receiver: Server;
  let received: { path: string; headers: IncomingHttpHeaders; body: string }[];
  let receiverUrl: string;
  beforeAll(async () => {
    receiver = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        received.push({ path: request.url ?? '', headers: request.headers, body });
        response.writeHead(200).end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => receiver.close(() => resolve())));
  beforeEach(() => {
    received = [];
    sandbox.configureWebhooks(undefined);
    sandbox.setWebhookFaults({});
  });

  it('sets the target and the fault rates, shows them without the secrets, and stops with DELETE', async () => {
    expect((await control('GET', '/webhooks')).body).toEqual({ target: null, faults: {} });
    const put = await control('PUT', '/webhooks', { url: `${receiverUrl}/`, postmarkAuth: 'hooks:pw-1234', twilioAuthToken: 'tok' });
    expect(put).toEqual({
      status: 200,
      body: { target: { url: receiverUrl, publicUrl: receiverUrl, providers: ['postmark', 'twilio'] }, faults: {} },
    });
    expect(JSON.stringify(put.body)).not.toContain('pw-1234');
    expect(sandbox.webhookTarget()).toMatchObject({ url: receiverUrl, postmarkAuth: 'hooks:pw-1234' });

    const faults = await control('PUT', '/webhooks/faults', { drop: 0.5, duplicate: 0.2, reorder: 0.1, delayMs: 100 });
    expect(faults.body.faults).toEqual({ drop: 0.5, duplicate: 0.2, reorder: 0.1, delayMs: 100 });
    expect(sandbox.webhookFaults()).toEqual({ drop: 0.5, duplicate: 0.2, reorder: 0.1, delayMs: 100 });

    expect((await control('DELETE', '/webhooks')).status).toBe(204);
    expect((await control('GET', '/webhooks')).body.target).toBeNull();
  });

  it('refuses a malformed target or fault rates with 400 and changes nothing', async () => {
    await control('PUT', '/webhooks', { url: receiverUrl, postmarkAuth: 'hooks:pw' });
    await control('PUT', '/webhooks/faults', { drop: 0.25 });
    const refused = [
      await control('PUT', '/webhooks', { url: 'ftp://x' }),
      await control('PUT', '/webhooks', { postmarkAuth: 'a:b' }),
      await control('PUT', '/webhooks', { url: receiverUrl, postmarkAuth: '' }),
      await control('PUT', '/webhooks', { url: receiverUrl, apiKey: 'x' }),
      await control('PUT', '/webhooks', [receiverUrl]),
      await control('PUT', '/webhooks/faults', { drop: 1.5 }),
      await control('PUT', '/webhooks/faults', { drop: '0.5' }),
      await control('PUT', '/webhooks/faults', { explode: 0.1 }),
      await control('PUT', '/webhooks/faults', { delayMs: -1 }),
    ];
    for (const answer of refused) expect(answer).toMatchObject({ status: 400, body: { error: expect.any(String) } });
    expect(sandbox.webhookTarget()).toEqual({ url: receiverUrl, postmarkAuth: 'hooks:pw' });
    expect(sandbox.webhookFaults()).toEqual({ drop: 0.25 });
  });

  it("pushes a message's events to the target and lists each push, a dropped one too", async () => {
    await control('PUT', '/webhooks', { url: receiverUrl, postmarkAuth: 'hooks:pw-1234' });
    const kept = await postmark(sandbox.url, 'POST', '/email', email('delivered+100ms@example.com'));
    const dropped = await postmark(sandbox.url, 'POST', '/email', email('delivered+100ms+wh-drop@example.com'));
    const keptId = kept.body.MessageID as string;
    const droppedId = dropped.body.MessageID as string;
    const deliveries = async (messageId: string) =>
      (await control('GET', `/webhooks/deliveries?provider=postmark&messageId=${messageId}`)).body;
    for (let i = 0; i < 100 && ((await deliveries(keptId)).length === 0 || (await deliveries(droppedId)).length === 0); i += 1)
      await sleep(50);

    expect(await deliveries(keptId)).toEqual([
      expect.objectContaining({ provider: 'postmark', messageId: keptId, path: '/webhooks/postmark', status: 200, tries: 1, faults: [] }),
    ]);
    const droppedRecords = await deliveries(droppedId);
    expect(droppedRecords).toEqual([expect.objectContaining({ messageId: droppedId, tries: 0, faults: ['drop'] })]);
    expect(droppedRecords[0].status, 'a dropped webhook got no answer').toBeUndefined();
    const pushed = received.filter((r) => r.body.includes(keptId));
    expect(pushed).toHaveLength(1);
    expect(pushed[0]!.headers.authorization).toBe(`Basic ${Buffer.from('hooks:pw-1234').toString('base64')}`);
    expect(
      received.some((r) => r.body.includes(droppedId)),
      'a dropped webhook never reaches Herald',
    ).toBe(false);
  });
});
