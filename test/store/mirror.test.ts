import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive, ArchiveIntegrityError, encodeObject } from '../../src/archive/archive.js';
import { readinessWarnings } from '../../src/retention/backlog.js';
import { LogMirrorStore, MIRROR_GROUP } from '../../src/store/log-mirror.js';
import { idTime, objectKey, PARTITION_MS, partitionDir } from '../../src/archive/names.js';
import { anchorKey } from '../../src/archive/anchor.js';
import { HOUR, ManualClock } from '../../src/clock.js';
import type { ObjectStorage } from '../../src/archive/object-storage.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { NoticeStore, type StoredEntry } from '../../src/store/notices.js';
import { deleteKeys, plainRedis, testPrefix } from '../helpers/env.js';
import {
  archived,
  countingStore,
  fileStore,
  killOn,
  mirrorFor,
  startS3,
  streamEntries,
  tempDir,
  v1Seal,
  writeNotices,
  type S3UnderTest,
} from '../helpers/archive.js';

let redis: Redis;
let s3: S3UnderTest;
let dir: Awaited<ReturnType<typeof tempDir>>;
const prefixes: string[] = [];

beforeAll(async () => {
  redis = plainRedis();
  [s3, dir] = await Promise.all([startS3(), tempDir('mirror')]);
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await Promise.all([s3.close(), dir.remove()]);
});

/** A store and an archive of their own for one test. */
function setUp(kind: 'file' | 's3') {
  const prefix = testPrefix('mirror');
  prefixes.push(prefix);
  const store = new NoticeStore(redis, prefix);
  const objects: ObjectStorage = kind === 's3' ? s3.store(`runs/${prefix}`) : fileStore(join(dir.path, prefix));
  return { prefix, store, archive: new Archive(objects, prefix) };
}

const ids = (entries: readonly StoredEntry[]) => entries.map((e) => e.id);

/** The entries of the shard's batches handed out and not confirmed, by the consumer holding each, from their records. */
async function pendingOf(store: NoticeStore, shard: number): Promise<{ count: number; consumers: Record<string, number> }> {
  const held: Record<string, number> = {};
  for (const record of Object.values(await redis.hgetall(store.keys.mirrorBatches(shard)))) {
    const [, count, , holder] = record.split(' ');
    held[holder!] = (held[holder!] ?? 0) + Number(count);
  }
  // Nothing waits in the consumer group's pending list: the records alone hold the batches.
  const [inGroup] = (await redis.xpending(store.keys.log(shard), MIRROR_GROUP)) as [number];
  expect(Number(inGroup)).toBe(0);
  return { count: Object.values(held).reduce((sum, n) => sum + n, 0), consumers: held };
}

/** The archive read back holds exactly the given entries, each once, in stream order. */
async function expectArchivedExactlyOnce(archive: Archive, shard: number, written: readonly StoredEntry[]) {
  const back = await archived(archive, shard);
  expect(new Set(ids(back)).size).toBe(back.length);
  expect(back).toEqual(written);
}

describe.each(['file', 's3'] as const)('the log mirror on the %s store', (kind) => {
  describe('when it is killed after an upload and before the acknowledgement', () => {
    it('keeps the batch pending, trims only below it, and a reclaiming mirror stores the same object once', async () => {
      const { store, archive } = setUp(kind);
      const shard = 5;
      const log = store.keys.log(shard);
      const written = await writeNotices(store, redis, shard, 8);
      expect(written).toHaveLength(24);

      const seen = { batches: [] as string[][] };
      const first = mirrorFor({ redis, store, archive, consumer: 'worker-a', hooks: { afterUpload: killOn(2, seen) } });
      await expect(first.mirrorOnce([shard])).rejects.toThrow('killed');
      const [, unacknowledged] = seen.batches as [string[], string[]];
      expect(await redis.xlen(log)).toBe(24);
      expect(await pendingOf(store, shard)).toEqual({ count: unacknowledged.length, consumers: { 'worker-a': unacknowledged.length } });

      // A live mirror does not take a batch another consumer held only briefly; it goes on with
      // new entries and trims only below the oldest unconfirmed entry.
      const second = mirrorFor({ redis, store, archive, consumer: 'worker-b' });
      const report = await second.mirrorOnce([shard]);
      expect(report.failures).toBe(0);
      const left = await streamEntries(redis, log);
      expect(left[0]!.id).toBe(unacknowledged[0]);
      expect(ids(left)).toEqual(ids(written).slice(ids(written).indexOf(unacknowledged[0]!)));

      // Once the dead consumer's batch is idle long enough, it is claimed and uploaded again:
      // the same name, the same bytes, so the archive still holds it once.
      const third = mirrorFor({ redis, store, archive, consumer: 'worker-c', settings: { reclaimAfterMs: 0 } });
      const again = await third.mirrorOnce([shard]);
      expect(again).toMatchObject({ batches: 1, existed: 1, written: 0, entries: unacknowledged.length });
      expect(await redis.xlen(log)).toBe(0);
      expect((await pendingOf(store, shard)).count).toBe(0);
      await expectArchivedExactlyOnce(archive, shard, written);
    });
  });

  describe('when it is killed after the acknowledgement and before the trim', () => {
    it('leaves Redis untrimmed; the next trim removes exactly the confirmed entries', async () => {
      const { store, archive } = setUp(kind);
      const shard = 9;
      const log = store.keys.log(shard);
      const written = await writeNotices(store, redis, shard, 5);

      const seen = { batches: [] as string[][] };
      const first = mirrorFor({ redis, store, archive, consumer: 'worker-a', hooks: { afterAck: killOn(1, seen) } });
      await expect(first.mirrorOnce([shard])).rejects.toThrow('killed');
      const [confirmed] = seen.batches as [string[]];
      expect(await redis.xlen(log)).toBe(written.length);
      expect((await pendingOf(store, shard)).count).toBe(0);

      const { removed } = await first.stream.trim(shard, Date.now(), 60_000);
      expect(removed).toBe(confirmed.length);
      expect(ids(await streamEntries(redis, log))).toEqual(ids(written).slice(confirmed.length));

      const report = await mirrorFor({ redis, store, archive, consumer: 'worker-b' }).mirrorOnce([shard]);
      expect(report).toMatchObject({ existed: 0, entries: written.length - confirmed.length });
      expect(await redis.xlen(log)).toBe(0);
      await expectArchivedExactlyOnce(archive, shard, written);
    });
  });

  it('keeps archived entries in Redis for the hot window', async () => {
    const { store, archive } = setUp(kind);
    const written = await writeNotices(store, redis, 2, 3);
    const report = await mirrorFor({ redis, store, archive, consumer: 'w', settings: { keepHotMs: 3_600_000 } }).mirrorOnce([2]);
    expect(report.entries).toBe(written.length);
    expect(await redis.xlen(store.keys.log(2))).toBe(written.length);
    await expectArchivedExactlyOnce(archive, 2, written);
  });
});

describe('after an upgrade from a version that kept handed-out batches in the consumer group', () => {
  it("finishes the batches it left in the group's pending list, once each, and goes on from the group's position", async () => {
    const { prefix, store, archive } = setUp('file');
    const shard = 11;
    const log = store.keys.log(shard);
    const written = await writeNotices(store, redis, shard, 4);
    const e = ids(written);

    // The state that version left: it read two batches of 3 through the group, recorded each
    // (`lastId count prev`) and the chain's `last`, and was stopped before storing either.
    const now = Date.now();
    await redis.xgroup('CREATE', log, MIRROR_GROUP, '0', 'MKSTREAM');
    await redis.hset(store.keys.archiveChain(shard), 'last', '-', 'since', now, 'genesis', '0-1', 'v1through', '-', 'v2since', now);
    await redis.xreadgroup('GROUP', MIRROR_GROUP, 'old-worker', 'COUNT', 3, 'STREAMS', log, '>');
    await redis.hset(store.keys.mirrorBatches(shard), e[0]!, `${e[2]} 3 -`);
    await redis.xreadgroup('GROUP', MIRROR_GROUP, 'old-worker', 'COUNT', 3, 'STREAMS', log, '>');
    await redis.hset(store.keys.mirrorBatches(shard), e[3]!, `${e[5]} 3 ${e[0]}_${e[2]}`);
    await redis.hset(store.keys.archiveChain(shard), 'last', `${e[3]}_${e[5]}`);
    const [inGroup] = (await redis.xpending(log, MIRROR_GROUP)) as [number];
    expect(Number(inGroup)).toBe(6);
    const { backlog } = await readinessWarnings(redis, store.keys, Date.now(), { warnLagMs: 3_600_000, warnBacklog: 1_000 });
    expect(backlog.unarchivedEntries).toBe(written.length);

    const report = await mirrorFor({ redis, store, archive, consumer: 'new-worker', settings: { batchSize: 3 } }).mirrorOnce([shard]);
    expect(report).toMatchObject({ batches: 4, written: 4, existed: 0, failures: 0, entries: written.length });
    // The old batches under the names that version would have given them, then the new ones.
    const names = [];
    for await (const ref of archive.shardObjects(shard)) names.push(ref.key);
    expect(names).toEqual([0, 3, 6, 9].map((i) => objectKey(prefix, shard, e[i]!, e[i + 2]!)));
    await expectArchivedExactlyOnce(archive, shard, written);
    expect(await pendingOf(store, shard)).toEqual({ count: 0, consumers: {} });
    expect(await redis.xlen(log)).toBe(0);
    expect((await redis.hget(store.keys.archiveChain(shard), 'tip'))?.split(' ')[0]).toBe(`${e[9]}_${e[11]}`);
  });
});

describe('archive objects', () => {
  it('never span two hours, and are named by their first and last entry IDs', async () => {
    const { store, archive } = setUp('file');
    const hour = Math.floor(Date.now() / PARTITION_MS) * PARTITION_MS - 5 * PARTITION_MS;
    const log = store.keys.log(0);
    for (const id of [`${hour - 2}-0`, `${hour - 1}-0`, `${hour - 1}-1`, `${hour}-0`, `${hour + 7}-0`]) {
      await redis.xadd(
        log,
        id,
        'type',
        'test.entry',
        'noticeId',
        newNoticeId(0, hour),
        'at',
        new Date(idTime(id)).toISOString(),
        'seq',
        '1',
      );
    }
    await mirrorFor({ redis, store, archive, consumer: 'w', settings: { batchSize: 100 } }).mirrorOnce([0]);
    expect((await archive.objectsIn(0, hour - 1)).map((o) => o.key)).toEqual([
      `${partitionDir(store.keys.prefix, 0, hour - 1)}${hour - 2}-0_${hour - 1}-1.ndjson.gz`,
    ]);
    expect((await archive.objectsIn(0, hour)).map((o) => o.key)).toEqual([
      `${partitionDir(store.keys.prefix, 0, hour)}${hour}-0_${hour + 7}-0.ndjson.gz`,
    ]);
  });

  it('say when a batch took every unread entry, so that a sweep does not ask again for nothing', async () => {
    const { store } = setUp('file');
    const mirror = new LogMirrorStore(redis, store.keys);
    const log = store.keys.log(1);
    const hour = Math.floor(Date.now() / PARTITION_MS) * PARTITION_MS - 3 * PARTITION_MS;
    for (const id of [`${hour}-0`, `${hour}-1`, `${hour}-2`, `${hour + 1}-0`, `${hour + PARTITION_MS}-0`])
      await redis.xadd(
        log,
        id,
        'type',
        'test.entry',
        'noticeId',
        newNoticeId(1, hour),
        'at',
        new Date(idTime(id)).toISOString(),
        'seq',
        '1',
      );
    const batches = [];
    for (;;) {
      const batch = await mirror.next(1, 'w', 2, 60_000, Date.now());
      if (!batch) break;
      batches.push([ids(batch.entries), batch.more]);
      await mirror.ack(batch, 'd'.repeat(64));
    }
    expect(batches).toEqual([
      // Full batches may be followed by more; the one cut at the hour's end is.
      [[`${hour}-0`, `${hour}-1`], true],
      [[`${hour}-2`, `${hour + 1}-0`], true],
      // The last one took every unread entry.
      [[`${hour + PARTITION_MS}-0`], false],
    ]);
  });

  it('are each handed to one consumer when two read after the same cursor at once; the other reads on', async () => {
    const { store } = setUp('file');
    const mirror = new LogMirrorStore(redis, store.keys);
    const written = await writeNotices(store, redis, 3, 6);
    const now = Date.now();
    // On one connection the two calls interleave: both read after the same cursor, one takes.
    const [a, b] = await Promise.all([mirror.next(3, 'a', 5, 60_000, now), mirror.next(3, 'b', 5, 60_000, now)]);
    const taken = [a!, b!].sort((x, y) => idTime(x.firstId) - idTime(y.firstId) || (x.firstId < y.firstId ? -1 : 1));
    expect(taken.map((batch) => ids(batch.entries))).toEqual([ids(written).slice(0, 5), ids(written).slice(5, 10)]);
    expect(taken[1]!.prev).toBe(`${taken[0]!.firstId}_${taken[0]!.lastId}`);
    expect(await pendingOf(store, 3)).toEqual({ count: 10, consumers: { a: 5, b: 5 } });
    const [backlog] = await mirror.backlog([3]);
    expect(backlog).toEqual({ shard: 3, length: written.length, unarchived: written.length, oldestUnarchivedId: written[0]!.id });
  });

  it('are byte-identical when the same batch is encoded again, and checked against their SHA-256 on read', async () => {
    const { prefix, store, archive } = setUp('file');
    const written = await writeNotices(store, redis, 1, 2);
    const put = await archive.putBatch(1, written);
    expect(put.outcome).toBe('written');
    const path = join(dir.path, prefix, put.key);
    const bytes = await readFile(path);
    expect(await archive.putBatch(1, written)).toMatchObject({ outcome: 'existed' });
    expect(await readFile(path)).toEqual(bytes);
    // The SHA-256, then the seal: v2 (over the stored bytes), signed with the dev key, the first of its chain.
    expect(await readFile(`${path}.sha256`, 'utf8')).toMatch(/^[0-9a-f]{64}\nv2 dev - [0-9a-f]{64}\n$/);

    bytes[bytes.length - 5]! ^= 0xff;
    await writeFile(path, bytes);
    await expect(archive.read(put.key)).rejects.toBeInstanceOf(ArchiveIntegrityError);
  });
});

describe('the anchor of each shard', () => {
  /** The chain start Redis keeps for a shard, as an anchor holds it. */
  async function redisStart(store: NoticeStore, shard: number) {
    const { tip: _tip, ...start } = (await new LogMirrorStore(redis, store.keys).chain(shard))!;
    return start;
  }

  it("is written from Redis's chain before the shard's first sealed object, and for a shard with nothing to mirror", async () => {
    const { prefix, store } = setUp('file');
    const objects = countingStore(fileStore(join(dir.path, prefix)));
    const archive = new Archive(objects, prefix);
    await writeNotices(store, redis, 6, 2);
    await mirrorFor({ redis, store, archive, consumer: 'w', settings: { batchSize: 3 } }).mirrorOnce([6, 7]);

    const ofShard6 = objects.puts.filter((key) => key.startsWith(`${prefix}/s06/`));
    expect(ofShard6[0]).toBe(anchorKey(prefix, 6));
    expect(ofShard6.slice(1)).toHaveLength(2);
    expect(objects.puts).toContain(anchorKey(prefix, 7));
    for (const shard of [6, 7]) {
      const start = await redisStart(store, shard);
      // A chain begun by this version: every object after the start of the stream is sealed, with v2.
      expect(start).toMatchObject({ genesisFirstId: '0-1', v1ThroughId: null });
      expect(await new Archive(fileStore(join(dir.path, prefix)), prefix).readAnchor(shard)).toEqual(start);
    }
  });

  it('is written on the first run over a chain an earlier version began, where its v1 seals end', async () => {
    const { prefix, store, archive } = setUp('file');
    const shard = 8;
    const before = await writeNotices(store, redis, shard, 1);
    await mirrorFor({ redis, store, archive, consumer: 'w' }).mirrorOnce([shard]);
    // As the version before this one left things: a chain without v1through and v2since, its object sealed with v1, no anchor.
    const raw = fileStore(join(dir.path, prefix));
    const key = objectKey(prefix, shard, before[0]!.id, before[2]!.id);
    const { body, sha256, digest } = encodeObject(before);
    await raw.put(key, body, sha256, v1Seal('object', key, digest));
    await redis.hdel(store.keys.archiveChain(shard), 'v1through', 'v2since');
    await raw.delete([anchorKey(prefix, shard)]);
    const { v1ThroughId: _v1, v2SinceMs: _v2, ...earlier } = await redisStart(store, shard);

    const after = await writeNotices(store, redis, shard, 1);
    const reading = new Archive(raw, prefix);
    await mirrorFor({ redis, store, archive: reading, consumer: 'w' }).mirrorOnce([shard]);
    const anchor = await new Archive(raw, prefix).readAnchor(shard);
    expect(anchor).toEqual({ ...earlier, v1ThroughId: before[2]!.id, v2SinceMs: expect.any(Number) });
    expect(anchor).toEqual(await redisStart(store, shard));
    expect(await archived(new Archive(raw, prefix), shard)).toEqual([...before, ...after]);
    // After where its v1 seals end, a v1 seal is a downgrade: refused before the object is decompressed.
    const newer = objectKey(prefix, shard, after[0]!.id, after[2]!.id);
    const held = (await raw.get(newer))!;
    expect(held.seal).toMatch(/^v2 /);
    await raw.put(newer, held.body, held.sha256!, v1Seal('object', newer, encodeObject(after).digest, '-'));
    await expect(new Archive(raw, prefix).read(newer)).rejects.toThrow(
      `it has a v1 seal, though its shard's objects after ${before[2]!.id} are sealed with v2`,
    );
  });

  it('is written again, the same, once a lifecycle rule expired it; never overwritten after Redis lost its chain', async () => {
    const { prefix, store, archive } = setUp('file');
    const shard = 9;
    const raw = fileStore(join(dir.path, prefix));
    const clock = new ManualClock();
    const mirror = mirrorFor({ redis, store, archive, consumer: 'w', clock });
    await writeNotices(store, redis, shard, 1);
    await mirror.mirrorOnce([shard]);
    const first = (await raw.get(anchorKey(prefix, shard)))!;

    await raw.delete([anchorKey(prefix, shard)]);
    await mirror.mirrorOnce([shard]);
    expect(await raw.get(anchorKey(prefix, shard))).toBeNull();
    clock.advance(HOUR);
    await mirror.mirrorOnce([shard]);
    expect(await raw.get(anchorKey(prefix, shard))).toEqual(first);

    await redis.del(store.keys.archiveChain(shard));
    await writeNotices(store, redis, shard, 1);
    clock.advance(HOUR);
    await mirror.mirrorOnce([shard]);
    expect(await redisStart(store, shard)).not.toEqual(await new Archive(raw, prefix).readAnchor(shard));
    expect(await raw.get(anchorKey(prefix, shard))).toEqual(first);
  });
});

describe('when the archive cannot be reached', () => {
  it('drops nothing: the stream keeps every entry, readiness warns, and the batch is stored once the archive is back', async () => {
    const { prefix, store, archive } = setUp('file');
    const written = await writeNotices(store, redis, 4, 3);
    const unreachable = new Archive(fileStore('/dev/null/herald-archive'), prefix);
    const mirror = mirrorFor({ redis, store, archive: unreachable, consumer: 'w' });

    for (let sweep = 0; sweep < 3; sweep += 1) expect((await mirror.mirrorOnce([4])).failures).toBe(1);
    expect(await redis.xlen(store.keys.log(4))).toBe(written.length);
    const { backlog, warnings } = await readinessWarnings(redis, store.keys, Date.now(), {
      warnLagMs: 3_600_000,
      warnBacklog: written.length - 1,
    });
    expect(backlog.unarchivedEntries).toBe(written.length);
    expect(warnings.map((w) => w.code)).toContain('log_mirror_behind');

    // The same consumer, restarted with a working archive, takes its own pending batch first.
    const report = await mirrorFor({ redis, store, archive, consumer: 'w' }).mirrorOnce([4]);
    expect(report).toMatchObject({ failures: 0, entries: written.length });
    await expectArchivedExactlyOnce(archive, 4, written);
    expect((await readinessWarnings(redis, store.keys, Date.now(), { warnLagMs: 3_600_000, warnBacklog: 1 })).warnings).toEqual([]);
  });
});
