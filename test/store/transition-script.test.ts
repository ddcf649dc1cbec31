import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { iso } from '../../src/clock.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { NoticeStore, type LogEntry, type TransitionSpec } from '../../src/store/notices.js';
import { TRANSITIONS, type Transition, type TransitionName } from '../../src/notice/transitions.js';
import { isTerminal, type NoticeState } from '../../src/notice/states.js';
import { NoticeIndex } from '../../src/store/notice-index.js';
import { metricIncrements } from '../../src/store/metrics.js';
import { entryOf } from '../helpers/entries.js';
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

async function createNotice(now = 1_000_000, shard = 3): Promise<string> {
  const id = newNoticeId(shard, now);
  await store.create({
    id,
    createdAt: now,
    fields: storedNoticeFields(id, now),
    content: { subject: 'S', text: 'secret body' },
    entries: [entryOf('notice.accepted', { deadline: iso(now + 600_000) })],
    at: iso(now),
    due: now,
    contentTtlMs: 60_000,
  });
  return id;
}

describe('notice transitions', () => {
  it('bring back the notice as the step left it when asked to read it, and only then', async () => {
    const id = await createNotice();
    const spec = (attempt: string): TransitionSpec => ({
      name: 'startEmailAttempt',
      onlyFrom: ['accepted', 'email_sending'],
      set: { emailAttemptId: attempt },
      entries: [entryOf('email.requested', { attemptId: attempt, idempotencyKey: `${id}-email`, provider: 'postmark' })],
    });
    const read = await store.transition(id, 1_000_100, iso(1_000_100), spec('att_r1'), { read: true });
    expect(read).toEqual({ ok: true, state: 'email_sending', notice: await store.get(id) });
    expect(read.ok && read.notice).toMatchObject({ state: 'email_sending', seq: 2, emailChannel: { attemptId: 'att_r1' } });
    expect(await store.transition(id, 1_000_200, iso(1_000_200), spec('att_r2'))).toEqual({ ok: true, state: 'email_sending' });
  });

  it('change state and append the explaining entry in one step', async () => {
    const id = await createNotice();
    const result = await store.transition(id, 1_000_100, iso(1_000_100), {
      name: 'startEmailAttempt',
      onlyFrom: ['accepted'],
      set: { emailAttemptId: 'att_1' },
      entries: [entryOf('email.requested', { attemptId: 'att_1', idempotencyKey: `${id}-email`, provider: 'postmark' })],
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
      entries: [entryOf('fallback.decided', { reason: 'email_deadline_elapsed' })],
    });
    expect(result).toEqual({ ok: false, reason: 'state', state: 'accepted' });
    expect((await store.events(id)).map((e) => e.type)).toEqual(['notice.accepted']);
  });

  it('refuse a deadline step before the deadline, by the clock passed in', async () => {
    const id = await createNotice(2_000_000);
    const spec: TransitionSpec = {
      name: 'decideFallback',
      onlyFrom: ['accepted'],
      reached: 'deadline',
      entries: [entryOf('fallback.decided')],
    };
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
      entries: [entryOf('email.accepted')],
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

describe('a transition with everything at once', () => {
  it('checks every guard, sets and deletes fields, appends entries in order and counts them, in one step', async () => {
    const id = await createNotice(3_000_000);
    const hour = String(Math.floor(3_000_000 / 3_600_000));
    const k = store.keys.noticeKeysFor(id);
    await store.transition(id, 3_000_100, iso(3_000_100), {
      name: 'startEmailAttempt',
      set: { emailAttemptId: 'att_1', emailNextCheckAt: 5 },
      entries: [entryOf('email.requested', { attemptId: 'att_1', idempotencyKey: `${id}-email`, provider: 'postmark' })],
    });
    const spec = {
      name: 'recordEmailAccepted' as const,
      // Two guards: the attempt is ours, and no message is recorded yet (absent).
      eq: { emailAttemptId: 'att_1', emailProviderMessageId: '' },
      set: { emailProviderMessageId: 'msg-1', emailChecksDone: 2, emailStatus: 'pending' },
      unset: ['emailNextCheckAt' as const],
      entries: [
        entryOf('email.accepted', { attemptId: 'att_1', providerMessageId: 'msg-1' }),
        // `detail` is of no entry type: a nested value of any field is stored as it was given.
        {
          ...entryOf('provider.error', { channel: 'email', kind: 'timeout', operation: 'status', attemptId: 'att_1' }),
          detail: { n: [1, 'two'] },
        },
        // Counted with increments other than 1 (the lateness of the check, 1,500 ms).
        entryOf('email.observed', { providerStatus: 'Sent', status: 'pending', observedAt: iso(3_001_700), plannedAt: iso(3_000_200) }),
      ],
      due: 3_009_000,
    };
    const guarded = await store.transition(id, 3_000_200, iso(3_000_200), {
      ...spec,
      eq: { emailAttemptId: 'att_1', emailStatus: 'sent' },
    });
    expect(guarded).toEqual({ ok: false, reason: 'guard', field: 'emailStatus', value: '' });

    // The shard's stats counters are shared with the other tests' notices: compared as a difference.
    const statsBefore = await redis.hgetall(k.stats);
    expect(await store.transition(id, 3_000_200, iso(3_000_200), spec)).toEqual({ ok: true, state: 'email_sent' });
    const hash = await redis.hgetall(k.notice);
    expect(hash).toMatchObject({
      state: 'email_sent',
      seq: '5',
      emailAttemptId: 'att_1',
      emailProviderMessageId: 'msg-1',
      emailChecksDone: '2',
      emailStatus: 'pending',
    });
    expect(hash.emailNextCheckAt).toBeUndefined();
    const events = await store.events(id);
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'notice.accepted'],
      [2, 'email.requested'],
      [3, 'email.accepted'],
      [4, 'provider.error'],
      [5, 'email.observed'],
    ]);
    expect(events[3]).toMatchObject({ noticeId: id, at: iso(3_000_200), kind: 'timeout', detail: { n: [1, 'two'] } });
    expect(await redis.zscore(k.due, id)).toBe('3009000');
    const metrics = await redis.hgetall(k.metrics);
    const increments = metricIncrements(spec.entries as LogEntry[], 'email_sent');
    expect(increments).toContain(1500);
    for (let i = 0; i < increments.length; i += 2) expect(metrics[increments[i]!]).toBe(String(increments[i + 1]));
    const statsAfter = await redis.hgetall(k.stats);
    const changed = Object.fromEntries(
      Object.keys(statsAfter)
        .map((field) => [field, Number(statsAfter[field]) - Number(statsBefore[field] ?? 0)])
        .filter(([, delta]) => delta !== 0),
    );
    expect(changed).toEqual({
      [`${hour}|state|email_sent`]: 1,
      [`${hour}|state|email_sending`]: -1,
      [`${hour}|checks|email`]: 2,
      [`${hour}|sent|email`]: 1,
    });

    // The same step again: the guard on the message ID refuses it, and nothing more is written.
    expect(await store.transition(id, 3_000_300, iso(3_000_300), { ...spec, onlyFrom: undefined, name: 'annotate' })).toMatchObject({
      ok: false,
      reason: 'guard',
      field: 'emailProviderMessageId',
      value: 'msg-1',
    });
    expect((await store.events(id)).length).toBe(5);
  });
});

describe('creating a notice', () => {
  it('stores its fields, content, entries, counters and indexes in one step, and finds it again by its idempotency key', async () => {
    const now = 7_200_000 * 5 + 1234;
    const id = newNoticeId(5, now);
    const k = store.keys.noticeKeysFor(id);
    const idem = { shard: 5, keyHash: `h${now}`, bodyHash: 'body-1', ttlMs: 90_000 };
    const statsBefore = await redis.hgetall(k.stats);
    const metricsBefore = await redis.hgetall(k.metrics);
    const input = {
      id,
      createdAt: now,
      fields: { ...storedNoticeFields(id, now), phone: '+12025550100', policyVersion: 3 },
      content: { subject: 'S', text: 'T' },
      entries: [
        { type: 'notice.accepted', deadline: iso(now + 600_000), pollPlan: [iso(now + 1000)], hasPhone: true },
        { type: 'policy.checked', channel: 'email', outcome: 'allowed', policyVersion: 3 },
      ] as LogEntry[],
      at: iso(now),
      due: now + 5,
      contentTtlMs: 60_000,
      idempotency: idem,
    };
    expect(await store.create(input)).toEqual({ created: true });
    expect(await redis.hgetall(k.notice)).toEqual({
      ...Object.fromEntries(Object.entries(input.fields).map(([field, value]) => [field, String(value)])),
      seq: '2',
      statsHour: '10',
    });
    expect(JSON.parse((await redis.get(store.keys.content(id)))!)).toEqual({ subject: 'S', text: 'T' });
    expect(await redis.pttl(store.keys.content(id))).toBeGreaterThan(50_000);
    const events = await store.events(id);
    expect(events.map((e) => [e.seq, e.type, e.at, e.noticeId])).toEqual([
      [1, 'notice.accepted', iso(now), id],
      [2, 'policy.checked', iso(now), id],
    ]);
    expect(events[0]).toMatchObject({ pollPlan: [iso(now + 1000)], hasPhone: true });
    expect(await redis.zscore(k.due, id)).toBe(String(now + 5));
    expect(await redis.zscore(store.keys.notices(5), id)).toBe('0');
    const metrics = await redis.hgetall(k.metrics);
    const increments = metricIncrements(input.entries, 'accepted');
    for (let i = 0; i < increments.length; i += 2)
      expect(Number(metrics[increments[i]!]) - Number(metricsBefore[increments[i]!] ?? 0)).toBe(increments[i + 1]);
    const statsAfter = await redis.hgetall(k.stats);
    expect(Number(statsAfter['10|state|accepted']) - Number(statsBefore['10|state|accepted'] ?? 0)).toBe(1);

    // The same key again: the notice it created, with the body hash it was created from; nothing more is written.
    expect(await store.create({ ...input, id: newNoticeId(5, now) })).toEqual({ created: false, existingId: id, bodyHash: 'body-1' });
    expect(await store.findIdempotent(5, idem.keyHash)).toEqual({ noticeId: id, bodyHash: 'body-1' });
    expect((await store.events(id)).length).toBe(2);
  });
});

describe('the notice hash', () => {
  it('holds no ID of its own (the key names the notice), and a notice an earlier version stored with one reads the same', async () => {
    const id = await createNotice();
    expect(await redis.hexists(store.keys.notice(id), 'id')).toBe(0);
    const index = new NoticeIndex(redis, store.keys);
    const read = await store.get(id);
    const [summary] = await index.summaries([id]);
    expect(read).toMatchObject({ id, state: 'accepted', recipientId: 'r' });
    expect(summary).toMatchObject({ id, state: 'accepted', recipientId: 'r' });

    await redis.hset(store.keys.notice(id), 'id', id);
    expect(await store.get(id)).toEqual(read);
    expect(await index.summaries([id])).toEqual([summary]);
  });
});

describe('steps after which nothing more is sent', () => {
  // Created at 1,000,000 on Herald's clock, stored for 60 s (as if its SMS plan needed that long);
  // HERALD_CONTENT_TTL is 30 s.
  const CREATED = 1_000_000;
  const TTL = 30_000;
  let ttlStore: NoticeStore;
  beforeAll(() => {
    ttlStore = new NoticeStore(redis, prefix, { contentTtlMs: TTL });
  });

  const completed = (state: NoticeState): LogEntry => ({ type: 'notice.completed', state });
  const unconfirmed: LogEntry = { type: 'sms.unconfirmed', attemptId: 'att_s', reason: 'sms_plan_ended', lastStatus: 'sent', checks: 4 };
  /** A notice in `state`, put there by hand: the moves under test start from it. */
  async function noticeIn(state: NoticeState): Promise<string> {
    const id = await createNotice(CREATED, 11);
    await redis.hset(store.keys.notice(id), 'state', state);
    return id;
  }
  const expiryOf = async (id: string) => ({
    pttl: await redis.pttl(store.keys.content(id)),
    indexed: await redis.zscore(store.keys.noticeKeysFor(id).contentExpiry, id),
  });

  // Every move that ends a notice (its `to` is terminal), and the two that leave its SMS unconfirmed.
  const ending: { name: TransitionName; from: NoticeState; entries: LogEntry[] }[] = [
    ...(Object.entries(TRANSITIONS) as [TransitionName, Transition][])
      .filter(([, t]) => t.to !== undefined && isTerminal(t.to))
      .map(([name, t]) => ({ name, from: (t.from as readonly NoticeState[])[0]!, entries: [completed(t.to!)] })),
    { name: 'observeSms', from: 'sms_sent', entries: [unconfirmed] },
    { name: 'leaveSmsInDoubt', from: 'sms_sending', entries: [{ ...unconfirmed, reason: 'sms_send_unconfirmed' } as LogEntry] },
  ];

  it('are every move into a terminal state, and those that leave the SMS unconfirmed', () => {
    expect(ending.map((m) => m.name).sort()).toEqual([
      'blockFallback',
      'cancel',
      'cancelSmsForLateDelivery',
      'confirmEmailDelivered',
      'confirmSmsDelivered',
      'fail',
      'failSms',
      'leaveSmsInDoubt',
      'observeSms',
      'rejectSms',
    ]);
  });

  it.each(ending)('$name keeps the content only until creation + TTL, and indexes that time', async ({ name, from, entries }) => {
    const id = await noticeIn(from);
    const now = CREATED + 10_000;
    expect(await ttlStore.transition(id, now, iso(now), { name, entries, due: 'remove' } as TransitionSpec)).toMatchObject({ ok: true });
    const { pttl, indexed } = await expiryOf(id);
    // 20 s left of the TTL on Herald's clock, however long the test has run since.
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(20_000);
    expect(indexed).toBe(String(CREATED + TTL));
    expect((await ttlStore.content(id))!.text).toBe('secret body');
  });

  it.each(ending)('$name past the TTL deletes the content at once, indexed as due now', async ({ name, from, entries }) => {
    const id = await noticeIn(from);
    const now = CREATED + TTL + 5_000;
    expect(await ttlStore.transition(id, now, iso(now), { name, entries, due: 'remove' } as TransitionSpec)).toMatchObject({ ok: true });
    expect(await redis.exists(store.keys.content(id))).toBe(0);
    expect((await expiryOf(id)).indexed).toBe(String(now));
  });

  it('leave the content as created on any other step, and on a step that is refused', async () => {
    const id = await noticeIn('sms_pending');
    const now = CREATED + TTL + 5_000;
    const started = await ttlStore.transition(id, now, iso(now), {
      name: 'startSmsAttempt',
      set: { smsAttemptId: 'att_s' },
      entries: [entryOf('sms.requested', { attemptId: 'att_s', idempotencyKey: `${id}-sms`, provider: 'twilio' })],
    });
    expect(started).toMatchObject({ ok: true, state: 'sms_sending' });
    // A completion from a state its move does not start from writes nothing.
    const refused = await ttlStore.transition(id, now, iso(now), {
      name: 'confirmEmailDelivered',
      entries: [completed('email_delivered')],
    });
    expect(refused).toMatchObject({ ok: false, reason: 'state' });
    const { pttl, indexed } = await expiryOf(id);
    expect(pttl).toBeGreaterThan(TTL);
    expect(indexed).toBeNull();
  });

  it('leave content already purged alone, and so does a store not given the TTL (one that only reads)', async () => {
    const purged = await noticeIn('email_sent');
    await redis.hset(store.keys.notice(purged), 'contentPurgedAt', CREATED + 1);
    const readOnly = await noticeIn('email_sent');
    const now = CREATED + 10_000;
    const spec = (): TransitionSpec => ({ name: 'confirmEmailDelivered', entries: [completed('email_delivered')], due: 'remove' });
    expect(await ttlStore.transition(purged, now, iso(now), spec())).toMatchObject({ ok: true });
    expect(await store.transition(readOnly, now, iso(now), spec())).toMatchObject({ ok: true });
    for (const id of [purged, readOnly]) {
      const { pttl, indexed } = await expiryOf(id);
      expect(pttl).toBeGreaterThan(TTL);
      expect(indexed).toBeNull();
    }
  });
});
