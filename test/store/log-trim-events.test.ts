/**
 * The log's trim waits for the callers' events as it waits for the archive: an entry the events'
 * consumer group has not acknowledged stays in Redis, though the mirror is done with it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { EVENTS_GROUP, EventLogStore } from '../../src/store/event-log.js';
import { Keys } from '../../src/store/keys.js';
import { LogMirrorStore, MIRROR_GROUP } from '../../src/store/log-mirror.js';
import { defineScripts } from '../../src/store/scripts.js';
import { deleteKeys, plainRedis, testPrefix } from '../helpers/env.js';

const prefix = testPrefix('trimevents');
const redis = plainRedis();
const keys = new Keys(prefix);
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

describe('trimming a shard log', () => {
  it('keeps every entry the events group has not acknowledged, and trims once it has', async () => {
    defineScripts(redis);
    const shard = 3;
    const log = keys.log(shard);
    const events = new EventLogStore(redis, keys);
    await redis.xgroup('CREATE', log, MIRROR_GROUP, '0', 'MKSTREAM');
    await events.ensureGroup(shard);
    const ids: string[] = [];
    for (let i = 1; i <= 5; i += 1)
      ids.push((await redis.xadd(log, `${1000 + i}-0`, 'type', 'notice.completed', 'noticeId', 'ntc_x', 'seq', String(i)))!);
    // The mirror read and acknowledged all five; the events' consumer read them and acknowledged the first two.
    await redis.xreadgroup('GROUP', MIRROR_GROUP, 'm1', 'COUNT', 10, 'STREAMS', log, '>');
    await redis.xack(log, MIRROR_GROUP, ...ids);
    const read = await events.next(shard, 'e1', 10, 60_000);
    expect(read.map((e) => e.id)).toEqual(ids);
    await events.ack(shard, ids.slice(0, 2));
    const store = new LogMirrorStore(redis, keys);
    const first = await store.trim(shard, 10_000, 60_000);
    expect(first.trimPoint).toBe(ids[2]);
    expect(await redis.xlen(log)).toBe(3);
    await events.ack(shard, ids.slice(2));
    await store.trim(shard, 10_000, 60_000);
    expect(await redis.xlen(log)).toBe(0);
    expect((await redis.xinfo('GROUPS', log)) as unknown[]).toHaveLength(2);
    expect(EVENTS_GROUP).toBe('events');
  });
});
