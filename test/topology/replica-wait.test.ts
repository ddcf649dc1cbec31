import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { iso } from '../../src/clock.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { readMetricCounters } from '../../src/store/metrics.js';
import { NoticeStore } from '../../src/store/notices.js';
import { onlineReplicas, REPLICA_WAIT_MS } from '../../src/store/replicas.js';
import { sleep, testPrefix, waitFor } from '../helpers/env.js';
import { entryOf } from '../helpers/entries.js';
import { storedNoticeFields } from '../helpers/notices.js';
import { RedisServer } from '../helpers/redis-server.js';

/**
 * The notice's creation and the record that a send is about to leave wait for a
 * replica (WAIT 1) where the master has one; without one they go ahead, counted. Checked on a
 * master and a replica of the test's own, by the master's own command counts.
 */
describe('writes that wait for a replica', () => {
  const prefix = testPrefix('wait');
  let master: RedisServer;
  let replica: RedisServer;
  let redis: Redis;
  let onReplica: Redis;
  let store: NoticeStore;
  let now = 1_000_000;

  beforeAll(async () => {
    master = await RedisServer.start({ appendfsync: 'everysec' });
    replica = await RedisServer.start({ appendfsync: 'everysec', args: ['--replicaof', '127.0.0.1', String(master.port)] });
    redis = master.client({ maxRetriesPerRequest: null });
    onReplica = replica.client({ maxRetriesPerRequest: null });
    onReplica.on('error', () => undefined);
    await waitFor(async () => onlineReplicas(await redis.info('replication')) === 1, 20_000, 'the replica to be online');
    store = new NoticeStore(redis, prefix, { replicasExpected: true });
  });
  afterAll(async () => {
    redis?.disconnect();
    onReplica?.disconnect();
    await replica?.stop();
    await master?.stop();
  });

  /** Calls of a command on the master since it started (INFO commandstats). */
  async function calls(command: string): Promise<number> {
    const stats = await redis.info('commandstats');
    return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
  }

  async function create(): Promise<string> {
    now += 1000;
    const id = newNoticeId(3, now);
    await store.create({
      id,
      createdAt: now,
      fields: storedNoticeFields(id, now),
      content: { subject: 'S', text: 'body' },
      entries: [entryOf('notice.accepted', { deadline: iso(now + 600_000) })],
      at: iso(now),
      due: now,
      contentTtlMs: 60_000,
    });
    return id;
  }

  const startEmail = (id: string) =>
    store.transition(id, now + 10, iso(now + 10), {
      name: 'startEmailAttempt',
      onlyFrom: ['accepted'],
      set: { emailAttemptId: `att_${id}` },
      entries: [entryOf('email.requested', { attemptId: `att_${id}`, idempotencyKey: `${id}-email`, provider: 'postmark' })],
      due: now + 5000,
    });

  const counters = async () =>
    Object.fromEntries([...(await readMetricCounters(redis, store.keys))].filter(([k]) => k.startsWith('unreplicated|')));

  it('with a replica online: the creation and the send record wait for it, WAIT in the same pipeline as the script; other transitions do not', async () => {
    const waitsBefore = await calls('wait');
    const id = await create();
    // WAIT answered before create() returned: the replica holds the notice already.
    expect(await onReplica.hget(store.keys.notice(id), 'state')).toBe('accepted');
    expect(await calls('wait')).toBe(waitsBefore + 1);

    expect(await startEmail(id)).toEqual({ ok: true, state: 'email_sending' });
    expect(await onReplica.hget(store.keys.notice(id), 'state')).toBe('email_sending');
    expect(await calls('wait')).toBe(waitsBefore + 2);

    await store.transition(id, now + 20, iso(now + 20), { name: 'annotate', entries: [entryOf('notice.reconciled')] });
    expect(await calls('wait')).toBe(waitsBefore + 2);
    expect(await counters()).toEqual({});
  });

  it('asks INFO replication at most about once a second, not once per write', async () => {
    const infoBefore = await calls('info');
    const started = Date.now();
    for (let i = 0; i < 30; i += 1) await create();
    const seconds = Math.ceil((Date.now() - started) / 1000);
    // Our own two INFO commandstats reads, plus at most one replication read per second begun.
    expect((await calls('info')) - infoBefore).toBeLessThanOrEqual(2 + seconds);
  });

  it('a replica that does not answer: the write goes ahead after the WAIT timeout, counted as timeout', async () => {
    replica.signal('SIGSTOP');
    try {
      const started = Date.now();
      const id = await create();
      expect(Date.now() - started).toBeGreaterThanOrEqual(REPLICA_WAIT_MS - 50);
      expect(await store.get(id)).toMatchObject({ state: 'accepted' });
      expect(await counters()).toEqual({ 'unreplicated|accept|timeout': 1 });
    } finally {
      replica.signal('SIGCONT');
    }
  });

  it('no replica connected: nothing waits, the writes go ahead and are counted as no_replica', async () => {
    await replica.kill('SIGKILL');
    await waitFor(async () => onlineReplicas(await redis.info('replication')) === 0, 20_000, 'the master to see the replica gone');
    await sleep(1100); // what the store knew of the replica expires
    const waitsBefore = await calls('wait');
    const id = await create();
    expect(await startEmail(id)).toEqual({ ok: true, state: 'email_sending' });
    expect(await calls('wait')).toBe(waitsBefore);
    expect(await counters()).toEqual({
      'unreplicated|accept|timeout': 1,
      'unreplicated|accept|no_replica': 1,
      'unreplicated|email_send|no_replica': 1,
    });
    // A write refused by its guards counts nothing: it did not happen.
    expect(await startEmail(id)).toMatchObject({ ok: false });
    expect(await counters()).toMatchObject({ 'unreplicated|email_send|no_replica': 1 });
  });

  it('one node where no replica is expected: nothing waits and nothing is counted', async () => {
    const single = new NoticeStore(redis, `${prefix}-single`);
    const waitsBefore = await calls('wait');
    now += 1000;
    const id = newNoticeId(4, now);
    await single.create({
      id,
      createdAt: now,
      fields: storedNoticeFields(id, now),
      content: { subject: 'S', text: 'body' },
      entries: [entryOf('notice.accepted', { deadline: iso(now + 600_000) })],
      at: iso(now),
      due: now,
      contentTtlMs: 60_000,
    });
    expect(await calls('wait')).toBe(waitsBefore);
    expect([...(await readMetricCounters(redis, single.keys)).keys()].filter((k) => k.startsWith('unreplicated'))).toEqual([]);
  });
});
