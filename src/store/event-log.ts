import type { Keys } from './keys.js';
import { decodeEntry, type StoredEntry } from './notices.js';
import type { RedisClient } from './redis.js';

/** The callers' events' consumer group on each shard's decision log (the mirror has its own). */
export const EVENTS_GROUP = 'events';

/**
 * The decision log as the callers' events read it: a consumer group of its own on each shard's
 * stream, so that an entry read and not yet turned into deliveries stays pending, is handed out
 * again after a crash, and holds back the log's trim (trimMirroredLog-2.lua counts this group's
 * pending entries as it counts the mirror's batch records).
 */
export class EventLogStore {
  private readonly groupsReady = new Set<number>();
  /** Where this process last moved each shard's group with no endpoint (skipTo), until it reads the shard. */
  private readonly skippedTo = new Map<number, string>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /**
   * Creates the group at the stream's start: an entry written before the first sweep (a notice
   * that completed while the workers were starting) is read all the same. An endpoint receives
   * only events from after its creation (the dispatch checks), so reading older entries, as an
   * upgraded deployment does once, sends nothing twice and nothing old.
   */
  async ensureGroup(shard: number): Promise<void> {
    if (this.groupsReady.has(shard)) return;
    try {
      await this.redis.xgroup('CREATE', this.keys.log(shard), EVENTS_GROUP, '0', 'MKSTREAM');
    } catch (error) {
      if (!String((error as Error).message).includes('BUSYGROUP')) throw error;
    }
    this.groupsReady.add(shard);
  }

  /**
   * The consumer's next entries of the shard: those it holds already (a crash before it
   * acknowledged them), then those another consumer has held for `reclaimAfterMs`, then new ones.
   */
  async next(shard: number, consumer: string, most: number, reclaimAfterMs: number): Promise<StoredEntry[]> {
    this.skippedTo.delete(shard);
    await this.ensureGroup(shard);
    const key = this.keys.log(shard);
    try {
      const own = await this.read(key, consumer, most, '0');
      if (own.length > 0) return own;
      const [, claimed] = (await this.redis.xautoclaim(key, EVENTS_GROUP, consumer, reclaimAfterMs, '0-0', 'COUNT', most)) as [
        string,
        [string, string[]][],
      ];
      const reclaimed = claimed.filter((row) => Array.isArray(row[1])).map(([id, fields]) => decodeEntry(id, fields));
      if (reclaimed.length > 0) return reclaimed;
      return await this.read(key, consumer, most, '>');
    } catch (error) {
      // The stream was deleted under us (a test cleaning up): create the group again next time.
      if (String((error as Error).message).includes('NOGROUP')) this.groupsReady.delete(shard);
      throw error;
    }
  }

  private async read(key: string, consumer: string, most: number, from: '0' | '>'): Promise<StoredEntry[]> {
    const reply = (await this.redis.xreadgroup('GROUP', EVENTS_GROUP, consumer, 'COUNT', most, 'STREAMS', key, from)) as
      [string, [string, string[] | null][]][] | null;
    const rows = reply?.[0]?.[1] ?? [];
    // An entry trimmed while pending comes back without fields: nothing to turn into an event.
    return rows.filter((row): row is [string, string[]] => Array.isArray(row[1])).map(([id, fields]) => decodeEntry(id, fields));
  }

  /** Acknowledges entries whose deliveries are queued (or that needed none). */
  async ack(shard: number, ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.redis.xack(this.keys.log(shard), EVENTS_GROUP, ...ids);
  }

  /**
   * With no endpoint to deliver to, moves the group to `lastId` (read before the endpoints were
   * counted, so that nothing written after it is skipped) and acknowledges what it holds. A shard
   * this process moved to the same `lastId` before, and has not read since, is left as it is:
   * nothing was written after that entry, so no consumer can have been handed anything since
   * (an idle deployment's sweep then costs each shard one read, not three commands).
   */
  async skipTo(shard: number, lastId: string): Promise<void> {
    if (this.skippedTo.get(shard) === lastId) return;
    await this.ensureGroup(shard);
    const key = this.keys.log(shard);
    await this.redis.xgroup('SETID', key, EVENTS_GROUP, lastId);
    const pending = (await this.redis.xpending(key, EVENTS_GROUP, '-', '+', 1000)) as [string, string, number, number][];
    if (pending.length > 0) await this.redis.xack(key, EVENTS_GROUP, ...pending.map(([id]) => id));
    // Not when it held a full page: the rest is acknowledged by the next sweep.
    if (pending.length < 1000) this.skippedTo.set(shard, lastId);
  }

  /** The newest entry ID of the shard's log ('0-0' for an empty or missing stream). */
  async lastId(shard: number): Promise<string> {
    const [newest] = (await this.redis.xrevrange(this.keys.log(shard), '+', '-', 'COUNT', 1)) as [string, string[]][];
    return newest?.[0] ?? '0-0';
  }

  /** Forgets consumers of the group that hold nothing and have been idle for `idleMs` (workers that exited). */
  async forgetIdleConsumers(shard: number, idleMs: number): Promise<void> {
    let consumers: unknown[];
    try {
      consumers = (await this.redis.xinfo('CONSUMERS', this.keys.log(shard), EVENTS_GROUP)) as unknown[];
    } catch {
      return;
    }
    for (const row of consumers as string[][]) {
      const info: Record<string, string> = {};
      for (let i = 0; i < row.length; i += 2) info[row[i]!] = String(row[i + 1]);
      if (Number(info.pending) === 0 && Number(info.idle) >= idleMs && info.name) {
        await this.redis.xgroup('DELCONSUMER', this.keys.log(shard), EVENTS_GROUP, info.name);
      }
    }
  }
}
