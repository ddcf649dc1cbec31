import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHARD_COUNT } from '../../src/notice/ids.js';
import { Keys, partitionOfNotice, shardSlot } from '../../src/store/keys.js';
import { slotOf } from '../../src/store/slots.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { RedisCluster } from '../helpers/redis-cluster.js';

/**
 * Placement on a real Redis Cluster of the test's own (3 masters, split evenly by redis-cli, which
 * puts the 16 shards 6, 4 and 6 on them) with HERALD_QUEUE_PARTITIONS=3: each master gets a third
 * of the new notices, and a notice's jobs are on its shard's master. Where a key is, is asked of
 * the servers themselves (CLUSTER NODES, and EXISTS on one node, which answers MOVED for a slot
 * it does not serve), not of the client's slot map.
 */
const PARTITIONS = 3;
let cluster: RedisCluster;
let web: WebUnderTest;
let keys: Keys;

beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  const prefix = testPrefix('placement');
  keys = new Keys(prefix);
  web = await startWebUnderTest(testConfig(prefix, { REDIS_CLUSTER_NODES: cluster.seeds, HERALD_QUEUE_PARTITIONS: String(PARTITIONS) }));
}, 120_000);

afterAll(async () => {
  await web?.close();
  await cluster?.stop();
});

/** The port of the master serving a slot (asked once per slot: the layout does not change here). */
const masters = new Map<number, Promise<number>>();
function masterPort(slot: number): Promise<number> {
  if (!masters.has(slot))
    masters.set(
      slot,
      cluster.masterOfSlot(slot).then((node) => node!.port),
    );
  return masters.get(slot)!;
}

describe('new notices on a 3-master Redis Cluster with 3 partitions', () => {
  it('go a third to each master, though the masters hold 6, 4 and 6 shards', async () => {
    const masterOfShard = await Promise.all(Array.from({ length: SHARD_COUNT }, (_, shard) => masterPort(shardSlot(shard))));
    const shardsPerMaster = new Map<number, number>();
    for (const port of masterOfShard) shardsPerMaster.set(port, (shardsPerMaster.get(port) ?? 0) + 1);
    expect([...shardsPerMaster.values()].sort()).toEqual([4, 6, 6]);

    const draws = 6000;
    const perMaster = new Map<number, number>();
    for (let i = 0; i < draws; i += 1) {
      const port = masterOfShard[web.store.newShard()]!;
      perMaster.set(port, (perMaster.get(port) ?? 0) + 1);
    }
    expect(perMaster.size).toBe(3);
    // Uniform shards would give the master of 4 shards a quarter; 1/3 ± 5 standard deviations.
    for (const n of perMaster.values()) expect(Math.abs(n / draws - 1 / 3)).toBeLessThan(0.031);
  });

  it("have their jobs on their shard's master", { timeout: 120_000 }, async () => {
    const ids: string[] = [];
    for (let i = 0; i < 30; i += 1) {
      const res = await web.call('POST', '/v1/notices', noticeBody({ recipient: { id: `player-${i}`, email: 'never@example.com' } }));
      expect(res.statusCode, res.body).toBe(202);
      ids.push((res.json() as { id: string }).id);
    }
    const prefixes = keys.queuePartitionPrefixes(PARTITIONS);
    const mastersUsed = new Set<number>();
    for (const id of ids) {
      const port = await masterPort(slotOf(keys.notice(id)));
      mastersUsed.add(port);
      const node = cluster.nodes.find((n) => n.port === port)!;
      expect(await node.ask('EXISTS', keys.notice(id))).toBe('1');
      // The notice's one job, the deadline job.
      for (const [queue, jobId] of [['deadline', `${id}-deadline`]] as const) {
        // Asked of the notice's master for every partition: only its own partition's job is there.
        const found = await Promise.all(prefixes.map((prefix) => node.ask('EXISTS', `${prefix}:${queue}:${jobId}`)));
        expect(found, `${jobId} on the master of ${id}`).toEqual(
          prefixes.map((_, p) => (p === partitionOfNotice(id, PARTITIONS) ? '1' : undefined)),
        );
      }
    }
    expect(mastersUsed.size).toBe(3);
  });
});
