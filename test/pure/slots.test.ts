import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { SHARD_COUNT } from '../../src/notice/ids.js';
import { Keys, queuePartitionTags } from '../../src/store/keys.js';
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
    const ranges = [[0, 5460], [5461, 10922], [10923, 16383]] as const;
    const masters = queuePartitionTags(3).map((tag) => ranges.findIndex(([from, to]) => slotOf(`{${tag}}`) >= from && slotOf(`{${tag}}`) <= to));
    expect(masters).toEqual([0, 1, 2]);
  });
});
