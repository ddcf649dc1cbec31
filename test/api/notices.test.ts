import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { masterNodes } from '../../src/store/redis.js';

const prefix = testPrefix('api');
const clock = new ManualClock(Date.parse('2026-11-29T14:00:00Z'));
let web: WebUnderTest;

beforeAll(async () => {
  web = await startWebUnderTest(testConfig(prefix, { HERALD_MIN_POLL_INTERVAL_MS: '30000', HERALD_BODY_LIMIT: '4096' }), clock);
});
afterAll(async () => {
  await web.close();
  await cleanUp(prefix);
});

/** Everything Herald stored or queued under the test prefix (on every master of a Cluster). */
async function storedKeys(): Promise<string[]> {
  return (await Promise.all(masterNodes(web.redis).map((node) => node.keys(`${prefix}:*`)))).flat();
}
async function queuedJobs(): Promise<number> {
  const counts = await Promise.all([web.queues.emailSend.count(), web.queues.deadline.count()]);
  return counts.reduce((a, b) => a + b, 0);
}

describe('POST /v1/notices', () => {
  it('accepts a notice: 202 with its ID, the deadline and the planned checks, and queues its job', async () => {
    const res = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({
        deadline: '2026-11-29T14:10:00Z',
        deadlineInSeconds: undefined,
        policy: { firstCheckAfterSeconds: 120, minCheckIntervalSeconds: 180 },
      }),
    );
    expect(res.statusCode).toBe(202);
    const body = res.json();
    expect(body).toMatchObject({ state: 'accepted', deadline: '2026-11-29T14:10:00.000Z' });
    expect(body.plannedChecks).toEqual(['2026-11-29T14:02:00.000Z', '2026-11-29T14:07:00.000Z', '2026-11-29T14:10:00.000Z']);
    // Its one job, the deadline job, carries nothing (its ID names the notice) and is due now, for
    // the email's send; it comes back for each check and the deadline.
    const job = await web.queues.deadline.getJob(`${body.id}-deadline`);
    expect(job?.opts.delay ?? 0).toBe(0);
    expect(job?.data).toEqual({});
    expect(await web.queues.emailSend.getJob(`${body.id}-email-send`)).toBeUndefined();

    const events = (await web.call('GET', `/v1/notices/${body.id}/events`)).json().events;
    expect(events[0]).toMatchObject({
      seq: 1,
      type: 'notice.accepted',
      policyVersion: 0,
      providerTimeoutMs: 1000,
      deadline: '2026-11-29T14:10:00.000Z',
    });
    expect(events[0].pollPlan).toEqual(body.plannedChecks);
    expect(events[0].contentSha256).toMatch(/^[0-9a-f]{64}$/);
    // The notice hash keeps neither its ID (the key's) nor the content's digest (the entry's).
    expect(await web.redis.hmget(web.store.keys.notice(body.id), 'id', 'contentSha256')).toEqual([null, null]);
    expect(events[1]).toMatchObject({ type: 'policy.checked', channel: 'email', outcome: 'allowed', policyVersion: 0 });
    expect(JSON.stringify(events)).not.toContain('The terms change on Monday');

    const view = (await web.call('GET', `/v1/notices/${body.id}`)).json();
    expect(view).toMatchObject({
      id: body.id,
      state: 'accepted',
      category: 'terms_change',
      recipientId: 'player-42',
      policyVersion: 0,
      fallback: null,
      sms: null,
    });
    expect(view.email).toEqual({ status: null, providerMessageId: null, lastObservedAt: null, nextCheckAt: null });
  });

  describe('with an Idempotency-Key', () => {
    it('returns the original notice for the same body, whatever its key order, with Idempotent-Replayed', async () => {
      const first = await web.call('POST', '/v1/notices', noticeBody(), { 'idempotency-key': 'order-1' });
      expect(first.statusCode).toBe(202);
      const reordered = Object.fromEntries(Object.entries(noticeBody()).reverse());
      const again = await web.call('POST', '/v1/notices', JSON.stringify(reordered, null, 2), { 'idempotency-key': 'order-1' });
      expect(again.statusCode).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.json().id).toBe(first.json().id);
      expect(again.json().state).toBe('accepted');
    });
    it('answers 409 idempotency_key_reused for a different body and creates nothing', async () => {
      await web.call('POST', '/v1/notices', noticeBody(), { 'idempotency-key': 'order-2' });
      const before = (await storedKeys()).length;
      const res = await web.call('POST', '/v1/notices', noticeBody({ category: 'other' }), { 'idempotency-key': 'order-2' });
      expect(res.statusCode).toBe(409);
      expect(res.json().error.code).toBe('idempotency_key_reused');
      expect((await storedKeys()).length).toBe(before);
    });
    it('still replays after the deadline of the original has passed', async () => {
      const first = await web.call('POST', '/v1/notices', noticeBody({ deadline: '2026-11-29T14:30:00Z', deadlineInSeconds: undefined }), {
        'idempotency-key': 'order-3',
      });
      clock.advance(3_600_000);
      try {
        const again = await web.call(
          'POST',
          '/v1/notices',
          noticeBody({ deadline: '2026-11-29T14:30:00Z', deadlineInSeconds: undefined }),
          { 'idempotency-key': 'order-3' },
        );
        expect(again.statusCode).toBe(200);
        expect(again.json().id).toBe(first.json().id);
      } finally {
        clock.advance(-3_600_000);
      }
    });
  });

  describe('refuses bad input with a stable code, storing and queuing nothing', () => {
    const cases: [string, () => Promise<{ statusCode: number; json(): any }>, number, string][] = [
      ['no API key', () => web.call('POST', '/v1/notices', noticeBody(), { authorization: '' }), 401, 'unauthorized'],
      [
        'an unknown API key',
        () => web.call('POST', '/v1/notices', noticeBody(), { authorization: 'Bearer nope-nope-nope-nope' }),
        401,
        'unauthorized',
      ],
      ['a body that is not JSON', () => web.call('POST', '/v1/notices', '{"recipient":', {}), 400, 'validation_failed'],
      ['a missing recipient', () => web.call('POST', '/v1/notices', noticeBody({ recipient: undefined })), 400, 'validation_failed'],
      [
        'a bad email',
        () => web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'p', email: 'not-an-email' } })),
        400,
        'validation_failed',
      ],
      [
        'a phone not in E.164',
        () => web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'p', email: 'a@example.com', phone: '09012345678' } })),
        400,
        'validation_failed',
      ],
      [
        'an impossible phone',
        () => web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'p', email: 'a@example.com', phone: '+8112' } })),
        400,
        'validation_failed',
      ],
      [
        'a recipient ID with a hash tag',
        () => web.call('POST', '/v1/notices', noticeBody({ recipient: { id: '{x}', email: 'a@example.com' } })),
        400,
        'validation_failed',
      ],
      ['an unknown field', () => web.call('POST', '/v1/notices', noticeBody({ priority: 'high' })), 400, 'validation_failed'],
      [
        'both deadline forms',
        () => web.call('POST', '/v1/notices', noticeBody({ deadline: '2026-11-29T15:00:00Z' })),
        400,
        'validation_failed',
      ],
      ['no deadline', () => web.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: undefined })), 400, 'validation_failed'],
      [
        'a past deadline',
        () => web.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: undefined, deadline: '2026-11-29T13:00:00Z' })),
        400,
        'validation_failed',
      ],
      [
        'a deadline as a string of seconds',
        () => web.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: '600' })),
        400,
        'validation_failed',
      ],
      [
        'per-second polling',
        () => web.call('POST', '/v1/notices', noticeBody({ policy: { minCheckIntervalSeconds: 1 } })),
        400,
        'validation_failed',
      ],
      [
        'a plan over the poll budget',
        () =>
          web.call(
            'POST',
            '/v1/notices',
            noticeBody({ deadlineInSeconds: 86_400, policy: { firstCheckAfterSeconds: 30, minCheckIntervalSeconds: 30 } }),
          ),
        400,
        'validation_failed',
      ],
      ['no text and no html', () => web.call('POST', '/v1/notices', noticeBody({ content: { subject: 'x' } })), 400, 'validation_failed'],
      [
        'a body over the limit',
        () => web.call('POST', '/v1/notices', noticeBody({ content: { subject: 'x', text: 'y'.repeat(5000) } })),
        413,
        'payload_too_large',
      ],
      [
        'a form-encoded body',
        () => web.call('POST', '/v1/notices', 'a=b', { 'content-type': 'application/x-www-form-urlencoded' }),
        415,
        'unsupported_media_type',
      ],
      [
        'a bad Idempotency-Key',
        () => web.call('POST', '/v1/notices', noticeBody(), { 'idempotency-key': 'x'.repeat(300) }),
        400,
        'validation_failed',
      ],
    ];
    for (const [what, send, status, code] of cases) {
      it(`${what} → ${status} ${code}`, async () => {
        const keysBefore = (await storedKeys()).length;
        const jobsBefore = await queuedJobs();
        const res = await send();
        expect(res.statusCode).toBe(status);
        const body = res.json();
        expect(body.error.code).toBe(code);
        expect(typeof body.error.message).toBe('string');
        expect((await storedKeys()).length).toBe(keysBefore);
        expect(await queuedJobs()).toBe(jobsBefore);
      });
    }
    it('names the field at fault in the details', async () => {
      const res = await web.call('POST', '/v1/notices', noticeBody({ policy: { minCheckIntervalSeconds: 1 } }));
      expect(res.json().error.details[0].path).toBe('body.policy.minCheckIntervalSeconds');
    });
  });

  it('accepts fictional sandbox numbers such as +1 202 555 0100', async () => {
    const res = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({ recipient: { id: 'p', email: 'A@Example.com', phone: '+12025550199' } }),
    );
    expect(res.statusCode).toBe(202);
  });
});

describe('GET and cancel', () => {
  it("answers 404 not_found for an unknown notice, and for an ID that is not Herald's", async () => {
    for (const id of ['ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa', 'nope']) {
      const res = await web.call('GET', `/v1/notices/${id}`);
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    }
    expect((await web.call('GET', '/v1/nothing-here')).json().error.code).toBe('not_found');
  });

  it('cancels a notice not yet handed to a provider, once; the second cancel is 409 invalid_state', async () => {
    const id = (await web.call('POST', '/v1/notices', noticeBody())).json().id;
    const res = await web.call('POST', `/v1/notices/${id}/cancel`);
    expect(res.statusCode).toBe(200);
    expect(res.json().state).toBe('canceled');
    const again = await web.call('POST', `/v1/notices/${id}/cancel`);
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatchObject({ code: 'invalid_state', details: { state: 'canceled' } });
    const types = (await web.call('GET', `/v1/notices/${id}/events`)).json().events.map((e: { type: string }) => e.type);
    expect(types).toEqual(['notice.accepted', 'policy.checked', 'notice.canceled', 'notice.completed']);
    expect(await web.queues.deadline.getJob(`${id}-deadline`)).toBeUndefined();
  });
});

describe('PUT /v1/recipients/:id/policy', () => {
  it('versions every change, and new notices record the version they used', async () => {
    const v1 = await web.call('PUT', '/v1/recipients/player-7/policy', { consent: { email: true, sms: true }, region: 'JP' });
    const v2 = await web.call('PUT', '/v1/recipients/player-7/policy', { consent: { email: true, sms: false } });
    expect(v1.json()).toEqual({ version: 1 });
    expect(v2.json()).toEqual({ version: 2 });
    const notice = (await web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'player-7', email: 'a@example.com' } }))).json();
    expect((await web.call('GET', `/v1/notices/${notice.id}`)).json().policyVersion).toBe(2);
  });
  it('takes recipient IDs up to their 128-character limit in the path', async () => {
    const res = await web.call('PUT', `/v1/recipients/${'r'.repeat(128)}/policy`, { consent: { email: true, sms: false } });
    expect(res.statusCode).toBe(200);
  });
  it('refuses a policy without both consents', async () => {
    const res = await web.call('PUT', '/v1/recipients/player-7/policy', { consent: { email: true } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_failed');
  });
});
