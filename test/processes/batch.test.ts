/**
 * `POST /v1/notices/batch` through a real web process on real Redis: each notice of a batch is
 * accepted or refused as it would be alone, its result in the order given, and a batch posted
 * twice with its idempotency keys makes no second notice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { plainRedis, testEnv, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody } from '../helpers/herald.js';
import { WebProcess } from '../helpers/web-process.js';

const prefix = testPrefix('batch');
let web: WebProcess;

beforeAll(async () => {
  web = await new WebProcess(testEnv(prefix, { HERALD_BATCH_MAX: '1000' })).start();
});
afterAll(async () => {
  await web?.stop('SIGTERM');
  await cleanUp(prefix);
});

type Result = { index: number; status: number; id?: string; state?: string; error?: { code: string; details?: { path: string }[] } };

const item = (i: number, overrides: Record<string, unknown> = {}) =>
  noticeBody({
    recipient: { id: `player-${i}`, email: `delivered+b${i}@example.com`, phone: '+12025550100' },
    deadlineInSeconds: 600,
    ...overrides,
  });

describe('POST /v1/notices/batch', () => {
  it('answers 1,000 notices one by one, in order: accepted, invalid, refused, suppressed, replayed and reused keys alike', async () => {
    const suppressed = 'suppressed+batch@example.com';
    expect((await web.call('POST', '/v1/suppressions', { channel: 'email', address: suppressed, reason: 'test' })).status).toBe(201);
    const notices = Array.from({ length: 1000 }, (_, i) => {
      if (i % 100 === 1) return item(i, { recipient: { id: `player-${i}`, email: 'not an address' } }); // the schema refuses
      if (i % 100 === 2) return item(i, { recipient: { id: `player-${i}`, email: `b${i}@example.com`, phone: '+1555' } }); // not a possible number
      if (i % 100 === 3) return item(i, { deadlineInSeconds: undefined, deadline: '2001-01-01T00:00:00Z' }); // in the past
      if (i % 100 === 4) return item(i, { recipient: { id: `player-${i}`, email: suppressed } });
      if (i % 100 === 5) return { ...item(i), idempotencyKey: `key-${i}` };
      if (i % 100 === 6) return { ...item(i - 1), idempotencyKey: `key-${i - 1}` }; // the same key, the same body: a replay
      if (i % 100 === 7) return { ...item(i), idempotencyKey: `key-${i - 2}` }; // the same key, another body
      return item(i);
    });
    const answer = await web.call('POST', '/v1/notices/batch', { notices }, { timeoutMs: 60_000 });
    expect(answer.status).toBe(200);
    const results = answer.json.results as Result[];
    expect(results.map((r) => r.index)).toEqual(notices.map((_, i) => i));
    for (const r of results) {
      const kind = r.index % 100;
      if (kind === 1) expect(r, `${r.index}`).toMatchObject({ status: 400, error: { code: 'validation_failed' } });
      else if (kind === 2) expect(r.error?.details?.[0]?.path).toBe(`body.notices.${r.index}.recipient.phone`);
      else if (kind === 3) expect(r).toMatchObject({ status: 400, error: { code: 'validation_failed' } });
      else if (kind === 6) expect(r).toMatchObject({ status: 200, id: results[r.index - 1]!.id });
      else if (kind === 7) expect(r).toMatchObject({ status: 409, error: { code: 'idempotency_key_reused' } });
      else expect(r, `${r.index}`).toMatchObject({ status: 202, state: 'accepted', id: expect.stringMatching(/^ntc_/) });
    }
    // As posted alone: the same refusal for the same notice.
    const alone = await web.call('POST', '/v1/notices', notices[2]);
    expect(alone.status).toBe(400);
    expect(alone.json.error.details[0].path).toBe('body.recipient.phone');
    // The suppressed address is accepted, and its notice records the suppression, as alone.
    const events = (await web.call('GET', `/v1/notices/${results[4]!.id}/events`)).json.events as {
      type: string;
      outcome?: string;
      channel?: string;
    }[];
    expect(events.find((e) => e.type === 'policy.checked' && e.channel === 'email')).toMatchObject({ outcome: 'suppressed' });
  });

  it('makes no second notice when the same batch, with its idempotency keys, is posted again', async () => {
    const notices = Array.from({ length: 50 }, (_, i) => ({ ...item(5000 + i), idempotencyKey: `again-${i}` }));
    const first = (await web.call('POST', '/v1/notices/batch', { notices })).json.results as Result[];
    const second = (await web.call('POST', '/v1/notices/batch', { notices })).json.results as Result[];
    expect(first.every((r) => r.status === 202)).toBe(true);
    expect(second.every((r) => r.status === 200)).toBe(true);
    expect(second.map((r) => r.id)).toEqual(first.map((r) => r.id));
    const redis = plainRedis();
    try {
      const keys = [];
      for (let shard = 0; shard < 16; shard += 1) keys.push(...(await redis.zrange(`${prefix}:{s${shard}}:notices`, 0, '-1')));
      for (const r of first) expect(keys.filter((k) => k === r.id)).toHaveLength(1);
      // Each new notice has its one job, the deadline job, added in bulk.
      for (const r of first.slice(0, 5)) {
        expect(await redis.exists(`${prefix}:{q}:deadline:${r.id}-deadline`), r.id).toBe(1);
        expect(await redis.exists(`${prefix}:{q}:email-send:${r.id}-email-send`), r.id).toBe(0);
      }
    } finally {
      redis.disconnect();
    }
  });

  it(`refuses more than HERALD_BATCH_MAX notices as a whole, and an empty batch`, async () => {
    const tooMany = await web.call(
      'POST',
      '/v1/notices/batch',
      { notices: Array.from({ length: 1001 }, (_, i) => item(i)) },
      { timeoutMs: 30_000 },
    );
    expect(tooMany.status).toBe(400);
    expect(tooMany.json.error.code).toBe('validation_failed');
    expect((await web.call('POST', '/v1/notices/batch', { notices: [] })).status).toBe(400);
  });
});
