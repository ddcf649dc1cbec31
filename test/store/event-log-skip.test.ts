/**
 * The callers' events with no endpoint: the dispatch moves each shard's consumer group past what
 * the log holds, and an idle deployment's sweeps, with nothing new written, leave the group alone.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { EVENTS_GROUP, EventLogStore } from '../../src/store/event-log.js';
import { Keys } from '../../src/store/keys.js';
import { deleteKeys, plainRedis, testPrefix } from '../helpers/env.js';

const prefix = testPrefix('eventskip');
const redis = plainRedis();
const keys = new Keys(prefix);
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

/** The connection, counting the stream-group commands sent through it. */
function counting(connection: Redis): { client: Redis; sent: string[] } {
  const sent: string[] = [];
  const client = new Proxy(connection, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof key !== 'string' || !['xgroup', 'xpending', 'xack'].includes(key) || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        sent.push(key);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { client, sent };
}

const lastDelivered = async (log: string) => {
  const groups = (await redis.xinfo('GROUPS', log)) as unknown[][];
  const group = groups
    .map((g) => Object.fromEntries(Array.from({ length: g.length / 2 }, (_, i) => [g[2 * i], g[2 * i + 1]])))
    .find((g) => g.name === EVENTS_GROUP);
  return { at: String(group?.['last-delivered-id']), pending: Number(group?.pending) };
};

describe('the events group of a shard with no endpoint', () => {
  it('moves past what was written and acknowledges what it held, then leaves the group alone until more is written', async () => {
    const shard = 5;
    const log = keys.log(shard);
    const { client, sent } = counting(redis);
    const events = new EventLogStore(client as never, keys);
    for (let i = 1; i <= 3; i += 1)
      await redis.xadd(log, `${2000 + i}-0`, 'type', 'notice.completed', 'noticeId', 'ntc_x', 'seq', String(i));
    // An earlier sweep, with an endpoint then, was handed the first entry and did not acknowledge it.
    await events.next(shard, 'crashed', 1, 60_000);
    expect((await lastDelivered(log)).pending).toBe(1);

    await events.skipTo(shard, await events.lastId(shard));
    expect(await lastDelivered(log)).toEqual({ at: '2003-0', pending: 0 });
    const moved = sent.length;
    expect(moved).toBeGreaterThanOrEqual(3);

    // Nothing written since: the next sweeps send nothing to the group.
    await events.skipTo(shard, await events.lastId(shard));
    await events.skipTo(shard, await events.lastId(shard));
    expect(sent).toHaveLength(moved);

    // Something written: the group moves past it.
    await redis.xadd(log, '2004-0', 'type', 'notice.completed', 'noticeId', 'ntc_x', 'seq', '4');
    await events.skipTo(shard, await events.lastId(shard));
    expect(sent.length).toBeGreaterThan(moved);
    expect(await lastDelivered(log)).toEqual({ at: '2004-0', pending: 0 });
  });

  it('moves the group again once this process has read the shard, though nothing was written since', async () => {
    const shard = 6;
    const log = keys.log(shard);
    const { client, sent } = counting(redis);
    const events = new EventLogStore(client as never, keys);
    await redis.xadd(log, '3001-0', 'type', 'notice.completed', 'noticeId', 'ntc_y', 'seq', '1');
    await events.skipTo(shard, await events.lastId(shard));
    // An endpoint came and went: a sweep read the shard in between.
    await events.next(shard, 'c1', 10, 60_000);
    const before = sent.length;
    await events.skipTo(shard, await events.lastId(shard));
    expect(sent.length).toBeGreaterThan(before);
    expect(await lastDelivered(log)).toEqual({ at: '3001-0', pending: 0 });
  });
});
