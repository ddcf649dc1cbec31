import { randomBelow, randomShard, SHARD_COUNT } from '../notice/ids.js';
import { shardSlot } from './keys.js';
import { isCluster, masterOfSlot, type RedisClient } from './redis.js';

/**
 * Where new notices go. On one Redis node (or Sentinel's master) any shard, uniformly. On a Redis
 * Cluster every master that serves a shard gets an equal share of new notices: the masters take
 * them in turn (from a random one, so that many processes with few notices each do not all start
 * on the same master), each on one of its shards drawn uniformly. In turn rather than at random,
 * because a random draw is uneven by a few percent over a few thousand notices, and the busiest
 * master is the cluster's ceiling. With shards spread 6, 4 and 6 over three masters (the even
 * split of `redis-cli --cluster create`), uniform shards would give the first and last master 3/8
 * of the notices each; so each gets 1/3, and with a notice's jobs in the partition on its shard's
 * master (partitionOfShard) each master does a third of the work. The grouping follows the
 * client's slot map, so a failover or resharding changes where new notices go, never where
 * existing ones are: the shard is written in the notice ID.
 */
export class NoticePlacement {
  /** The master of each shard at the last draw (undefined: not known), and the shards grouped by master. */
  private readonly masters: (string | undefined)[] = new Array<string | undefined>(SHARD_COUNT).fill(undefined);
  private groups: number[][] = [];
  /** Which master's turn it is: an index into the groups, taken modulo their number. */
  private turn = randomBelow(SHARD_COUNT);

  constructor(private readonly redis: RedisClient) {}

  /** The shard of a new notice. */
  shard(): number {
    if (!isCluster(this.redis)) return randomShard();
    const groups = this.groupsNow();
    if (groups.length === 0) return randomShard();
    this.turn = (this.turn + 1) % groups.length;
    const group = groups[this.turn]!;
    return group[randomBelow(group.length)]!;
  }

  /** The shards grouped by the master serving them now, regrouped when the slot map moved one. */
  private groupsNow(): number[][] {
    let changed = false;
    for (let shard = 0; shard < SHARD_COUNT; shard += 1) {
      const master = masterOfSlot(this.redis, shardSlot(shard));
      if (master !== this.masters[shard]) {
        this.masters[shard] = master;
        changed = true;
      }
    }
    if (changed) this.groups = groupByMaster(this.masters);
    return this.groups;
  }
}

/** Shards grouped by their master, in shard order; a shard with no known master is in no group. */
export function groupByMaster(masters: readonly (string | undefined)[]): number[][] {
  const groups = new Map<string, number[]>();
  masters.forEach((master, shard) => {
    if (master === undefined) return;
    const group = groups.get(master);
    if (group) group.push(shard);
    else groups.set(master, [shard]);
  });
  return [...groups.values()];
}
