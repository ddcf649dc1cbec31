import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive } from '../../src/archive/archive.js';
import { recordKey } from '../../src/archive/records.js';
import { MISS_TTL_MS } from '../../src/archive/retired-records.js';
import { DAY, ManualClock, MINUTE } from '../../src/clock.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { readNotice } from '../../src/notice/notice.js';
import { noticeView } from '../../src/notice/view.js';
import { NoticeStore } from '../../src/store/notices.js';
import { deleteKeys, plainRedis, testConfig, testPrefix } from '../helpers/env.js';
import { startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { countingStore, fileStore, finishedNotice, tempDir } from '../helpers/archive.js';

const ADMIN_TOKEN = 'unknown-ids-admin-token-0123';
let redis: Redis;
let dir: Awaited<ReturnType<typeof tempDir>>;
let web: WebUnderTest;
let objects: ReturnType<typeof countingStore>;
let archive: Archive;
const clock = new ManualClock();
const prefix = testPrefix('unknown');

beforeAll(async () => {
  redis = plainRedis();
  dir = await tempDir('unknown');
  objects = countingStore(fileStore(join(dir.path, prefix)));
  archive = new Archive(objects, prefix);
  // Finished notices stay in Redis for a day (HERALD_NOTICE_KEEP_HOT's default) before only the archive holds them.
  web = await startWebUnderTest(testConfig(prefix, { HERALD_ADMIN_TOKEN: ADMIN_TOKEN }), clock, undefined, archive);
});
afterAll(async () => {
  await web.close();
  await archive.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await dir.remove();
});

/** The three reads of one notice a caller may make: its view, its trail, its timeline. */
const reads = (id: string) =>
  Promise.all([
    web.call('GET', `/v1/notices/${id}`),
    web.call('GET', `/v1/notices/${id}/events`),
    web.call('GET', `/admin/notices/${id}`, undefined, { authorization: `Bearer ${ADMIN_TOKEN}` }),
  ]);
const recordReads = (id: string) => objects.gets.filter((key) => key === recordKey(prefix, id)).length;

describe('reading a notice Redis does not hold', () => {
  it('answers 404 for a well-formed ID too young to have retired, without reading the archive', async () => {
    const id = newNoticeId(3, clock.now() - 10 * MINUTE);
    const answers = await reads(id);
    expect(answers.map((res) => res.statusCode)).toEqual([404, 404, 404]);
    expect(answers[0]!.json().error.code).toBe('not_found');
    expect(objects.gets).toEqual([]);
  });

  it('reads the archive once for an old unknown ID while it remembers the miss, and again after', async () => {
    const id = newNoticeId(4, clock.now() - 2 * DAY);
    for (let i = 0; i < 3; i += 1) expect((await reads(id)).map((res) => res.statusCode)).toEqual([404, 404, 404]);
    expect(recordReads(id)).toBe(1);

    clock.advance(MISS_TTL_MS);
    expect((await web.call('GET', `/v1/notices/${id}`)).statusCode).toBe(404);
    expect(recordReads(id)).toBe(2);
  });

  it('still finds a notice old enough to have retired in the archive', async () => {
    const store = new NoticeStore(redis, prefix);
    const id = await finishedNotice(store, 5, clock.now() - 2 * DAY);
    const notice = (await readNotice(store, id))!;
    await archive.putRecord({
      id,
      view: noticeView(notice),
      entryIds: await store.eventIds(id),
      stats: { state: 'canceled', fallbackReason: null, emailChecks: 0, smsChecks: 0, emailSent: false, smsSegments: 0 },
    });
    // Retired: only its record is left.
    await redis.del(store.keys.notice(id), store.keys.events(id));
    const res = await web.call('GET', `/v1/notices/${id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id, state: 'canceled' });
  });
});
