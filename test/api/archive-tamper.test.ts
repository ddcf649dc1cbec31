import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive, encodeObject } from '../../src/archive/archive.js';
import { MIRROR_GROUP } from '../../src/store/log-mirror.js';
import { idTime, objectKey } from '../../src/archive/names.js';
import { anchorKey } from '../../src/archive/anchor.js';
import { openArchive, openObjectStorage } from '../../src/archive/open.js';
import { encodeRecord, recordKey, type NoticeRecord } from '../../src/archive/records.js';
import { retireNoticesOnce } from '../../src/retention/retire.js';
import { RetireIndex } from '../../src/store/retention-indexes.js';
import { ArchiveKeyring, formatSeal, parseSeal } from '../../src/archive/seal.js';
import { sha256Hex } from '../../src/digest.js';
import type { ObjectStorage } from '../../src/archive/object-storage.js';
import { DAY, systemClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { NoticeStore, type StoredEntry } from '../../src/store/notices.js';
import { deleteKeys, plainRedis, testAddressLookup, testEnv, testPrefix } from '../helpers/env.js';
import { startWebUnderTest } from '../helpers/herald.js';
import { freePort } from '../helpers/redis-server.js';
import {
  archived,
  fileStore,
  finishedNotice,
  killOn,
  mirrorFor,
  runHerald,
  silent,
  startS3,
  tempDir,
  v1Seal,
  writeNotices,
  type S3UnderTest,
} from '../helpers/archive.js';

let redis: Redis;
let s3: S3UnderTest;
let dir: Awaited<ReturnType<typeof tempDir>>;
const prefixes: string[] = [];
const ADMIN_TOKEN = 'tamper-admin-token-0123';
const opened: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  redis = plainRedis();
  [s3, dir] = await Promise.all([startS3(), tempDir('tamper')]);
  // The S3 client's default credential chain, for s3rver.
  process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
});
afterAll(async () => {
  for (const archive of opened) await archive.close();
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await Promise.all([s3.close(), dir.remove()]);
});

/**
 * A Herald of the test's own: its environment (for the CLI and the web app), the archive Herald
 * reads and writes (sealed with HERALD_ARCHIVE_KEY), and `raw`, the same store as whoever can
 * write the bucket sees it: no key.
 */
function setUp(kind: 'file' | 's3', env: Record<string, string> = {}) {
  const prefix = testPrefix('tamper');
  prefixes.push(prefix);
  const location: Record<string, string> =
    kind === 's3'
      ? { HERALD_ARCHIVE_URL: `s3://${s3.bucket}/runs/${prefix}`, S3_ENDPOINT: s3.endpoint }
      : { HERALD_ARCHIVE_URL: `file://${join(dir.path, prefix)}` };
  const herald = testEnv(prefix, { HERALD_AUDIT_RETENTION: '400d', ...location, ...env });
  const config = loadConfig(herald);
  const archive = openArchive(config, redis);
  const raw = openObjectStorage(config);
  opened.push(archive, raw);
  return { prefix, env: herald, config, store: new NoticeStore(redis, prefix), archive, raw, root: join(dir.path, prefix) };
}

const entriesOf = (body: Buffer): StoredEntry[] =>
  gunzipSync(body)
    .toString('utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as StoredEntry);

/**
 * Rewrites an object's entries as someone who can write the archive would: the plain SHA-256
 * recomputed, the seal kept — or, with `resealWith`, sealed again with the key (a writer that
 * holds it: a bug, or a stolen key), so that only the checks of what the entries say remain.
 */
async function rewrite(
  raw: ObjectStorage,
  key: string,
  change: (entries: StoredEntry[]) => StoredEntry[],
  resealWith?: ArchiveKeyring,
): Promise<void> {
  const stored = (await raw.get(key))!;
  const { body, sha256 } = encodeObject(change(entriesOf(stored.body)));
  const seal = resealWith ? formatSeal(resealWith.sealObject(key, sha256, parseSeal(stored.seal)!.prev)) : stored.seal!;
  await raw.put(key, body, sha256, seal);
}

/** The shard's object keys in entry order. */
async function objectKeys(archive: Archive, shard: number): Promise<string[]> {
  const keys: string[] = [];
  for await (const ref of archive.shardObjects(shard)) keys.push(ref.key);
  return keys;
}

/** An object as versions without seals stored it: with its SHA-256 alone (on disk, a `.sha256` file of one line). */
async function putUnsigned(raw: ObjectStorage, key: string, body: Buffer): Promise<void> {
  const root = raw.location.startsWith('file://') ? raw.location.slice('file://'.length) : undefined;
  if (!root) throw new Error('unsigned objects are written here to a file store');
  await mkdir(dirname(join(root, key)), { recursive: true });
  await writeFile(`${join(root, key)}.sha256`, `${sha256Hex(body)}\n`);
  await writeFile(join(root, key), body);
}

const verify = (env: Record<string, string>, shard: number) => runHerald(['audit', '--verify', '--shard', String(shard)], env);

describe.each(['file', 's3'] as const)('the archive chain on the %s store', (kind) => {
  it('links every batch to the one before, through a crash, a reclaim and two mirrors at once, and --verify holds', async () => {
    const { prefix, env, store, archive, raw } = setUp(kind);
    const shard = 3;
    const written = await writeNotices(store, redis, shard, 10);
    const settings = { batchSize: 4 };

    const seen = { batches: [] as string[][] };
    const dying = mirrorFor({ redis, store, archive, consumer: 'a', settings, hooks: { afterUpload: killOn(2, seen) } });
    await expect(dying.mirrorOnce([shard])).rejects.toThrow('killed');
    const crashed = seen.batches[1]!;
    const crashedKey = objectKey(prefix, shard, crashed[0]!, crashed.at(-1)!);
    const uploaded = (await raw.get(crashedKey))!;

    // Two live mirrors go on at once, chaining to the batch the dead one still holds ...
    await Promise.all(['b', 'c'].map((consumer) => mirrorFor({ redis, store, archive, consumer, settings }).mirrorOnce([shard])));
    // ... which a third takes over once its predecessor has left Redis: the same bytes, the same seal.
    const reclaim = await mirrorFor({ redis, store, archive, consumer: 'd', settings: { ...settings, reclaimAfterMs: 0 } }).mirrorOnce([
      shard,
    ]);
    expect(reclaim).toMatchObject({ batches: 1, existed: 1, written: 0 });
    const again = (await raw.get(crashedKey))!;
    expect(again.body).toEqual(uploaded.body);
    expect(again.seal).toBe(uploaded.seal);
    expect(await redis.xlen(store.keys.log(shard))).toBe(0);

    expect(await archived(archive, shard)).toEqual(written);
    const seals = await Promise.all((await objectKeys(archive, shard)).map(async (key) => parseSeal((await raw.get(key))!.seal)!));
    expect(seals[0]!.prev).toBeNull();
    expect(seals.slice(1).every((seal) => seal.prev !== null)).toBe(true);

    const verified = await verify(env, shard);
    expect(verified.stdout).toMatch(new RegExp(`^s03  ok  ${seals.length} objects, 0 records$`, 'm'));
    expect(verified.code).toBe(0);
  });

  it('does not take a link to a batch a dead worker still holds, not stored yet, for a removed object', async () => {
    const { prefix, env, store, archive } = setUp(kind);
    const shard = 11;
    const written = await writeNotices(store, redis, shard, 3);
    const settings = { batchSize: 3 };
    // A worker whose archive fails keeps its batch, and dies.
    const blind = new Archive(fileStore('/dev/null/herald-archive'), prefix);
    expect((await mirrorFor({ redis, store, archive: blind, consumer: 'a', settings }).mirrorOnce([shard])).failures).toBe(1);
    await mirrorFor({ redis, store, archive, consumer: 'b', settings }).mirrorOnce([shard]);

    const meanwhile = await verify(env, shard);
    expect(meanwhile.stdout).toMatch(/^s11  ok  2 objects, 1 linked to batches Redis holds, not archived yet, 0 records$/m);
    expect(meanwhile.code).toBe(0);

    await mirrorFor({ redis, store, archive, consumer: 'c', settings: { ...settings, reclaimAfterMs: 0 } }).mirrorOnce([shard]);
    expect(await archived(archive, shard)).toEqual(written);
    const after = await verify(env, shard);
    expect(after.stdout).toMatch(/^s11  ok  3 objects, 0 records$/m);
    expect(after.code).toBe(0);
  });

  it('refuses an object whose entries were rewritten and its plain SHA-256 recomputed: on read, through the API, in --verify', async () => {
    const { env, config, store, archive, raw } = setUp(kind);
    const shard = 4;
    const written = await writeNotices(store, redis, shard, 2);
    await mirrorFor({ redis, store, archive, consumer: 'w', settings: { batchSize: 3 } }).mirrorOnce([shard]);
    const [first] = await objectKeys(archive, shard);
    const noticeId = written[0]!.noticeId;

    await rewrite(raw, first!, (entries) => entries.map((e) => (e.type === 'email.requested' ? { ...e, provider: 'forged' } : e)));
    await expect(archive.read(first!)).rejects.toThrow('its MAC does not match its name and content');

    const web = await startWebUnderTest(config);
    try {
      const res = await web.call('GET', `/v1/notices/${noticeId}/events`);
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('integrity check') });
      expect(res.body).not.toContain('forged');
    } finally {
      await web.close();
    }

    const verified = await verify(env, shard);
    expect(verified.code).toBe(1);
    expect(verified.stdout).toContain(`s04  BROKEN  ${first}: its MAC does not match its name and content`);
  });

  it('names a removed object: the next one links to it, and the newest is the tip Redis keeps', async () => {
    const { env, store, archive, raw } = setUp(kind);
    const shard = 5;
    await writeNotices(store, redis, shard, 4);
    await mirrorFor({ redis, store, archive, consumer: 'w', settings: { batchSize: 3 } }).mirrorOnce([shard]);
    const keys = await objectKeys(archive, shard);
    expect(keys.length).toBeGreaterThanOrEqual(4);

    const middle = (await raw.get(keys[1]!))!;
    await raw.delete([keys[1]!]);
    const gap = await verify(env, shard);
    expect(gap.code).toBe(1);
    expect(gap.stdout).toContain(`s05  BROKEN  ${keys[2]}: the object before it in the chain, ${keys[1]}, is missing`);

    await raw.put(keys[1]!, middle.body, middle.sha256!, middle.seal!);
    expect((await verify(env, shard)).code).toBe(0);
    const newest = keys.at(-1)!;
    await raw.delete([newest]);
    const cut = await verify(env, shard);
    expect(cut.code).toBe(1);
    expect(cut.stdout).toContain(
      `s05  BROKEN  ${newest}: the newest object the mirror confirmed storing (the chain tip in Redis) is missing`,
    );
  });

  it('detects objects swapped between names, or moved to another name', async () => {
    const { env, store, archive, raw } = setUp(kind);
    const shard = 6;
    await writeNotices(store, redis, shard, 3);
    await mirrorFor({ redis, store, archive, consumer: 'w', settings: { batchSize: 3 } }).mirrorOnce([shard]);
    const [one, two, three] = (await objectKeys(archive, shard)) as [string, string, string];
    const [a, b] = [(await raw.get(one))!, (await raw.get(two))!];

    // Reordered: each object, checksum and seal under the other's name.
    await raw.put(one, b.body, b.sha256!, b.seal!);
    await raw.put(two, a.body, a.sha256!, a.seal!);
    await expect(archive.read(one)).rejects.toThrow('its MAC does not match its name and content');
    expect((await verify(env, shard)).stdout).toContain(`s06  BROKEN  ${one}: its MAC does not match its name and content`);

    // Moved: the second object now sits in another shard's directory.
    await raw.put(one, a.body, a.sha256!, a.seal!);
    await raw.delete([two]);
    const moved = two.replace(`/s06/`, '/s07/');
    await raw.put(moved, b.body, b.sha256!, b.seal!);
    await expect(archive.read(moved)).rejects.toThrow(/MAC does not match|not of shard 7/);
    expect((await verify(env, shard)).stdout).toContain(`s06  BROKEN  ${three}: the object before it in the chain, ${two}, is missing`);
    expect((await verify(env, 7)).code).toBe(1);
  });
});

describe('entries read from the archive', () => {
  it('are refused when a signed object holds an entry of another notice under the ID asked for', async () => {
    const { config, store, archive, raw } = setUp('file', { HERALD_ADMIN_TOKEN: ADMIN_TOKEN });
    const shard = 6;
    const written = await writeNotices(store, redis, shard, 2);
    await mirrorFor({ redis, store, archive, consumer: 'w', settings: { batchSize: 3 } }).mirrorOnce([shard]);
    const [first] = await objectKeys(archive, shard);
    const [mine, other] = [written[0]!.noticeId, written[3]!.noticeId];

    await rewrite(
      raw,
      first!,
      (entries) => entries.map((e) => (e.type === 'email.requested' ? { ...e, noticeId: other } : e)),
      archive.keys,
    );
    await expect(archive.findEntries(shard, [written[2]!.id], { noticeId: mine })).rejects.toThrow(
      `entry ${written[2]!.id} belongs to ${other}, not to ${mine}`,
    );
    const web = await startWebUnderTest(config);
    try {
      expect((await web.call('GET', `/v1/notices/${mine}/events`)).statusCode).toBe(503);
      // The audit timeline reads the same trail: 503 too, never a 500 or the forged entry.
      const timeline = await web.call('GET', `/admin/notices/${mine}`, undefined, { authorization: `Bearer ${ADMIN_TOKEN}` });
      expect(timeline.statusCode).toBe(503);
      expect(timeline.json().error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('integrity check') });
    } finally {
      await web.close();
    }

    // An entry of a notice of another shard has no place in this shard's object at all.
    const stranger = newNoticeId(9, Date.now());
    await rewrite(raw, first!, (entries) => entries.map((e, i) => (i === 1 ? { ...e, noticeId: stranger } : e)), archive.keys);
    await expect(archive.read(first!)).rejects.toThrow(`is of ${stranger}, not of shard 6`);
  });

  it('refuses a planted gzip bomb by its seal, before decompressing it; the API answers 503', async () => {
    const { prefix, config, store, archive, raw } = setUp('file');
    // A cap far below the bomb: decompressing it at all would end in the cap's error instead.
    const capped = new Archive(raw, prefix, { maxObjectBytes: 1 << 20, maxRecordBytes: 1 << 20 });
    const bomb = gzipSync(Buffer.alloc(64 << 20));
    const forged = `v2 dev - ${'0'.repeat(64)}`;
    const now = Date.now();
    const key = objectKey(prefix, 1, `${now}-0`, `${now}-9`);
    await raw.put(key, bomb, sha256Hex(bomb), forged);
    await expect(capped.read(key)).rejects.toThrow(`${key}: its MAC does not match its name and content`);
    const noticeId = newNoticeId(1, now);
    await raw.put(recordKey(prefix, noticeId), bomb, sha256Hex(bomb), forged);
    await expect(capped.readRecord(noticeId)).rejects.toThrow('its MAC does not match its name and content');

    // Planted in place of a real object of a trail, under that object's own seal, as a writer of the bucket would.
    const shard = 9;
    const written = await writeNotices(store, redis, shard, 1);
    await mirrorFor({ redis, store, archive, consumer: 'w', settings: { batchSize: 3 } }).mirrorOnce([shard]);
    expect(await redis.xlen(store.keys.log(shard))).toBe(0);
    const [first] = await objectKeys(archive, shard);
    const real = (await raw.get(first!))!;
    await raw.put(first!, bomb, sha256Hex(bomb), real.seal!);
    await expect(capped.read(first!)).rejects.toThrow(`${first}: its MAC does not match its name and content`);
    const web = await startWebUnderTest(config);
    try {
      const res = await web.call('GET', `/v1/notices/${written[0]!.noticeId}/events`);
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('integrity check') });
    } finally {
      await web.close();
    }
  });

  it('refuses a gzip bomb without inflating it past the cap, where its shard admits an unsigned or v1-sealed one', async () => {
    const { prefix, raw } = setUp('file');
    const capped = new Archive(raw, prefix, { maxObjectBytes: 1 << 20, maxRecordBytes: 1 << 20 });
    const bomb = gzipSync(Buffer.alloc(16 << 20));
    expect(bomb.length).toBeLessThan(1 << 20);
    const now = Date.now();
    // The shard's chain began after these objects and records, and sealed with v1 until after them.
    await capped.putAnchor(1, { genesisFirstId: `${now + 10}-0`, sinceMs: now + 10, v1ThroughId: `${now + 20}-0`, v2SinceMs: now + 20 });
    const unsigned = objectKey(prefix, 1, `${now}-0`, `${now}-9`);
    await putUnsigned(raw, unsigned, bomb);
    await expect(capped.read(unsigned)).rejects.toThrow(`it decompresses to more than ${1 << 20} bytes; refused`);
    const v1 = objectKey(prefix, 1, `${now + 1}-0`, `${now + 1}-9`);
    await raw.put(v1, bomb, sha256Hex(bomb), `v1 dev - ${'0'.repeat(64)}`);
    await expect(capped.read(v1)).rejects.toThrow(`it decompresses to more than ${1 << 20} bytes; refused`);

    const noticeId = newNoticeId(1, now);
    await raw.put(recordKey(prefix, noticeId), bomb, sha256Hex(bomb), `v1 dev - ${'0'.repeat(64)}`);
    await expect(capped.readRecord(noticeId)).rejects.toThrow('decompresses to more than');
  });

  it('refuses an unsigned or v1-sealed bomb before decompressing it where its shard does not admit one, or has no anchor', async () => {
    const { prefix, raw } = setUp('file');
    // No cap stands in the way: only what comes before decompressing refuses these.
    const archive = new Archive(raw, prefix);
    const bomb = gzipSync(Buffer.alloc(64 << 20));
    const now = Date.now();
    const fake = `v1 dev - ${'0'.repeat(64)}`;
    await archive.putAnchor(2, { genesisFirstId: `${now - 10}-0`, sinceMs: now - 10, v1ThroughId: `${now - 5}-0`, v2SinceMs: now - 5 });
    const unsigned = objectKey(prefix, 2, `${now}-0`, `${now}-9`);
    await putUnsigned(raw, unsigned, bomb);
    await expect(archive.read(unsigned)).rejects.toThrow(`it has no seal, though its shard's chain began before it (at ${now - 10}-0)`);
    const v1 = objectKey(prefix, 2, `${now + 1}-0`, `${now + 1}-9`);
    await raw.put(v1, bomb, sha256Hex(bomb), fake);
    await expect(archive.read(v1)).rejects.toThrow(`it has a v1 seal, though its shard's objects after ${now - 5}-0 are sealed with v2`);
    const noticeId = newNoticeId(2, now);
    await raw.put(recordKey(prefix, noticeId), bomb, sha256Hex(bomb), fake);
    await expect(archive.readRecord(noticeId)).rejects.toThrow(
      'it has a v1 seal, though its notice was created after its shard began sealing with v2',
    );
    await putUnsigned(raw, recordKey(prefix, noticeId), bomb);
    await expect(archive.readRecord(noticeId)).rejects.toThrow(
      'it has no seal, though its notice was created after its shard began signing',
    );

    // Shard 3 has no anchor, and this archive no Redis to ask.
    const elsewhere = objectKey(prefix, 3, `${now}-0`, `${now}-9`);
    await raw.put(elsewhere, bomb, sha256Hex(bomb), fake);
    await expect(archive.read(elsewhere)).rejects.toThrow(
      "it has a v1 seal, and no anchor of its shard's chain (in the archive or in Redis)",
    );
  });
});

describe('notice records', () => {
  it('are refused when copied to another notice, even signed again with the key; the API answers 503', async () => {
    // The notices are indexed for retirement at once, as HERALD_NOTICE_KEEP_HOT=0s would have the mirror do.
    const { prefix, env, config, store, archive, raw } = setUp('file', { HERALD_ADMIN_TOKEN: ADMIN_TOKEN, HERALD_NOTICE_KEEP_HOT: '0s' });
    const shard = 2;
    const now = Date.now();
    const [a, b] = [await finishedNotice(store, shard, now), await finishedNotice(store, shard, now + 1)];
    await new RetireIndex(redis, store.keys).add(
      shard,
      [a, b].map((noticeId) => ({ noticeId, at: now })),
    );
    const sweep = () =>
      retireNoticesOnce({
        redis,
        store,
        archive,
        clock: systemClock,
        log: silent,
        retryMs: 0,
        statsRetentionMs: 31 * DAY,
        addressLookup: testAddressLookup,
      });
    expect(await sweep()).toEqual({ retired: 0, waiting: 2 }); // contents purged
    await mirrorFor({ redis, store, archive, consumer: 'w' }).mirrorOnce([shard]);
    expect(await sweep()).toEqual({ retired: 2, waiting: 0 });
    expect((await verify(env, shard)).stdout).toMatch(/^s02  ok  \d+ objects, 2 records$/m);

    const ofA = (await raw.get(recordKey(prefix, a)))!;
    await raw.put(recordKey(prefix, b), ofA.body, ofA.sha256!, ofA.seal!);
    await expect(archive.readRecord(b)).rejects.toThrow('its MAC does not match its name and content');
    const web = await startWebUnderTest(config);
    try {
      expect((await web.call('GET', `/v1/notices/${a}`)).json()).toMatchObject({ id: a, state: 'canceled' });
      const res = await web.call('GET', `/v1/notices/${b}`);
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('unavailable');
      const timeline = await web.call('GET', `/admin/notices/${b}`, undefined, { authorization: `Bearer ${ADMIN_TOKEN}` });
      expect(timeline.statusCode).toBe(503);
      expect(timeline.json().error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('integrity check') });
    } finally {
      await web.close();
    }

    const record = JSON.parse(gunzipSync(ofA.body).toString('utf8')) as NoticeRecord;
    const { body, sha256 } = encodeRecord(record);
    await raw.put(recordKey(prefix, b), body, sha256, formatSeal(archive.keys.sealRecord(recordKey(prefix, b), sha256)));
    await expect(archive.readRecord(b)).rejects.toThrow(`it is the record of ${a}, not of ${b}`);
    const verified = await verify(env, shard);
    expect(verified.code).toBe(1);
    expect(verified.stdout).toContain(`s02  BROKEN  ${recordKey(prefix, b)}: it is the record of ${a}, not of ${b}`);
  });
});

describe('HERALD_ARCHIVE_KEY rotation', () => {
  it('signs with the first key and verifies with all of them; a key dropped too early fails --verify by name', async () => {
    const [oldKey, newKey] = [`old:${randomBytes(32).toString('base64')}`, `new:${randomBytes(32).toString('base64')}`];
    const before = setUp('file', { HERALD_ARCHIVE_KEY: oldKey });
    const shard = 8;
    const written = await writeNotices(before.store, redis, shard, 1);
    await mirrorFor({ redis, store: before.store, archive: before.archive, consumer: 'w' }).mirrorOnce([shard]);

    const rotated = { ...before.env, HERALD_ARCHIVE_KEY: `${newKey},${oldKey}` };
    const archive = openArchive(loadConfig(rotated), redis);
    opened.push(archive);
    // The first mirror trimmed the stream: it holds only the second notice's entries.
    written.push(...(await writeNotices(before.store, redis, shard, 1)));
    await mirrorFor({ redis, store: before.store, archive, consumer: 'w' }).mirrorOnce([shard]);

    const keys = await objectKeys(archive, shard);
    const seals = await Promise.all(keys.map(async (key) => parseSeal((await before.raw.get(key))!.seal)!));
    expect(seals.map((seal) => seal.keyId)).toEqual(['old', 'new']);
    // The shard's anchor, which stays for good, is sealed again with the new key by the mirror.
    expect(parseSeal((await before.raw.get(anchorKey(before.prefix, shard)))!.seal)!.keyId).toBe('new');
    expect(await archived(archive, shard)).toEqual(written);
    expect((await verify(rotated, shard)).code).toBe(0);

    const dropped = await verify({ ...before.env, HERALD_ARCHIVE_KEY: newKey }, shard);
    expect(dropped.code).toBe(1);
    expect(dropped.stdout).toContain(`s08  BROKEN  ${keys[0]}: it is signed with key "old", which HERALD_ARCHIVE_KEY does not hold`);
  });
});

describe('objects and records an earlier version sealed with v1', () => {
  it('are still read, checked once decompressed, where the anchor says v1 seals were written; one rewritten under its v1 seal is refused', async () => {
    const { prefix, store, archive, raw } = setUp('file');
    const shard = 12;
    const written = await writeNotices(store, redis, shard, 1);
    const at = idTime(written[0]!.id);
    await archive.putAnchor(shard, { genesisFirstId: written[0]!.id, sinceMs: at, v1ThroughId: written[2]!.id, v2SinceMs: at + 60_000 });
    const key = objectKey(prefix, shard, written[0]!.id, written[2]!.id);
    const { body, sha256, digest } = encodeObject(written);
    await raw.put(key, body, sha256, v1Seal('object', key, digest));
    expect(await archive.read(key)).toEqual(written);

    const forged = encodeObject(written.map((e) => (e.type === 'email.requested' ? { ...e, provider: 'forged' } : e)));
    await raw.put(key, forged.body, forged.sha256, v1Seal('object', key, digest));
    await expect(archive.read(key)).rejects.toThrow('its MAC does not match its name and content');

    const noticeId = written[0]!.noticeId;
    const record: NoticeRecord = {
      id: noticeId,
      view: { id: noticeId, state: 'canceled' } as NoticeRecord['view'],
      entryIds: written.map((e) => e.id),
      stats: { state: 'canceled', fallbackReason: null, emailChecks: 0, smsChecks: 0, emailSent: false, smsSegments: 0 },
    };
    const json = JSON.stringify(record);
    const recordBody = gzipSync(json);
    await raw.put(
      recordKey(prefix, noticeId),
      recordBody,
      sha256Hex(recordBody),
      v1Seal('record', recordKey(prefix, noticeId), sha256Hex(json)),
    );
    expect(await archive.readRecord(noticeId)).toEqual(record);
  });
});

describe('an archive an earlier version began', () => {
  it('verifies, Redis down or not, once the mirror anchored the chain a version sealing with v1 began; a v1 seal past where they end does not', async () => {
    const { prefix, env, store, archive, raw } = setUp('file');
    const shard = 13;
    const before = await writeNotices(store, redis, shard, 1);
    await mirrorFor({ redis, store, archive, consumer: 'w' }).mirrorOnce([shard]);
    // As that version left it: its object sealed with v1, its chain in Redis without v1through and v2since, no anchor.
    const oldKey = objectKey(prefix, shard, before[0]!.id, before[2]!.id);
    const old = encodeObject(before);
    await raw.put(oldKey, old.body, old.sha256, v1Seal('object', oldKey, old.digest));
    await redis.hdel(store.keys.archiveChain(shard), 'v1through', 'v2since');
    await raw.delete([anchorKey(prefix, shard)]);

    const after = await writeNotices(store, redis, shard, 1);
    await mirrorFor({ redis, store, archive: openArchive(loadConfig(env), redis), consumer: 'w' }).mirrorOnce([shard]);
    const down = { ...env, REDIS_URL: `redis://127.0.0.1:${await freePort()}` };
    for (const environment of [env, down]) {
      const verified = await verify(environment, shard);
      expect(verified.stdout).toMatch(/^s13  ok  2 objects, 0 records$/m);
      expect(verified.code).toBe(0);
    }

    const newKey = objectKey(prefix, shard, after[0]!.id, after[2]!.id);
    const held = (await raw.get(newKey))!;
    const newer = encodeObject(after);
    await raw.put(
      newKey,
      held.body,
      held.sha256!,
      v1Seal('object', newKey, newer.digest, `${before[0]!.id}_${before[2]!.id}@${old.digest}`),
    );
    const downgraded = await verify(down, shard);
    expect(downgraded.stdout).toContain(
      `s13  BROKEN  ${newKey}: it has a v1 seal, though its shard's objects after ${before[2]!.id} are sealed with v2`,
    );
    expect(downgraded.code).toBe(1);
  });

  it('is read as the legacy prefix of the chain, whose first link is the batch that version left unacknowledged', async () => {
    const { prefix, env, config, store, archive, raw } = setUp('file');
    const shard = 7;
    const written = await writeNotices(store, redis, shard, 3);
    // The group the earlier version read through, as it created it.
    await redis.xgroup('CREATE', store.keys.log(shard), MIRROR_GROUP, '0', 'MKSTREAM');
    const readAsOld = () => redis.xreadgroup('GROUP', MIRROR_GROUP, 'old-worker', 'COUNT', 3, 'STREAMS', store.keys.log(shard), '>');

    // The earlier version stored its first batch unsigned and acknowledged it ...
    await readAsOld();
    const legacyKey = objectKey(prefix, shard, written[0]!.id, written[2]!.id);
    await putUnsigned(raw, legacyKey, encodeObject(written.slice(0, 3)).body);
    await redis.xack(store.keys.log(shard), MIRROR_GROUP, ...written.slice(0, 3).map((e) => e.id));
    // ... and read its second (recorded as it recorded batches) but stopped before storing it.
    await readAsOld();
    await redis.hset(store.keys.mirrorBatches(shard), written[3]!.id, `${written[5]!.id} 3`);

    const report = await mirrorFor({
      redis,
      store,
      archive,
      consumer: 'new-worker',
      settings: { batchSize: 3, reclaimAfterMs: 0 },
    }).mirrorOnce([shard]);
    expect(report).toMatchObject({ batches: 2, written: 2, failures: 0 });
    expect(await archived(archive, shard)).toEqual(written);
    const verified = await verify(env, shard);
    expect(verified.stdout).toMatch(/^s07  ok  3 objects, 1 of them unsigned, from before the chain began \(legacy\), 0 records$/m);
    expect(verified.code).toBe(0);

    const web = await startWebUnderTest(config);
    try {
      const res = await web.call('GET', `/v1/notices/${written[0]!.noticeId}/events`);
      expect(res.statusCode).toBe(200);
      expect(res.json().events).toEqual(written.slice(0, 3));
    } finally {
      await web.close();
    }

    // A signed object stripped of its seal is not taken for a legacy one.
    const signedKey = objectKey(prefix, shard, written[6]!.id, written[8]!.id);
    await putUnsigned(raw, signedKey, (await raw.get(signedKey))!.body);
    await expect(archive.read(signedKey)).rejects.toThrow(
      `it has no seal, though its shard's chain began before it (at ${written[3]!.id})`,
    );
    const stripped = await verify(env, shard);
    expect(stripped.code).toBe(1);
    expect(stripped.stdout).toContain(`s07  BROKEN  ${signedKey}: it has no seal`);
  });
});
