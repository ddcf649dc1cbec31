import type { Redis } from 'ioredis';
import type { ReplicatedWrite } from '../notice/transitions.js';
import { isCluster, type RedisClient } from './redis.js';
import { slotOf } from './slots.js';

/**
 * What the store knows of the master's replicas, and how a write that must survive a failover
 * waits for one (the notice's creation before the 202, and the record that a provider
 * call is about to leave, before it leaves).
 *
 * Where the master has a connected replica, such a write goes out in one pipeline with `WAIT 1
 * <ms>` behind it: one round trip, as without the wait. The pipeline's script fixes the node
 * (on a Cluster too, the WAIT reaches the node that holds the notice's keys). Whether a replica
 * is connected is read from `INFO replication` and serves for a second, so a single node with
 * no replica pays one INFO a second, not one per write. A master with no connected replica
 * does not block: the write goes ahead and, where replicas are expected (Sentinel, Cluster), is
 * counted as unreplicated (`herald_unreplicated_writes_total`, reason `no_replica`). A WAIT
 * that times out with a replica connected lets the write go ahead too, counted with reason
 * `timeout`: the write is on the master, the work goes on, nothing is sent twice.
 */

/** How long the master may take to hear from a replica before the write goes ahead unreplicated. */
export const REPLICA_WAIT_MS = 500;

/** How long one reading of `INFO replication` serves. */
const FRESH_MS = 1_000;

/** Why a write that should have waited for a replica went ahead without one. */
export type UnreplicatedReason = 'no_replica' | 'timeout';

/** The metrics-hash field counting one kind of unreplicated write (src/http/metrics.ts reads it). */
export function unreplicatedField(write: ReplicatedWrite, reason: UnreplicatedReason): string {
  return `unreplicated|${write}|${reason}`;
}

/** How a replicated write goes out: with a WAIT behind it, or counted as unreplicated at once. */
export type WritePlan = { wait: true; waitMs: number } | { wait: false; count: string | undefined };

/** Online replicas listed by `INFO replication` (`slaveN:...,state=online,...`). */
export function onlineReplicas(info: string): number {
  return info.split('\n').filter((line) => /^slave\d+:/.test(line) && /state=online/.test(line)).length;
}

export class ReplicaWatch {
  /** By master (its `host:port` on a Cluster; '' on one node): online replicas, as last read. */
  private readonly known = new Map<string, { at: number; replicas: number }>();
  private readonly reading = new Map<string, Promise<number>>();

  /**
   * `expected`: replicas are part of the topology (Sentinel, Cluster), so a write without one is
   * counted; on one node with no replica nothing is counted, since nothing was expected.
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly options: { expected: boolean; waitMs?: number },
  ) {
    // A new connection may reach a new master (a failover), a Cluster new slots: what was known no longer holds.
    redis.on('ready', () => this.known.clear());
    if (isCluster(redis)) redis.on('refresh', () => this.known.clear());
  }

  /** How a write of this kind, to `key`, goes out now. */
  async plan(write: ReplicatedWrite, key: string, now = Date.now()): Promise<WritePlan> {
    if ((await this.replicas(key, now)) > 0) return { wait: true, waitMs: this.options.waitMs ?? REPLICA_WAIT_MS };
    return { wait: false, count: this.options.expected ? unreplicatedField(write, 'no_replica') : undefined };
  }

  /** Online replicas of the master that holds `key`, as last read (at most FRESH_MS ago). */
  async replicas(key: string, now = Date.now()): Promise<number> {
    const master = this.masterOf(key);
    if (!master) return 0;
    const known = this.known.get(master.id);
    if (known && now - known.at < FRESH_MS) return known.replicas;
    let reading = this.reading.get(master.id);
    if (!reading) {
      reading = this.read(master).finally(() => this.reading.delete(master.id));
      this.reading.set(master.id, reading);
    }
    return reading;
  }

  /** Forgets what was read: the next write reads INFO again (a WAIT that found no replica says so). */
  forget(): void {
    this.known.clear();
  }

  /**
   * The connection to the master holding `key`: the one node, or on a Cluster the master its
   * slot map names (undefined while the map has none: the write then goes ahead, counted).
   */
  private masterOf(key: string): { id: string; node: Redis } | undefined {
    const redis = this.redis;
    if (!isCluster(redis)) return { id: '', node: redis };
    const id = redis.slots[slotOf(key)]?.[0];
    const node = id ? redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === id) : undefined;
    return id && node ? { id, node } : undefined;
  }

  private async read(master: { id: string; node: Redis }): Promise<number> {
    const replicas = onlineReplicas(await master.node.info('replication'));
    this.known.set(master.id, { at: Date.now(), replicas });
    return replicas;
  }
}
