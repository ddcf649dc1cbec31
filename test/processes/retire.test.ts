import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive, ArchiveIntegrityError } from '../../src/archive/archive.js';
import { createFileStorage } from '../../src/archive/file-storage.js';
import { retireNoticesOnce } from '../../src/retention/retire.js';
import { RetireIndex } from '../../src/store/retention-indexes.js';
import { recordKey } from '../../src/archive/records.js';
import { runCli } from '../../src/cli.js';
import { systemClock } from '../../src/clock.js';
import { noticeCreatedAt } from '../../src/notice/ids.js';
import { NoticeStore, type StoredEntry } from '../../src/store/notices.js';
import { openArchive } from '../../src/archive/open.js';
import { startWeb } from '../../src/server.js';
import { deleteKeys, plainRedis, TEST_API_KEY, testAddressLookup, testConfig, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody, startWebUnderTest } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { finishedNotice as finishedNoticeIn, mirrorFor, silent, tempDir } from '../helpers/archive.js';

const redis = plainRedis();
const ADMIN_TOKEN = 'retire-admin-token-0123';
afterAll(async () => {
  await redis.quit();
});

describe('a finished notice leaves Redis for the archive', () => {
  let stack: Stack;
  let dir: Awaited<ReturnType<typeof tempDir>>;
  let id: string;
  let viewBefore: unknown;
  let eventsBefore: StoredEntry[];
  const body = noticeBody({
    recipient: { id: 'p-retire', email: 'delivered+200ms@example.com' },
    deadlineInSeconds: 6,
    policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 2 },
  });
  const idempotency = { 'idempotency-key': 'retire-test-1' };

  beforeAll(async () => {
    dir = await tempDir('retire');
    stack = await startStack({
      prefix: testPrefix('retire'),
      env: {
        HERALD_ARCHIVE_URL: `file://${dir.path}`,
        HERALD_NOTICE_KEEP_HOT: '1s',
        HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
        HERALD_MIRROR_INTERVAL_MS: '200',
        HERALD_ADMIN_TOKEN: ADMIN_TOKEN,
        // Four SMS checks (0.2, 0.6, 1.4 and 3 s after the SMS is accepted), so that a plan runs out soon.
        HERALD_MAX_CHECKS_PER_NOTICE: '4',
      },
    });
    id = await stack.createNotice(body, idempotency);
    await stack.waitForState(id, ['email_delivered']);
    // Read while Redis still holds it (the keep-hot second has only begun).
    viewBefore = await stack.view(id);
    eventsBefore = await stack.events(id);
  });
  afterAll(async () => {
    await stack.close();
    await dir.remove();
  });

  it('is let go by Redis once its record and every entry are in the archive, content purged first', async () => {
    const keys = stack.web.store.keys;
    await waitFor(async () => (await redis.exists(keys.notice(id))) === 0, 20_000, 'the notice hash to leave Redis');
    expect(await redis.exists(keys.events(id), keys.content(id))).toBe(0);
    const shard = Number.parseInt(id.slice(4, 6), 16);
    expect(await redis.zscore(keys.retire(shard), id)).toBeNull();
    expect(await redis.zscore(keys.contentExpiry(shard), id)).toBeNull();
    // Its /v1/stats counters stay; the `created` index of earlier versions is no longer written.
    expect(await redis.zscore(keys.created(shard), id)).toBeNull();
    const hour = Math.floor(noticeCreatedAt(id)! / 3_600_000);
    // One check finds the email delivered, unless a loaded machine sent it late: count its own.
    const checks = eventsBefore.filter((e) => e.type === 'email.observed').length;
    expect(await redis.hmget(keys.stats(shard), `${hour}|state|email_delivered`, `${hour}|checks|email`, `${hour}|sent|email`)).toEqual([
      '1',
      String(checks),
      '1',
    ]);
    expect(existsSync(join(dir.path, recordKey(stack.config.prefix, id)))).toBe(true);
  });

  it('reads the same afterwards: view, trail (with content.purged), idempotent replay, stats', async () => {
    expect(await stack.view(id)).toEqual(viewBefore);

    const events = await stack.events(id);
    expect(events.slice(0, eventsBefore.length)).toEqual(eventsBefore);
    expect(events.slice(eventsBefore.length).map((e) => e.type)).toEqual(['content.purged']);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));

    const replay = await stack.web.call('POST', '/v1/notices', body, idempotency);
    expect(replay.statusCode).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(viewBefore);

    const timeline = await stack.web.call('GET', `/admin/notices/${id}`, undefined, { authorization: `Bearer ${ADMIN_TOKEN}` });
    expect(timeline.statusCode).toBe(200);
    expect(timeline.body).toContain('email_delivered');
    expect(timeline.body).toContain('content.purged');

    const metrics = (await stack.web.call('GET', '/metrics')).body;
    expect(metrics).toMatch(/^herald_notices_retired_total 1$/m);
    expect(metrics).toMatch(/^herald_notices_awaiting_retirement 0$/m);

    const stats = await stack.web.call('GET', '/v1/stats');
    expect(stats.statusCode).toBe(200);
    const checks = eventsBefore.filter((e) => e.type === 'email.observed').length;
    expect(stats.json()).toMatchObject({ notices: 1, byState: { email_delivered: 1 }, fallbackRate: 0, checksPerNotice: checks });
  });

  it('answers 400 for a stats period older than HERALD_STATS_RETENTION', async () => {
    const from = new Date(Date.now() - 32 * 86_400_000).toISOString();
    const to = new Date(Date.now() - 31.5 * 86_400_000).toISOString();
    const res = await stack.web.call('GET', `/v1/stats?from=${from}&to=${to}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'validation_failed', details: [{ path: 'querystring.from' }] });
  });

  it('cannot be canceled: 409 invalid_state with its final state', async () => {
    const res = await stack.web.call('POST', `/v1/notices/${id}/cancel`);
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'invalid_state', details: { state: 'email_delivered' } });
  });

  it('is audited by `herald audit` from its record and the archived log', async () => {
    let stdout = '';
    const out = new Writable({
      write(chunk: Buffer, _encoding, done) {
        stdout += chunk.toString();
        done();
      },
    });
    const code = await runCli(['audit', id, '--json'], {
      stdout: out,
      stderr: new Writable({ write: (_c, _e, done) => done() }),
      env: stack.env,
      now: Date.now,
    });
    expect(code).toBe(0);
    const lines = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as StoredEntry);
    expect(lines).toEqual(await stack.events(id));
  });

  it('leaves Redis too when its SMS checks run out without a final status (sms.unconfirmed), still sms_sent', async () => {
    // 05: the SMS stays `sent`; 07: its status reads never answer (each check times out).
    const stuck = async (phone: string) =>
      stack.createNotice(
        noticeBody({
          recipient: { id: `p-stuck-${phone.slice(-2)}`, email: 'never@example.com', phone },
          deadlineInSeconds: 2,
          policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 1 },
        }),
      );
    const [sent, hanging] = await Promise.all([stuck('+12025550105'), stuck('+12025550107')]);
    for (const [id, phone] of [
      [sent, '+12025550105'],
      [hanging, '+12025550107'],
    ] as const) {
      await waitFor(
        async () => (await redis.exists(stack.web.store.keys.notice(id))) === 0,
        30_000,
        `the unconfirmed notice ${phone} to leave Redis`,
      );
      expect(stack.smsTo(phone)).toBe(1);
      expect(await stack.view(id)).toMatchObject({ id, state: 'sms_sent', fallback: { reason: 'email_deadline_elapsed' } });
      const events = await stack.events(id);
      expect(events.filter((e) => e.type === 'sms.unconfirmed')).toHaveLength(1);
      expect(events.map((e) => e.type)).not.toContain('notice.completed');
      expect(events.at(-1)!.type).toBe('content.purged');
    }
    const unconfirmed = async (id: string) => (await stack.events(id)).find((e) => e.type === 'sms.unconfirmed');
    // Four checks observed `sent`; four that timed out observed nothing, and each is a provider.error.
    expect(await unconfirmed(sent)).toMatchObject({ reason: 'sms_plan_ended', checks: 4 });
    expect(await unconfirmed(hanging)).toMatchObject({ reason: 'sms_plan_ended', checks: 0 });
    const hangingEvents = await stack.events(hanging);
    expect(hangingEvents.filter((e) => e.type === 'provider.error' && e.channel === 'sms')).toHaveLength(4);
  });

  // The web processes below are of the same deployment as the stack: its HERALD_NOTICE_KEEP_HOT
  // tells them how soon a notice may have retired.
  it('answers 503 unavailable while the archive that holds it cannot be reached', async () => {
    const blind = await startWebUnderTest(
      testConfig(stack.config.prefix, { HERALD_ARCHIVE_URL: 'file:///dev/null/herald-archive', HERALD_NOTICE_KEEP_HOT: '1s' }),
    );
    try {
      for (const url of [`/v1/notices/${id}`, `/v1/notices/${id}/events`]) {
        const res = await blind.call('GET', url);
        expect(res.statusCode).toBe(503);
        expect(res.json().error.code).toBe('unavailable');
      }
    } finally {
      await blind.close();
    }
  });

  it('has an audit timeline that answers 503 unavailable, not 500, while the archive cannot be reached', async () => {
    const blind = await startWebUnderTest(
      testConfig(stack.config.prefix, {
        HERALD_ARCHIVE_URL: 'file:///dev/null/herald-archive',
        HERALD_ADMIN_TOKEN: ADMIN_TOKEN,
        HERALD_NOTICE_KEEP_HOT: '1s',
      }),
    );
    try {
      const res = await blind.call('GET', `/admin/notices/${id}`, undefined, { authorization: `Bearer ${ADMIN_TOKEN}` });
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('cannot be reached') });
    } finally {
      await blind.close();
    }
  });

  it('is read through the archive a worker in the same process opened, which the web leaves open (npm start)', async () => {
    const shared = openArchive(stack.config, redis);
    // Its own archive URL leads nowhere: only the archive handed to it can answer.
    const web = await startWeb(
      testConfig(stack.config.prefix, { HERALD_ARCHIVE_URL: 'file:///dev/null/herald-archive', HERALD_NOTICE_KEEP_HOT: '1s' }),
      { archive: shared },
    );
    try {
      const res = await fetch(`${web.url}/v1/notices/${id}`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(viewBefore);
    } finally {
      await web.close();
    }
    expect((await shared.readRecord(id))?.view).toEqual(viewBefore);
    await shared.close();
  });

  it('is gone once the audit retention deletes its record: 404', async () => {
    const archive = new Archive(createFileStorage(dir.path), stack.config.prefix);
    const { objects } = await archive.deleteOlderThan(Date.now() + 3_600_000);
    expect(objects).toBeGreaterThan(1); // the record and the log's batch objects
    const res = await stack.web.call('GET', `/v1/notices/${id}`);
    expect(res.statusCode).toBe(404);
    await archive.close();
  });
});

describe('the retire sweep', () => {
  const prefix = testPrefix('retire-sweep');
  const store = new NoticeStore(redis, prefix);
  let dir: Awaited<ReturnType<typeof tempDir>>;
  let archive: Archive;

  beforeAll(async () => {
    dir = await tempDir('retire-sweep');
    archive = new Archive(createFileStorage(dir.path), prefix);
  });
  afterAll(async () => {
    await archive.close();
    await deleteKeys(redis, prefix);
    await dir.remove();
  });

  const finishedNotice = (shard: number, now: number) => finishedNoticeIn(store, shard, now);

  it('keeps a finished notice in Redis while the archive lacks any of its entries', async () => {
    const now = Date.now();
    const shard = 3;
    const id = await finishedNotice(shard, now);
    await new RetireIndex(redis, store.keys).add(shard, [{ noticeId: id, at: now }]);
    const statsRetentionMs = 31 * 86_400_000;
    const sweep = () =>
      retireNoticesOnce({
        redis,
        store,
        archive,
        clock: systemClock,
        log: silent,
        retryMs: 0,
        statsRetentionMs,
        addressLookup: testAddressLookup,
      });
    // A `created` member older than the stats retention, which the sweep drops.
    await redis.zadd(store.keys.created(shard), now - statsRetentionMs - 1000, 'ntc_03old');

    // First the content goes (its entry must reach the archive too), then the sweep waits for the mirror.
    expect(await sweep()).toEqual({ retired: 0, waiting: 1 });
    expect(await redis.exists(store.keys.content(id))).toBe(0);
    expect(await sweep()).toEqual({ retired: 0, waiting: 1 });
    expect(await redis.exists(store.keys.notice(id))).toBe(1);
    expect(await archive.readRecord(id)).toBeNull();

    await mirrorFor({ redis, store, archive, consumer: 'retire-test' }).mirrorOnce([shard]);
    // An archive out of reach keeps everything in Redis.
    const blind = new Archive(createFileStorage('/dev/null/herald-archive'), prefix);
    expect(
      await retireNoticesOnce({
        redis,
        store,
        archive: blind,
        clock: systemClock,
        log: silent,
        retryMs: 0,
        statsRetentionMs,
        addressLookup: testAddressLookup,
      }),
    ).toEqual({
      retired: 0,
      waiting: 1,
      archiveUnreachable: true,
    });
    expect(await redis.exists(store.keys.notice(id))).toBe(1);
    expect(await sweep()).toEqual({ retired: 1, waiting: 0 });
    expect(await redis.exists(store.keys.notice(id), store.keys.events(id))).toBe(0);
    const record = await archive.readRecord(id);
    expect(record?.view.state).toBe('canceled');
    expect(record?.entryIds).toHaveLength(3);
    const found = await archive.findEntries(shard, record!.entryIds);
    expect(record!.entryIds.map((entryId) => found.get(entryId)?.type)).toEqual(['notice.accepted', 'notice.completed', 'content.purged']);

    // Once more (a crash before the index was cleared): nothing left to do.
    await new RetireIndex(redis, store.keys).add(shard, [{ noticeId: id, at: now }]);
    expect(await sweep()).toEqual({ retired: 0, waiting: 0 });
    expect(await redis.zcard(store.keys.retire(shard))).toBe(0);
    expect(await redis.zrange(store.keys.created(shard), 0, '-1')).toEqual([]);

    // A record whose bytes no longer match its SHA-256 is refused, never read.
    await writeFile(join(dir.path, recordKey(prefix, id)), gzipSync('{"id":"forged"}'));
    await expect(archive.readRecord(id)).rejects.toThrow(ArchiveIntegrityError);
  });

  it('replaces a record written before a crash or a late entry with the notice as it is when it leaves', async () => {
    const now = Date.now();
    const id = await finishedNotice(9, now);
    await new RetireIndex(redis, store.keys).add(9, [{ noticeId: id, at: now }]);
    const sweep = () =>
      retireNoticesOnce({
        redis,
        store,
        archive,
        clock: systemClock,
        log: silent,
        retryMs: 0,
        statsRetentionMs: 31 * 86_400_000,
        addressLookup: testAddressLookup,
      });
    expect(await sweep()).toEqual({ retired: 0, waiting: 1 }); // content purged
    await mirrorFor({ redis, store, archive, consumer: 'retire-test' }).mirrorOnce([9]);
    // What a sweep that stopped after its upload, before content.purged was written, left behind.
    const entryIds = await redis.lrange(store.keys.events(id), 0, -1);
    const stale = { id, view: { state: 'stale' } as never, entryIds: entryIds.slice(0, -1), stats: {} as never };
    await archive.putRecord(stale);

    expect(await sweep()).toEqual({ retired: 1, waiting: 0 });
    const record = await archive.readRecord(id);
    expect(record?.entryIds).toEqual(entryIds);
    expect(record?.view.state).toBe('canceled');
  });

  it('finds, with `herald retention apply`, finished notices an earlier version left unindexed', async () => {
    const now = Date.now();
    const id = await finishedNotice(5, now);
    // As an earlier version left it: in the shard's `created` index, not in the stats counters.
    await redis.zadd(store.keys.created(5), now, id);
    await redis.hdel(store.keys.notice(id), 'statsHour');
    const env = {
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      HERALD_PREFIX: prefix,
      HERALD_API_KEYS: 'test-api-key-0123456789',
      HERALD_ARCHIVE_URL: `file://${dir.path}`,
      HERALD_AUDIT_RETENTION: '400d',
    };
    const quiet = () => new Writable({ write: (_chunk, _encoding, done) => done() });
    const run = (args: string[]) => runCli(['retention', 'apply', ...args], { stdout: quiet(), stderr: quiet(), env, now: Date.now });
    expect(await run(['--dry-run'])).toBe(0);
    expect(await redis.zscore(store.keys.retire(5), id)).toBeNull();
    expect(await run([])).toBe(0);
    expect(await redis.zscore(store.keys.retire(5), id)).not.toBeNull();
    // The same command counted it in the /v1/stats counters.
    expect(await redis.hget(store.keys.notice(id), 'statsHour')).toBe(String(Math.floor(now / 3_600_000)));
  });
});
