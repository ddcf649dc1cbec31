import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { iso } from '../../src/clock.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { NoticeStore } from '../../src/store/notices.js';
import { deleteKeys, plainRedis, testPrefix } from '../helpers/env.js';
import { storedNoticeFields } from '../helpers/notices.js';

let redis: Redis;
let store: NoticeStore;
const prefix = testPrefix('store');

beforeAll(() => {
  redis = plainRedis();
  store = new NoticeStore(redis, prefix);
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

async function createNotice(now = 1_000_000): Promise<string> {
  const id = newNoticeId(3, now);
  await store.create({
    id,
    createdAt: now,
    fields: storedNoticeFields(id, now),
    content: { subject: 'S', text: 'secret body' },
    entries: [{ type: 'notice.accepted', deadline: iso(now + 600_000) }],
    at: iso(now),
    due: now,
    contentTtlMs: 60_000,
  });
  return id;
}

describe('notice transitions', () => {
  it('change state and append the explaining entry in one step', async () => {
    const id = await createNotice();
    const result = await store.transition(id, 1_000_100, iso(1_000_100), {
      name: 'startEmailAttempt',
      onlyFrom: ['accepted'],
      set: { emailAttemptId: 'att_1' },
      entries: [{ type: 'email.requested', attemptId: 'att_1', idempotencyKey: `${id}-email`, provider: 'postmark' }],
      due: 1_005_100,
    });
    expect(result).toEqual({ ok: true, state: 'email_sending' });
    const events = await store.events(id);
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'notice.accepted'],
      [2, 'email.requested'],
    ]);
    expect(events[1]).toMatchObject({ noticeId: id, attemptId: 'att_1', at: iso(1_000_100) });
    expect((await store.get(id))!.state).toBe('email_sending');
  });

  it('refuse a step from the wrong state and write nothing', async () => {
    const id = await createNotice();
    const result = await store.transition(id, 1_000_100, iso(1_000_100), {
      name: 'decideFallback',
      onlyFrom: ['email_sent'],
      entries: [{ type: 'fallback.decided', reason: 'email_deadline_elapsed' }],
    });
    expect(result).toEqual({ ok: false, reason: 'state', state: 'accepted' });
    expect((await store.events(id)).map((e) => e.type)).toEqual(['notice.accepted']);
  });

  it('refuse a deadline step before the deadline, by the clock passed in', async () => {
    const id = await createNotice(2_000_000);
    const spec = { name: 'decideFallback' as const, onlyFrom: ['accepted'] as const, reached: 'deadline', entries: [{ type: 'fallback.decided' }] };
    expect(await store.transition(id, 2_599_999, iso(2_599_999), spec)).toMatchObject({
      ok: false,
      reason: 'guard',
      field: 'deadline',
    });
    expect(await store.transition(id, 2_600_000, iso(2_600_000), spec)).toEqual({
      ok: true,
      state: 'sms_pending',
    });
  });

  it('check field guards (an attempt ID) before writing', async () => {
    const id = await createNotice();
    const result = await store.transition(id, 1, iso(1), {
      name: 'annotate',
      eq: { emailAttemptId: 'att_other' },
      entries: [{ type: 'email.accepted' }],
    });
    expect(result).toMatchObject({ ok: false, reason: 'guard', field: 'emailAttemptId' });
  });

  it('keep every key of a notice in one hash-tag slot', async () => {
    const id = await createNotice();
    const keys = [
      store.keys.notice(id),
      store.keys.content(id),
      store.keys.events(id),
      store.keys.lease(id),
      ...Object.values(store.keys.noticeKeysFor(id)),
    ];
    const tags = new Set(keys.map((k) => /\{([^}]+)\}/.exec(k)![1]));
    expect(tags.size).toBe(1);
  });

  it('keep the message body out of the decision log', async () => {
    const id = await createNotice();
    const raw = JSON.stringify(await redis.xrange(store.keys.noticeKeysFor(id).log, '-', '+'));
    expect(raw).not.toContain('secret body');
    expect((await store.content(id))!.text).toBe('secret body');
  });
});
