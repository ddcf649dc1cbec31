import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { SHARD_COUNT } from '../../src/notice/ids.js';
import { Keys, partitionOfNotice, partitionOfShard, queuePartitionTags, shardSlot } from '../../src/store/keys.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { SLOT_COUNT, slotOf } from '../../src/store/slots.js';

/** The mapping ioredis itself routes Cluster commands by. */
const clusterKeySlot = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number;

describe('slotOf', () => {
  it('maps keys to the slots Redis Cluster (and its client) uses, hash tags included', () => {
    const keys = ['foo', '123456789', 'herald:{s3}:notice:x', 'a{}b', '{q}', 'x{y}z{w}', 'herald:{q}:email-send:wait', '{', 'é{ü}'];
    for (let i = 0; i < 200; i += 1) keys.push(`herald:{q3.${i % 3}.${i.toString(36)}}:deadline:${i}`);
    for (const key of keys) expect(slotOf(key), key).toBe(clusterKeySlot(key));
    expect(slotOf('123456789')).toBe(0x31c3 % SLOT_COUNT);
  });
});

describe('queue partition tags', () => {
  it('keep the unpartitioned prefix for one partition, as running deployments have it', () => {
    expect(new Keys('herald').queuePartitionPrefixes(1)).toEqual(['herald:{q}']);
  });

  it('put partition i of P at or just above slot i·16384/P, the same in every process', () => {
    for (let count = 2; count <= SHARD_COUNT; count += 1) {
      const tags = queuePartitionTags(count);
      expect(new Set(tags).size).toBe(count);
      expect(queuePartitionTags(count)).toEqual(tags);
      tags.forEach((tag, i) => {
        const target = Math.ceil((i * SLOT_COUNT) / count);
        const above = slotOf(`{${tag}}`) - target;
        expect(above, tag).toBeGreaterThanOrEqual(0);
        expect(above, tag).toBeLessThan(64);
      });
    }
  });

  it('spread 3 partitions over the 3 masters of an evenly split cluster (as redis-cli splits it: 0-5460, 5461-10922, 10923-16383)', () => {
    const ranges = [
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ] as const;
    const masters = queuePartitionTags(3).map((tag) =>
      ranges.findIndex(([from, to]) => slotOf(`{${tag}}`) >= from && slotOf(`{${tag}}`) <= to),
    );
    expect(masters).toEqual([0, 1, 2]);
  });

  it('put a shard in the partition on its master: with the slot range split over P masters as redis-cli splits it, the shard and its partition share one', () => {
    for (let count = 1; count <= SHARD_COUNT; count += 1) {
      const masterOf = evenSplit(count);
      const tags = queuePartitionTags(count);
      for (let shard = 0; shard < SHARD_COUNT; shard += 1) {
        const partition = partitionOfShard(shard, count);
        expect(masterOf(slotOf(`{${tags[partition]!}}`)), `shard ${shard} of ${count} partitions`).toBe(masterOf(shardSlot(shard)));
      }
    }
  });

  it('place every shard of the 6, 4 and 6 on 3 evenly split masters in the partition of its master', () => {
    const masterOf = evenSplit(3);
    const byPartition = [0, 1, 2].map((p) => Array.from({ length: SHARD_COUNT }, (_, s) => s).filter((s) => partitionOfShard(s, 3) === p));
    expect(byPartition.map((shards) => shards.length)).toEqual([6, 4, 6]);
    byPartition.forEach((shards, p) => shards.forEach((s) => expect(masterOf(slotOf(`{s${s}}`))).toBe(p)));
  });

  it("take a notice's partition from the shard in its ID", () => {
    for (let shard = 0; shard < SHARD_COUNT; shard += 1)
      expect(partitionOfNotice(newNoticeId(shard, 1_700_000_000_000), 3)).toBe(partitionOfShard(shard, 3));
  });
});

/** The master index of a slot on a cluster of `masters` masters split as `redis-cli --cluster create` splits it. */
function evenSplit(masters: number): (slot: number) => number {
  // redis-cli (clusterManagerCommandCreate): last = lround(cursor + slotsPerNode - 1), the next master from last + 1.
  const perNode = SLOT_COUNT / masters;
  const lasts: number[] = [];
  let cursor = 0;
  for (let i = 0; i < masters; i += 1) {
    lasts.push(i === masters - 1 ? SLOT_COUNT - 1 : Math.round(cursor + perNode - 1));
    cursor += perNode;
  }
  return (slot) => lasts.findIndex((last) => slot <= last);
}
