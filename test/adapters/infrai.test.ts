import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createInfraiEmailProvider,
  createInfraiSmsProvider,
  infraiEmailObservation,
  infraiEmailState,
  infraiSmsObservation,
  infraiSmsState,
} from '../../src/providers/infrai.js';
import type { EmailMessage } from '../../src/providers/types.js';
import { NO_CREDIT_KEY, startSandbox, type Sandbox } from '@herald/sandbox';
import { failure, sleep, unique } from '../helpers/providers.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox({ indexLagMs: 150, slowMs: 400 });
});
afterAll(() => sandbox.close());
beforeEach(() => sandbox.reset());

const options = (extra: Partial<{ apiKey: string; timeoutMs: number }> = {}) => ({
  apiKey: 'sandbox-infrai-key',
  from: 'herald@sandbox.example',
  apiUrl: sandbox.url,
  timeoutMs: 800,
  ...extra,
});
const email = (extra: Partial<{ apiKey: string; timeoutMs: number }> = {}) => createInfraiEmailProvider(options(extra));
const sms = (extra: Partial<{ apiKey: string; timeoutMs: number }> = {}) => createInfraiSmsProvider(options(extra));

const message = (to: string, key = `ntc_${unique()}-email`): EmailMessage => ({
  to,
  subject: 'Terms update',
  text: 'The terms change on Friday.',
  idempotencyKey: key,
});

describe('Infrai email adapter against the emulator', () => {
  it('sends with the key in the header and the body, and reads delivery from the event list', async () => {
    // Its own sandbox, whose event list lags long enough to see the record answer first on a loaded machine.
    const lagging = await startSandbox({ indexLagMs: 1500 });
    try {
      const provider = createInfraiEmailProvider({ ...options(), apiUrl: lagging.url });
      const sent = await provider.send(message(`delivered+200ms+${unique()}@example.com`, 'k-delivered'));
      expect(sent.providerMessageId).toMatch(/^eml_/);
      const [stored] = lagging.emails();
      expect(stored).toMatchObject({
        messageId: sent.providerMessageId,
        metadata: { idempotency_key: 'k-delivered' },
        from: 'herald@sandbox.example',
      });
      // Before the events are listed the record's state answers: delivered already, by the record.
      await sleep(400);
      expect(await provider.status(sent.providerMessageId)).toMatchObject({ status: 'delivered', providerStatus: 'state:delivered' });
      await sleep(1200);
      expect(await provider.status(sent.providerMessageId)).toMatchObject({
        status: 'delivered',
        providerStatus: 'queued+sent+delivered',
        engagement: [],
      });
      const operations = lagging.requests().map((r) => r.operation);
      expect(operations).toEqual(['infrai.email.send', 'infrai.email.events', 'infrai.email.get', 'infrai.email.events']);
    } finally {
      await lagging.close();
    }
  });

  it('resolves a send in doubt by replaying it: the original email, no second one', async () => {
    const provider = email();
    const to = `delivered+1s+${unique()}@example.com`;
    sandbox.injectFault({ operation: 'infrai.email.send', mode: 'accept_then_hang', match: to });
    const doubt = await failure(provider.send(message(to, 'k-doubt')));
    expect(doubt.kind).toBe('timeout');
    expect(sandbox.emails()).toHaveLength(1);
    const found = await provider.findByIdempotencyKey('k-doubt', to, undefined, message(to, 'k-doubt'));
    expect(found?.providerMessageId).toBe(sandbox.emails()[0]!.messageId);
    expect(sandbox.emails()).toHaveLength(1);
  });

  it('carries out a send in doubt that never arrived, once', async () => {
    const provider = email();
    const to = `delivered+${unique()}@example.com`;
    sandbox.injectFault({ operation: 'infrai.email.send', mode: 'hang', match: to });
    expect((await failure(provider.send(message(to, 'k-lost')))).kind).toBe('timeout');
    expect(sandbox.emails()).toHaveLength(0);
    const found = await provider.findByIdempotencyKey('k-lost', to, undefined, message(to, 'k-lost'));
    const again = await provider.findByIdempotencyKey('k-lost', to, undefined, message(to, 'k-lost'));
    expect(again?.providerMessageId).toBe(found?.providerMessageId);
    expect(sandbox.emails()).toHaveLength(1);
  });

  it('cannot find without the message: it throws instead of answering not found', async () => {
    const error = await failure(email().findByIdempotencyKey('k', 'a@example.com'));
    expect(error.kind).toBe('server_error');
    expect(sandbox.requests()).toHaveLength(0);
  });

  it('maps a hard bounce to bounced and suppressed, a soft one to deferred', async () => {
    const provider = email();
    const hard = await provider.send(message(`bounce+0ms+${unique()}@example.com`));
    const soft = await provider.send(message(`softbounce+0ms+${unique()}@example.com`));
    await sleep(250);
    expect(await provider.status(hard.providerMessageId)).toMatchObject({
      status: 'bounced',
      suppressed: true,
      bounceType: 'hard',
      providerStatus: 'queued+sent+bounced(hard)',
    });
    expect(await provider.status(soft.providerMessageId)).toMatchObject({ status: 'deferred', bounceType: 'soft' });
  });

  it('never counts opens and clicks as delivery', async () => {
    const provider = email();
    const sent = await provider.send(message(`opened+0ms+${unique()}@example.com`));
    await sleep(250);
    const observed = await provider.status(sent.providerMessageId);
    expect(observed.status).toBe('pending');
    expect(observed.engagement).toEqual(['opened', 'clicked']);
  });

  it('classifies refusals: suppressed recipient, invalid recipient, 401, 402, 429 with Retry-After, 500, timeout', async () => {
    const provider = email();
    const suppressed = await failure(provider.send(message(`inactive+${unique()}@example.com`)));
    expect(suppressed).toMatchObject({ kind: 'rejected', suppressed: true, httpStatus: 422 });
    expect(suppressed.message).toContain('RECIPIENT_SUPPRESSED');
    expect(await failure(provider.send(message(`rejected+${unique()}@example.com`)))).toMatchObject({
      kind: 'rejected',
      suppressed: false,
    });
    expect(await failure(email({ apiKey: 'bad-token' }).send(message('a@example.com')))).toMatchObject({
      kind: 'server_error',
      httpStatus: 401,
    });
    const credit = await failure(email({ apiKey: NO_CREDIT_KEY }).send(message('a@example.com')));
    expect(credit).toMatchObject({ kind: 'server_error', httpStatus: 402, retryable: true });
    expect(credit.message).toContain('INSUFFICIENT_CREDIT');
    sandbox.injectFault({ operation: 'infrai.email.send', mode: 'status_429', retryAfterSeconds: 3 });
    expect(await failure(provider.send(message('a@example.com')))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 3000 });
    sandbox.injectFault({ operation: 'infrai.email.send', mode: 'status_500' });
    expect(await failure(provider.send(message('a@example.com')))).toMatchObject({ kind: 'server_error', httpStatus: 500 });
    const to = `hang-status+${unique()}@example.com`;
    const sent = await provider.send(message(to));
    await sleep(200);
    expect(await failure(provider.status(sent.providerMessageId))).toMatchObject({ kind: 'timeout' });
    expect(sandbox.emails()).toHaveLength(1);
  });

  it('reports a deferral, then the delivery that follows it', async () => {
    const provider = email();
    const sent = await provider.send(message(`deferred-delivered+200ms+${unique()}@example.com`));
    await sleep(300);
    expect(await provider.status(sent.providerMessageId)).toMatchObject({ status: 'deferred', providerStatus: 'queued+sent+deferred' });
    await sleep(200);
    expect(await provider.status(sent.providerMessageId)).toMatchObject({
      status: 'delivered',
      providerStatus: 'queued+sent+deferred+delivered',
    });
  });

  it('takes faults injected by channel role, with or without Retry-After', async () => {
    const provider = email();
    sandbox.injectFault({ operation: 'email.send', mode: 'status_429', omitRetryAfter: true });
    const bare = await failure(provider.send(message('a@example.com')));
    expect(bare).toMatchObject({ kind: 'rate_limited', retryAfterMs: undefined });
    sandbox.injectFault({ operation: 'sms.send', mode: 'status_503' });
    expect(await failure(sms().send({ to: '+12025550100', body: 'x' }))).toMatchObject({ kind: 'server_error', httpStatus: 503 });
    expect(sandbox.faults()).toEqual([]);
  });

  it('sends a flaky address once: a 500, a 429, then accepted', async () => {
    const provider = email();
    const to = `flaky+${unique()}@example.com`;
    expect((await failure(provider.send(message(to)))).kind).toBe('server_error');
    expect((await failure(provider.send(message(to)))).kind).toBe('rate_limited');
    await provider.send(message(to));
    expect(sandbox.emails()).toHaveLength(1);
  });

  it('verifies the key with a read that sends nothing', async () => {
    expect(await email().verify()).toContain('API key accepted');
    expect((await failure(email({ apiKey: 'bad-token' }).verify())).httpStatus).toBe(401);
    expect(sandbox.emails()).toHaveLength(0);
  });
});

describe('Infrai SMS adapter against the emulator', () => {
  const phone = (suffix: string) => `+1${200 + (Number(unique().split('x')[1]) % 700)}55501${suffix}`;

  it('sends with Herald key and follows the state to delivered', async () => {
    const provider = sms();
    const to = phone('00');
    const sent = await provider.send({ to, body: 'Terms change Monday.', idempotencyKey: 'ntc_1-sms' });
    expect(sent).toMatchObject({ providerMessageId: expect.stringMatching(/^sms_/), providerStatus: 'queued' });
    expect(await provider.status(sent.providerMessageId)).toMatchObject({ status: 'pending', providerStatus: 'queued' });
    await sleep(1100);
    expect(await provider.status(sent.providerMessageId)).toMatchObject({ status: 'delivered', providerStatus: 'delivered' });
    expect(sandbox.sms()).toHaveLength(1);
  });

  it('maps undelivered and failed to failed', async () => {
    const provider = sms();
    const undelivered = await provider.send({ to: phone('01'), body: 'x', idempotencyKey: `k${unique()}` });
    const failed = await provider.send({ to: phone('02'), body: 'x', idempotencyKey: `k${unique()}` });
    await sleep(1100);
    expect(await provider.status(undelivered.providerMessageId)).toMatchObject({ status: 'failed', providerStatus: 'undelivered' });
    expect(await provider.status(failed.providerMessageId)).toMatchObject({ status: 'failed', providerStatus: 'failed' });
  });

  it('refuses an opted-out number as suppressed', async () => {
    const error = await failure(sms().send({ to: phone('03'), body: 'x', idempotencyKey: 'k-stop' }));
    expect(error).toMatchObject({ kind: 'rejected', suppressed: true });
    expect(sandbox.sms()).toHaveLength(0);
  });

  it('resolves an SMS in doubt by replaying it under its key: one SMS', async () => {
    const provider = sms();
    const to = phone('00');
    sandbox.injectFault({ operation: 'infrai.sms.send', mode: 'accept_then_drop', match: to });
    const doubt = await failure(provider.send({ to, body: 'Terms change Monday.', idempotencyKey: 'k-sms-doubt' }));
    expect(doubt.kind).toBe('server_error');
    const found = await provider.findSince(to, Date.now() - 5000, 'Terms change Monday.', {
      to,
      body: 'Terms change Monday.',
      idempotencyKey: 'k-sms-doubt',
    });
    expect(found.map((f) => f.providerMessageId)).toEqual([sandbox.sms()[0]!.sid]);
    expect(sandbox.sms()).toHaveLength(1);
    // Without the key there is nothing to replay and no listing to search.
    expect((await failure(provider.findSince(to, 0, 'Terms change Monday.'))).kind).toBe('server_error');
  });

  it('has no cancel', async () => {
    expect((await failure(sms().cancel('sms_x'))).kind).toBe('rejected');
  });
});

describe('Infrai emulator wire shapes', () => {
  it('answers canonical JSON in the envelope, errors included, and Infrai bodies on unknown paths', async () => {
    const sent = await fetch(`${sandbox.url}/v1/email/send`, {
      method: 'POST',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json', 'idempotency-key': 'a' },
      body: JSON.stringify({ to: 'delivered@example.com', subject: 's', text: 't', idempotency_key: 'b' }),
    });
    expect(sent.status).toBe(400);
    const text = await sent.text();
    expect(text.endsWith('}\n')).toBe(true);
    expect(text).not.toContain(' "');
    const body = JSON.parse(text);
    expect(Object.keys(body)).toEqual(['data', 'error', 'metadata', 'ok']);
    expect(body).toMatchObject({ ok: false, data: null, error: { code: 'INVALID_REQUEST' } });
    expect(body.metadata.request_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const missing = await fetch(`${sandbox.url}/v1/email/nothing`, { headers: { authorization: 'Bearer k' } });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
    const unreadable = await fetch(`${sandbox.url}/v1/sms/send`, {
      method: 'POST',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
      body: '{',
    });
    expect(unreadable.status).toBe(400);
    expect(await unreadable.json()).toMatchObject({ ok: false, error: { code: 'INVALID_REQUEST' } });
  });

  it('answers a replay with the original record and says so; a key reused for another recipient is a conflict', async () => {
    const post = (to: string) =>
      fetch(`${sandbox.url}/v1/email/send`, {
        method: 'POST',
        headers: { authorization: 'Bearer k', 'content-type': 'application/json', 'idempotency-key': 'same' },
        body: JSON.stringify({ to, subject: 's', text: 't' }),
      });
    const first = await post('delivered@example.com');
    const second = await post('delivered@example.com');
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    const [again, original] = (await Promise.all([second.json(), first.json()])) as Array<{ data: { email_id: string } }>;
    expect(again!.data.email_id).toBe(original!.data.email_id);
    expect((await post('other@example.com')).status).toBe(409);
    expect(sandbox.emails()).toHaveLength(1);
  });
});

describe('Infrai status mapping (words unconfirmed: docs/PROVIDERS.md)', () => {
  const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
  it('takes the latest decisive event, in time order', () => {
    expect(
      infraiEmailObservation([
        { type: 'opened', occurred_at: at(3) },
        { type: 'delivered', occurred_at: at(2) },
        { type: 'sent', occurred_at: at(1) },
      ]),
    ).toMatchObject({ status: 'delivered', engagement: ['opened'], providerStatus: 'sent+delivered+opened' });
    expect(infraiEmailObservation([{ type: 'deferred' }, { type: 'delivered' }]).status).toBe('delivered');
    expect(infraiEmailObservation([{ type: 'delivered' }, { type: 'bounced', bounce_type: 'soft' }]).status).toBe('delivered');
    expect(infraiEmailObservation([{ type: 'suppressed' }])).toMatchObject({ status: 'failed', suppressed: true });
    expect(infraiEmailObservation([{ type: 'delivered' }, { type: 'complained' }])).toMatchObject({
      status: 'delivered',
      suppressed: true,
    });
    expect(infraiEmailObservation([{ type: 'teleported' }])).toMatchObject({ status: 'unknown', providerStatus: 'teleported' });
    expect(infraiEmailObservation([{ type: 'bounced' }])).toMatchObject({ status: 'deferred', bounceType: 'unknown' });
  });

  it('maps record states and SMS states', () => {
    expect(['queued', 'sent', 'delivered', 'deferred', 'bounced', 'failed', 'x'].map(infraiEmailState)).toEqual([
      'pending',
      'pending',
      'delivered',
      'deferred',
      'bounced',
      'failed',
      'unknown',
    ]);
    expect(['queued', 'sending', 'sent', 'delivered', 'undelivered', 'failed', 'canceled', 'x'].map(infraiSmsState)).toEqual([
      'pending',
      'pending',
      'pending',
      'delivered',
      'failed',
      'failed',
      'failed',
      'unknown',
    ]);
    expect(infraiSmsObservation({ state: 'failed', error_code: 'RECIPIENT_OPTED_OUT' })).toMatchObject({
      status: 'failed',
      suppressed: true,
    });
  });
});
