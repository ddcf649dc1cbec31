import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { iso } from '../../src/clock.js';
import { Keyring } from '../../src/crypto.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { sealContent } from '../../src/store/content.js';
import { createLogger } from '../../src/logger.js';
import { NoticeStore } from '../../src/store/notices.js';
import { startWorker, type WorkerHandle } from '../../src/worker.js';
import { entryOf, type AnyEntry as StoredEntry } from '../helpers/entries.js';
import { deleteKeys, plainRedis, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { tempDir } from '../helpers/archive.js';
import { storedNoticeFields } from '../helpers/notices.js';

const newKey = () => randomBytes(32).toString('base64');
const current = { id: 'k2', key: newKey() };
const previous = { id: 'k1', key: newKey() };
const SECRET = { subject: 'Quarterly-terms-7Q', text: 'Body-text-that-must-stay-private', sms: 'Sms-text-private-42' };

let stack: Stack;
let dir: Awaited<ReturnType<typeof tempDir>>;
const redis = plainRedis();

beforeAll(async () => {
  dir = await tempDir('content');
  stack = await startStack({
    prefix: testPrefix('content'),
    env: {
      HERALD_ARCHIVE_URL: `file://${dir.path}`,
      HERALD_CONTENT_TTL: '4s',
      // The content outlives its TTL until the notice no longer needs it: here, once it finished and retired.
      HERALD_NOTICE_KEEP_HOT: '0s',
      HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
      HERALD_MIRROR_INTERVAL_MS: '200',
      HERALD_ENCRYPTION_KEY: `${current.id}:${current.key},${previous.id}:${previous.key}`,
    },
  });
});
afterAll(async () => {
  await stack.close();
  await redis.quit();
  await dir.remove();
});

describe('message content', () => {
  let id: string;

  it('is encrypted at rest with the first key: Redis holds no plain text, and the worker still sends it', async () => {
    id = await stack.createNotice(
      noticeBody({ recipient: { id: 'p-secret', email: 'delivered+200ms@example.com' }, content: SECRET, deadlineInSeconds: 6 }),
    );
    const stored = JSON.parse((await redis.get(stack.web.store.keys.content(id)))!) as Record<string, string>;
    expect(Object.keys(stored).sort()).toEqual(['ct', 'iv', 'kid']);
    expect(stored.kid).toBe(current.id);
    const dump = JSON.stringify(stored) + Buffer.from(stored.ct!, 'base64').toString('latin1');
    for (const text of Object.values(SECRET)) expect(dump).not.toContain(text);

    await stack.waitForState(id, ['email_delivered']);
    expect(stack.sandbox.emails().find((e) => e.subject === SECRET.subject)).toBeDefined();
  });

  it('is gone once the finished notice no longer needs it, recorded once as content.purged, while the trail remains', async () => {
    const events = await waitFor(
      async () => {
        const trail = await stack.events(id);
        return trail.some((e) => e.type === 'content.purged') ? trail : undefined;
      },
      20_000,
      'content.purged',
    );
    expect(await redis.exists(stack.web.store.keys.content(id))).toBe(0);
    expect(events.filter((e) => e.type === 'content.purged')).toHaveLength(1);
    const purged = events.find((e) => e.type === 'content.purged')!;
    const accepted = events.find((e) => e.type === 'notice.accepted')!;
    expect(Date.parse(String(purged.purgedAt))).toBeGreaterThanOrEqual(Date.parse(accepted.at));
    expect(accepted.contentSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining(['notice.accepted', 'email.requested', 'email.accepted', 'notice.completed']),
    );
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  });
});

describe('content that expires while its notice runs', () => {
  it('is recorded once as content.purged by the sweep, the notice left as it was', async () => {
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'p-expiring', email: 'never@example.com' }, deadlineInSeconds: 600 }),
    );
    await stack.waitForState(id, ['email_sent']);
    // Redis's PEXPIRE is the safety net: the sweep finds the content gone at its indexed time.
    await redis.pexpire(stack.web.store.keys.content(id), 1);
    const events = await waitFor(
      async () => {
        const trail = await stack.events(id);
        return trail.some((e) => e.type === 'content.purged') ? trail : undefined;
      },
      20_000,
      'content.purged',
    );
    expect(events.filter((e) => e.type === 'content.purged')).toHaveLength(1);
    expect((await stack.view(id)).state).toBe('email_sent');
  });
});

describe('content of a notice that has nothing more to send, with HERALD_CONTENT_TTL=3s and deadlines minutes away', () => {
  const TTL_MS = 3000;
  let ttl: Stack;
  let worker: WorkerHandle;
  let canceled: string;

  beforeAll(async () => {
    ttl = await startStack({
      prefix: testPrefix('content-ttl'),
      inProcessWorker: false,
      env: {
        HERALD_CONTENT_TTL: '3s',
        // Retirement (which purges what is left) is an hour away: only the TTL can take the content.
        HERALD_NOTICE_KEEP_HOT: '1h',
        HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
        HERALD_MIRROR_INTERVAL_MS: '200',
      },
    });
    // Canceled before any worker runs, so that nothing has been handed to a provider.
    canceled = await ttl.createNotice(noticeBody({ recipient: { id: 'p-canceled', email: 'never@example.com' }, deadlineInSeconds: 600 }));
    expect((await ttl.web.call('POST', `/v1/notices/${canceled}/cancel`)).statusCode).toBe(200);
    worker = await startWorker(ttl.config, { logger: createLogger('herald-test-worker', 'silent') });
  });
  afterAll(async () => {
    await worker?.close();
    await ttl?.close();
  });

  /** The notice's trail once it records `content.purged` (a bounded wait for that state). */
  const purgedTrail = (id: string) =>
    waitFor(
      async () => {
        const trail = await ttl.events(id);
        return trail.some((e) => e.type === 'content.purged') ? trail : undefined;
      },
      20_000,
      `content.purged of ${id}`,
    );
  const entry = (trail: StoredEntry[], type: string) => trail.find((e) => e.type === type)!;

  /** Gone from Redis, recorded once, not before the TTL, while the notice itself stays in Redis. */
  async function expectPurgedAtTheTtl(id: string, state: string): Promise<StoredEntry[]> {
    const trail = await purgedTrail(id);
    expect(await redis.exists(ttl.web.store.keys.content(id))).toBe(0);
    expect(trail.filter((e) => e.type === 'content.purged')).toHaveLength(1);
    const createdAt = Date.parse(entry(trail, 'notice.accepted').at);
    expect(Date.parse(String(entry(trail, 'content.purged').purgedAt))).toBeGreaterThanOrEqual(createdAt + TTL_MS);
    expect((await ttl.view(id)).state).toBe(state);
    expect(await redis.exists(ttl.web.store.keys.notice(id))).toBe(1);
    return trail;
  }

  it('delivered within a second: the content is deleted at the TTL, not kept for the SMS plan', async () => {
    const id = await ttl.createNotice(
      noticeBody({
        recipient: { id: 'p-fast', email: 'delivered+200ms@example.com', phone: '+12025550100' },
        deadlineInSeconds: 600,
        // The first check a second after the send finds the email delivered.
        policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 60 },
      }),
    );
    await ttl.waitForState(id, ['email_delivered']);
    const trail = await expectPurgedAtTheTtl(id, 'email_delivered');
    // notice.accepted had promised it for the deadline, an hour of slack and the SMS plan.
    expect(Date.parse(String(entry(trail, 'notice.accepted').contentExpiresAt))).toBeGreaterThan(
      Date.parse(entry(trail, 'notice.accepted').deadline as string),
    );
  });

  it('blocked (the email refused, no phone to fall back to): likewise', async () => {
    const id = await ttl.createNotice(
      noticeBody({ recipient: { id: 'p-blocked', email: 'rejected@example.com' }, deadlineInSeconds: 600 }),
    );
    await ttl.waitForState(id, ['blocked']);
    await expectPurgedAtTheTtl(id, 'blocked');
  });

  it('canceled through the API: likewise', async () => {
    await expectPurgedAtTheTtl(canceled, 'canceled');
  });

  it('with its fallback SMS still to send: kept past the TTL until the SMS is sent and nothing more needs it, then deleted at once', async () => {
    const phone = '+12025550200';
    const sms = 'Sms-body-kept-for-the-fallback';
    const id = await ttl.createNotice(
      noticeBody({
        recipient: { id: 'p-fallback', email: 'never@example.com', phone },
        content: { subject: 'Terms update', text: 'The terms change.', sms },
        // Past the TTL: the deadline is never early, so the SMS leaves after the TTL has passed.
        deadlineInSeconds: 5,
      }),
    );
    await ttl.waitForState(id, ['sms_delivered']);
    const trail = await purgedTrail(id);
    // The SMS went out with the content, read after the TTL had passed.
    expect(
      ttl.sandbox
        .sms()
        .filter((m) => m.to === phone)
        .map((m) => m.body),
    ).toEqual([sms]);
    const createdAt = Date.parse(entry(trail, 'notice.accepted').at);
    expect(Date.parse(entry(trail, 'sms.requested').at)).toBeGreaterThanOrEqual(createdAt + TTL_MS);
    // Once it was delivered nothing needed the content: its TTL long gone, it went at the completion.
    const completedAt = Date.parse(entry(trail, 'notice.completed').at);
    expect(Date.parse(String(entry(trail, 'content.purged').purgedAt))).toBeGreaterThanOrEqual(completedAt);
    expect(await redis.exists(ttl.web.store.keys.content(id))).toBe(0);
    expect(trail.filter((e) => e.type === 'content.purged')).toHaveLength(1);
  });
});

describe('content keys', () => {
  const prefix = testPrefix('keys');
  afterAll(() => deleteKeys(redis, prefix));

  async function storeSealed(keyring: Keyring): Promise<string> {
    const now = Date.now();
    const id = newNoticeId(7, now);
    await new NoticeStore(redis, prefix).create({
      id,
      createdAt: now,
      fields: storedNoticeFields(id, now, { deadlineInMs: 60_000 }),
      content: sealContent(keyring, id, SECRET),
      entries: [entryOf('notice.accepted')],
      at: iso(now),
      due: now,
      contentTtlMs: 60_000,
    });
    return id;
  }

  it('rotate: content sealed with the previous key still opens while that key is listed after the new one', async () => {
    const id = await storeSealed(new Keyring([previous]));
    expect(await new NoticeStore(redis, prefix, { keyring: new Keyring([current, previous]) }).content(id)).toEqual(SECRET);
    await expect(new NoticeStore(redis, prefix, { keyring: new Keyring([current]) }).content(id)).rejects.toThrow(/"k1"/);
    await expect(new NoticeStore(redis, prefix).content(id)).rejects.toThrow(/HERALD_ENCRYPTION_KEY/);
  });

  it('bind each ciphertext to its notice: copied onto another notice it does not open', async () => {
    const keyring = new Keyring([current]);
    const [a, b] = [await storeSealed(keyring), await storeSealed(keyring)];
    const store = new NoticeStore(redis, prefix, { keyring });
    const copied = await redis.get(store.keys.content(a));
    await redis.set(store.keys.content(b), copied!);
    await expect(store.content(b)).rejects.toThrow();
  });

  it('still opens content stored by earlier versions, as a hash of the same fields', async () => {
    const keyring = new Keyring([current]);
    const id = await storeSealed(keyring);
    const store = new NoticeStore(redis, prefix, { keyring });
    const key = store.keys.content(id);
    const sealed = JSON.parse((await redis.get(key))!) as Record<string, string>;
    await redis.del(key);
    await redis.hset(key, sealed);
    expect(await store.content(id)).toEqual(SECRET);
    // Read along with its notice (a run of the notice's job), whose string read meets the hash.
    expect(await store.content(id, (await store.getWithContent(id)).content)).toEqual(SECRET);
  });

  it('opens content read along with its notice as the content read alone', async () => {
    const keyring = new Keyring([current]);
    const id = await storeSealed(keyring);
    const store = new NoticeStore(redis, prefix, { keyring });
    const read = await store.getWithContent(id);
    expect(read.notice?.id).toBe(id);
    expect(await store.content(id, read.content)).toEqual(SECRET);
    await redis.del(store.keys.content(id));
    expect(await store.content(id, (await store.getWithContent(id)).content)).toBeNull();
  });
});
