import { Cluster, Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { SHARD_COUNT } from '../../src/notice/ids.js';
import { shardSlot } from '../../src/store/keys.js';
import { groupByMaster, NoticePlacement } from '../../src/store/placement.js';
import { SLOT_COUNT } from '../../src/store/slots.js';

/**
 * Where new notices go, on a slot map set by hand: the clients below never connect (lazyConnect),
 * a Cluster client's `slots` is what ioredis fills from CLUSTER SLOTS and MOVED replies.
 */
const opened: (Redis | Cluster)[] = [];
afterEach(() => {
  for (const client of opened.splice(0)) client.disconnect();
});

function clusterWith(masterOfSlot: (slot: number) => string | undefined): Cluster {
  const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
  opened.push(cluster);
  setSlots(cluster, masterOfSlot);
  return cluster;
}

function setSlots(cluster: Cluster, masterOfSlot: (slot: number) => string | undefined): void {
  cluster.slots = Array.from({ length: SLOT_COUNT }, (_, slot) => {
    const master = masterOfSlot(slot);
    return master === undefined ? (undefined as unknown as string[]) : [master, `${master}-replica`];
  });
}

/** redis-cli's even split over three masters. */
const threeMasters = (slot: number) => (slot <= 5460 ? 'a:1' : slot <= 10922 ? 'b:1' : 'c:1');

/** How many of `draws` new notices each master got, by master. */
function sharesByMaster(
  placement: NoticePlacement,
  masterOfSlot: (slot: number) => string | undefined,
  draws: number,
): Map<string, number> {
  const got = new Map<string, number>();
  for (let i = 0; i < draws; i += 1) {
    const shard = placement.shard();
    const master =
      Number.isInteger(shard) && shard >= 0 && shard < SHARD_COUNT ? (masterOfSlot(shardSlot(shard)) ?? 'no master') : 'not a shard';
    got.set(master, (got.get(master) ?? 0) + 1);
  }
  return got;
}

describe('where new notices go', () => {
  describe('on a Redis Cluster', () => {
    it('gives each master an equal share, though the shards lie 6, 4 and 6 on them', () => {
      expect(groupByMaster(Array.from({ length: SHARD_COUNT }, (_, s) => threeMasters(shardSlot(s)))).map((g) => g.length)).toEqual([
        6, 6, 4,
      ]);
      const placement = new NoticePlacement(clusterWith(threeMasters));
      const draws = 30_000;
      const got = sharesByMaster(placement, threeMasters, draws);
      expect([...got.keys()].sort()).toEqual(['a:1', 'b:1', 'c:1']);
      // Uniform shards would give b 1/4; the masters take notices in turn, so each gets exactly 1/3.
      expect([...got.values()]).toEqual([draws / 3, draws / 3, draws / 3]);
    });

    it('uses every shard of a master, each equally', () => {
      const placement = new NoticePlacement(clusterWith(threeMasters));
      const byShard = new Array<number>(SHARD_COUNT).fill(0);
      const draws = 30_000;
      for (let i = 0; i < draws; i += 1) byShard[placement.shard()]! += 1;
      for (let shard = 0; shard < SHARD_COUNT; shard += 1) {
        const master = threeMasters(shardSlot(shard));
        const shardsOfMaster = Array.from({ length: SHARD_COUNT }, (_, s) => s).filter((s) => threeMasters(shardSlot(s)) === master).length;
        // 1,667 or 2,500 expected, within 5 standard deviations.
        expect(Math.abs(byShard[shard]! - draws / 3 / shardsOfMaster), `shard ${shard}`).toBeLessThan(250);
      }
    });

    it('follows the slot map when it changes: a master that took over shards gets a share, one that serves none gets nothing', () => {
      const cluster = clusterWith(threeMasters);
      const placement = new NoticePlacement(cluster);
      sharesByMaster(placement, threeMasters, 100);
      // Master c's slots move to a: two masters now, half each.
      const twoMasters = (slot: number) => (slot <= 5460 || slot > 10922 ? 'a:1' : 'b:1');
      setSlots(cluster, twoMasters);
      const draws = 20_000;
      const got = sharesByMaster(placement, twoMasters, draws);
      expect([...got.keys()].sort()).toEqual(['a:1', 'b:1']);
      for (const n of got.values()) expect(Math.abs(n / draws - 1 / 2)).toBeLessThan(0.02);
    });

    it('draws any shard while the slot map is not known yet, and leaves out the shards whose slot has no master', () => {
      const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
      opened.push(cluster);
      const placement = new NoticePlacement(cluster);
      const seen = new Set<number>();
      for (let i = 0; i < 2000; i += 1) seen.add(placement.shard());
      expect(seen.size).toBe(SHARD_COUNT);
      // Only master a's slots are known.
      setSlots(cluster, (slot) => (slot <= 5460 ? 'a:1' : undefined));
      const shardsOfA = new Set(Array.from({ length: SHARD_COUNT }, (_, s) => s).filter((s) => shardSlot(s) <= 5460));
      let elsewhere = 0;
      for (let i = 0; i < 2000; i += 1) if (!shardsOfA.has(placement.shard())) elsewhere += 1;
      expect(elsewhere).toBe(0);
    });
  });

  describe('on one Redis node', () => {
    it('draws every shard uniformly, as before', () => {
      const redis = new Redis({ lazyConnect: true });
      opened.push(redis);
      const placement = new NoticePlacement(redis);
      const byShard = new Array<number>(SHARD_COUNT).fill(0);
      const draws = 32_000;
      for (let i = 0; i < draws; i += 1) byShard[placement.shard()]! += 1;
      // 2,000 each, within 5 standard deviations (43).
      for (const n of byShard) expect(Math.abs(n - draws / SHARD_COUNT)).toBeLessThan(220);
    });
  });
});
