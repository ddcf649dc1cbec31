import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { openArchive } from '../../src/archive/open.js';
import { parseStatsMember, statsMember, type RetiredStats } from '../../src/archive/records.js';
import { runCli } from '../../src/cli.js';
import type { Prices } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { noticeCreatedAt, shardOfNoticeId } from '../../src/notice/ids.js';
import { STATS_HOUR_MS } from '../../src/notice/stats.js';
import { pruneStats } from '../../src/store/stats.js';
import type { Keys } from '../../src/store/keys.js';
import { startWorker, type WorkerHandle } from '../../src/worker.js';
import { plainRedis, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { statsOfHash, tally } from '../helpers/stats.js';

/**
 * /v1/stats from the per-hour counters must answer exactly what the implementation before them
 * answered: that one read the shards' `created` indexes (a notice ID while the notice was in
 * Redis, its counts once it retired) and every notice hash. `statsTheOldWay` is that code; the
 * index it reads is rebuilt here as the earlier version kept it.
 */
async function statsTheOldWay(redis: Redis, keys: Keys, prices: Prices, from: number, to: number) {
  const notices: RetiredStats[] = [];
  for (const shard of keys.allShards()) {
    for (const member of await redis.zrangebyscore(keys.created(shard), from, to)) {
      // A retired notice's member carries its counts; a notice still in Redis is read from its hash.
      const stats = parseStatsMember(member) ?? statsOfHash(await hashOf(redis, keys, member));
      if (stats) notices.push(stats);
    }
  }
  return tally(notices, prices);
}

const COUNTED = ['state', 'fallbackReason', 'emailChecksDone', 'smsChecksDone', 'emailProviderMessageId', 'smsSegments'];

async function hashOf(redis: Redis, keys: Keys, id: string) {
  const values = await redis.hmget(keys.notice(id), ...COUNTED);
  return Object.fromEntries(COUNTED.map((field, i) => [field, values[i]]));
}

const silent = createLogger('herald-test-stats', 'silent');
const redis = plainRedis();
let stack: Stack;
let worker: WorkerHandle | undefined;
const ids: string[] = [];
let later: string[] = [];
const startedAt = Date.now();
// Whole hours around the run, so that the counters' window and the old [from, to] are the same period.
const from = Math.floor(startedAt / STATS_HOUR_MS) * STATS_HOUR_MS - STATS_HOUR_MS;
const to = from + 3 * STATS_HOUR_MS;
const period = `from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}`;

let recipients = 0;
const body = (email: string, phone: string | undefined, deadlineInSeconds: number) =>
  noticeBody({ recipient: { id: `stats-${(recipients += 1)}`, email, ...(phone ? { phone } : {}) }, deadlineInSeconds });

async function create(email: string, phone: string | undefined, deadlineInSeconds: number): Promise<string> {
  const id = await stack.createNotice(body(email, phone, deadlineInSeconds));
  ids.push(id);
  return id;
}

/** The `created` index as the earlier version kept it: IDs of notices in Redis, counts of retired ones. */
async function rebuildLegacyIndex(): Promise<void> {
  const keys = stack.web.store.keys;
  const archive = openArchive(stack.config);
  try {
    for (const shard of keys.allShards()) await redis.del(keys.created(shard));
    for (const id of ids) {
      const shard = shardOfNoticeId(id)!;
      if ((await redis.exists(keys.notice(id))) === 1) {
        await redis.zadd(keys.created(shard), noticeCreatedAt(id)!, id);
        continue;
      }
      const record = await archive.readRecord(id);
      expect(record, `the archive record of retired notice ${id}`).not.toBeNull();
      await redis.zadd(keys.created(shard), noticeCreatedAt(id)!, statsMember(id, record!.stats));
    }
  } finally {
    await archive.close();
  }
}

async function statsNow() {
  const res = await stack.web.call('GET', `/v1/stats?${period}`);
  expect(res.statusCode).toBe(200);
  const { from: _from, to: _to, window, ...counts } = res.json();
  expect(window).toEqual({ from: new Date(from).toISOString(), to: new Date(to).toISOString() });
  return counts;
}

const expected = () => statsTheOldWay(redis, stack.web.store.keys, stack.config.prices, from, to - 1);

async function retentionApply(): Promise<string> {
  let said = '';
  const stderr = new Writable({
    write: (chunk, _encoding, done) => {
      said += String(chunk);
      done();
    },
  });
  const quiet = new Writable({ write: (_chunk, _encoding, done) => done() });
  expect(await runCli(['retention', 'apply'], { stdout: quiet, stderr, env: stack.env, now: Date.now })).toBe(0);
  return said;
}

const gone = (id: string) => async () => (await redis.exists(stack.web.store.keys.notice(id))) === 0;

beforeAll(async () => {
  stack = await startStack({
    prefix: testPrefix('stats'),
    inProcessWorker: false,
    env: {
      HERALD_NOTICE_KEEP_HOT: '1s',
      HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
      HERALD_MIRROR_INTERVAL_MS: '200',
      HERALD_AUDIT_RETENTION: '400d',
    },
  });
  // Canceled before any worker runs, so that nothing has been handed to a provider.
  for (const id of [await create('delivered@example.com', undefined, 60), await create('never@example.com', '+12025550101', 60)]) {
    expect((await stack.web.call('POST', `/v1/notices/${id}/cancel`)).statusCode).toBe(200);
  }
  worker = await startWorker(stack.config, { logger: silent });
  const delivered = [
    await create('delivered+0ms@example.com', '+12025550100', 60),
    await create('delivered+0ms@example.com', undefined, 60),
  ];
  // The emulator's SMS outcome is the number's last two digits: 00 delivered, 01 undelivered, 03 STOP-ed (21610).
  const fallback = [await create('never@example.com', '+12025550100', 2), await create('bounce@example.com', '+12025550103', 60)];
  const blocked = await create('never@example.com', undefined, 2);
  await create('never@example.com', '+12025550100', 600); // still waiting for its deadline
  later = [await create('never@example.com', '+12025550101', 25), await create('bounce+15s@example.com', '+12025550100', 60)];
  // Finished and retired (their records in the archive, their hashes gone from Redis).
  for (const id of [...delivered, blocked, ids[0]!, ids[1]!]) await waitFor(gone(id), 30_000, `notice ${id} to retire`);
  for (const id of fallback) await stack.waitForState(id, ['sms_sent', 'sms_delivered', 'sms_failed'], 30_000);
  // Nothing moves while the numbers are compared.
  await worker.close();
  worker = undefined;
}, 90_000);

afterAll(async () => {
  await worker?.close();
  await stack.close();
  redis.disconnect();
});

describe('GET /v1/stats from the per-hour counters', () => {
  it('answers exactly what reading every notice answered, on delivered, fallback, blocked, canceled, live and retired notices', async () => {
    await rebuildLegacyIndex();
    const old = await expected();
    expect(old.notices).toBe(ids.length);
    expect(Object.keys(old.byState)).toEqual(expect.arrayContaining(['canceled', 'email_delivered', 'blocked', 'email_sent']));
    expect(Object.keys(old.fallbackByReason)).toEqual(expect.arrayContaining(['email_deadline_elapsed', 'email_bounced']));
    expect(await statsNow()).toEqual(old);
  });

  it('counts the hours overlapping [from, to) and says which: a period inside one hour answers for the whole hour', async () => {
    const inside = new Date(startedAt + 1).toISOString();
    const res = (await stack.web.call('GET', `/v1/stats?from=${inside}&to=${inside}`)).json();
    const hour = Math.floor(startedAt / STATS_HOUR_MS) * STATS_HOUR_MS;
    expect(res.window).toEqual({ from: new Date(hour).toISOString(), to: new Date(hour + STATS_HOUR_MS).toISOString() });
    const beforeRun = (
      await stack.web.call('GET', `/v1/stats?from=${new Date(from).toISOString()}&to=${new Date(from + 1).toISOString()}`)
    ).json();
    expect(beforeRun.notices).toBe(0);
  });
});

describe('notices created before the counters existed', () => {
  it('are counted once by the backfill of `herald retention apply`, whatever their state, and again changes nothing', async () => {
    const keys = stack.web.store.keys;
    // Redis as the earlier version left it: the created index, no counters, no statsHour.
    await rebuildLegacyIndex();
    const old = await expected();
    for (const shard of keys.allShards()) await redis.del(keys.stats(shard));
    for (const id of ids) await redis.hdel(keys.notice(id), 'statsHour');
    await redis.del(keys.statsBackfilled);
    expect((await statsNow()).notices).toBe(0);

    expect(await retentionApply()).toMatch(new RegExp(`Counted ${ids.length} notices of earlier versions`));
    expect(await statsNow()).toEqual(old);
    expect(await redis.get(keys.statsBackfilled)).not.toBeNull();
    expect(await retentionApply()).toMatch(/Counted 0 notices of earlier versions/);
    expect(await statsNow()).toEqual(old);
    // Retired notices' members are counted and gone; notices still in Redis stay for indexUnretired.
    for (const shard of keys.allShards())
      for (const member of await redis.zrange(keys.created(shard), 0, '-1')) expect(member).not.toContain(' ');
  });

  it('stay exact as they move on after the backfill (fallback, SMS, retirement)', async () => {
    worker = await startWorker(stack.config, { logger: silent });
    for (const id of later) {
      await waitFor(
        async () =>
          (await gone(id)()) ||
          ['sms_sent', 'sms_delivered', 'sms_failed'].includes((await redis.hget(stack.web.store.keys.notice(id), 'state')) ?? ''),
        60_000,
        `notice ${id} to fall back`,
      );
    }
    await worker.close();
    worker = undefined;
    await rebuildLegacyIndex();
    const old = await expected();
    expect(old.fallbackByReason.email_bounced).toBe(2);
    expect(old.fallbackByReason.email_deadline_elapsed).toBe(3); // the blocked notice's too
    expect(await statsNow()).toEqual(old);
  }, 90_000);
});

describe('counters older than HERALD_STATS_RETENTION', () => {
  it('are dropped by the retire sweep, at most once an hour, the hours within it kept', async () => {
    const keys = stack.web.store.keys;
    const shard = 15;
    // A minute into this hour, so that a minute later is still within it (the sweep's mark is by hour).
    const now = Math.floor(Date.now() / STATS_HOUR_MS) * STATS_HOUR_MS + 60_000;
    const retentionMs = 2 * 86_400_000;
    const hour = (at: number) => Math.floor(at / STATS_HOUR_MS);
    const key = keys.stats(shard);
    const before = await redis.hgetall(key);
    // A long-lived notice can add to an hour long gone: that counter goes too.
    await redis.hset(key, `${hour(now - retentionMs) - 1}|state|email_sent`, 3, `${hour(now - 90 * 86_400_000)}|checks|email`, 1);
    await redis.hset(key, `${hour(now - retentionMs) + 1}|state|blocked`, 2);
    expect(await pruneStats(redis, keys, shard, now, retentionMs)).toBe(2);
    const { prunedUpTo: _mark, ...kept } = before;
    const { prunedUpTo, ...after } = await redis.hgetall(key);
    expect(after).toEqual({ ...kept, [`${hour(now - retentionMs) + 1}|state|blocked`]: '2' });
    expect(prunedUpTo).toBe(String(hour(now - retentionMs)));
    // Within the same hour the sweep only reads its mark.
    await redis.hset(key, `${hour(now - retentionMs) - 5}|state|canceled`, 1);
    expect(await pruneStats(redis, keys, shard, now + 60_000, retentionMs)).toBe(0);
    expect(await pruneStats(redis, keys, shard, now + STATS_HOUR_MS, retentionMs)).toBe(1);
  });
});
