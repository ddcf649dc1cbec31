/**
 * What the benchmark reads from Redis: command counts (`INFO commandstats`, which counts the
 * commands a Lua script calls as well as the EVALSHA itself), memory (`INFO memory`, and
 * `MEMORY USAGE` of one prefix's keys), and the clean-up of a prefix's keys.
 */
import type { Redis } from 'ioredis';
import { sleep } from './processes.js';
import { isCluster, masterNodes, type RedisClient } from '../src/store/redis.js';
import { finishSlowlog, startSlowlog, type SlowlogProfile } from './slowlog.js';

export type CommandCounts = Map<string, number>;

export async function commandCounts(redis: Redis): Promise<CommandCounts> {
  const info = await redis.info('commandstats');
  const counts: CommandCounts = new Map();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts.set(match[1]!, Number(match[2]));
  return counts;
}

/** Commands run between two readings, by command, without the readings' own INFO calls. */
export function countsBetween(before: CommandCounts, after: CommandCounts): CommandCounts {
  const delta: CommandCounts = new Map();
  for (const [name, calls] of after) {
    const n = calls - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0);
    if (n > 0) delta.set(name, n);
  }
  return delta;
}

export function total(counts: CommandCounts): number {
  let sum = 0;
  for (const n of counts.values()) sum += n;
  return sum;
}

/** The busiest commands, for the JSON results. */
export function top(counts: CommandCounts, per: number, n = 12): Record<string, number> {
  return Object.fromEntries(
    [...counts]
      .sort(([, a], [, b]) => b - a)
      .slice(0, n)
      .map(([name, calls]) => [name, Math.round((calls / per) * 10) / 10]),
  );
}

/** CPU time (user + system, ms) the Redis server process has used since it started (`INFO cpu`). */
export async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1000;
}

/**
 * Reads of client sockets the Redis server has done since it started (`INFO stats`
 * `total_reads_processed`): a request and the requests pipelined with it are one read, so this
 * counts round trips, whose own cost (the socket's read and write, the event loop's turn) comes
 * on top of the commands'.
 */
export async function redisReads(redis: Redis): Promise<number> {
  const info = await redis.info('stats');
  return Number(/^total_reads_processed:(\d+)/m.exec(info)?.[1] ?? Number.NaN);
}

/** One reading of what a piece of work is measured by. */
interface Reading {
  counts: CommandCounts;
  reads: number;
  redisCpuMs: number;
  processCpuMs: number;
  at: number;
}

export interface CountedWork {
  /** Commands, net of the idle rate. */
  total: number;
  /** Round trips (reads of client sockets, redisReads), net of the idle rate. */
  reads: number;
  gross: number;
  idlePerSecond: number;
  /** CPU time of the Redis server, ms, net of its idle rate. */
  redisCpuMs: number;
  /** CPU time of the processes measured (`processCpu`), ms, net of their idle rate. */
  processCpuMs: number;
  idleRedisCpuPerSecond: number;
  idleProcessCpuPerSecond: number;
  durationMs: number;
  byCommand: CommandCounts;
  /** Where Redis's time went over the work (`profile` given): SLOWLOG summed by script and command. */
  profile?: SlowlogProfile;
}

/**
 * Counts the commands of one piece of work, and the CPU time it cost the Redis server and the
 * processes `processCpu` sums (ms used so far), each net of the idle rate measured just before it
 * (idle workers' blocking reads and sweeps, and the benchmark's own progress probe, running at
 * the same cadence in both). The idle rate is the quietest one-second slice of `idleMs`: other
 * clients of a shared Redis only ever add to it, and an inflated idle rate would make the work
 * look cheaper than it is. Redis CPU is the server's whole process: a Redis of the benchmark's
 * own gives the exact figure, a shared one adds its other clients' work.
 */
export async function countCommands(
  redis: Redis,
  work: () => Promise<void>,
  opts: {
    idleMs: number;
    probe?: () => Promise<unknown>;
    probeEveryMs?: number;
    processCpu?: () => number;
    /** The Redis URL, to profile the work with SLOWLOG (bench/slowlog.ts); its CPU figures are then inflated by the logging. */
    profile?: string;
  },
): Promise<CountedWork> {
  const probing = async (ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      await opts.probe?.();
      await sleep(opts.probeEveryMs ?? 250);
    }
  };
  const read = async (): Promise<Reading> => ({
    counts: await commandCounts(redis),
    reads: await redisReads(redis),
    redisCpuMs: await redisCpuMs(redis),
    processCpuMs: opts.processCpu?.() ?? 0,
    at: Date.now(),
  });
  let idlePerSecond = Number.POSITIVE_INFINITY;
  let idleReadsPerSecond = Number.POSITIVE_INFINITY;
  let idleRedisCpuPerSecond = Number.POSITIVE_INFINITY;
  let idleProcessCpuPerSecond = Number.POSITIVE_INFINITY;
  for (let slice = 0; slice < Math.max(1, Math.round(opts.idleMs / 1000)); slice += 1) {
    const sliceStart = await read();
    await probing(1000);
    const sliceEnd = await read();
    const seconds = (sliceEnd.at - sliceStart.at) / 1000;
    idlePerSecond = Math.min(idlePerSecond, total(countsBetween(sliceStart.counts, sliceEnd.counts)) / seconds);
    idleReadsPerSecond = Math.min(idleReadsPerSecond, (sliceEnd.reads - sliceStart.reads) / seconds);
    idleRedisCpuPerSecond = Math.min(idleRedisCpuPerSecond, (sliceEnd.redisCpuMs - sliceStart.redisCpuMs) / seconds);
    idleProcessCpuPerSecond = Math.min(idleProcessCpuPerSecond, (sliceEnd.processCpuMs - sliceStart.processCpuMs) / seconds);
  }

  const slowlog = opts.profile ? await startSlowlog(redis) : undefined;
  const start = await read();
  await work();
  const end = await read();
  const profile = slowlog && opts.profile ? await finishSlowlog(redis, opts.profile, slowlog) : undefined;
  const durationMs = end.at - start.at;
  const byCommand = countsBetween(start.counts, end.counts);
  const gross = total(byCommand);
  const net = (used: number, idlePerSecond: number) => Math.max(0, used - (idlePerSecond * durationMs) / 1000);
  return {
    total: net(gross, idlePerSecond),
    reads: net(end.reads - start.reads, idleReadsPerSecond),
    gross,
    idlePerSecond,
    redisCpuMs: net(end.redisCpuMs - start.redisCpuMs, idleRedisCpuPerSecond),
    processCpuMs: net(end.processCpuMs - start.processCpuMs, idleProcessCpuPerSecond),
    idleRedisCpuPerSecond,
    idleProcessCpuPerSecond,
    durationMs,
    byCommand,
    profile,
  };
}

export async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/^used_memory:(\d+)/m.exec(info)?.[1]);
}

/** Keys matching `pattern`, with SCAN (never KEYS). */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 5000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/**
 * Bytes the keys under `prefix` take, by `MEMORY USAGE` (exact for this prefix whoever else
 * uses Redis), in all and by kind of key: the key name with the prefix, shard tags, notice and
 * job IDs taken out (`{s}:notice`, `{q}:deadline:job`, `{q}:deadline:delayed`).
 */
export async function keysMemory(redis: Redis, prefix: string): Promise<{ keys: number; bytes: number; byKind: Record<string, number> }> {
  const keys = await scanKeys(redis, `${prefix}:*`);
  let bytes = 0;
  const byKind: Record<string, number> = {};
  for (let i = 0; i < keys.length; i += 1000) {
    const batch = keys.slice(i, i + 1000);
    const pipeline = redis.pipeline();
    for (const key of batch) pipeline.memory('USAGE', key, 'SAMPLES', '0');
    const replies = (await pipeline.exec()) ?? [];
    replies.forEach(([, size], k) => {
      const kind = keyKind(batch[k]!.slice(prefix.length + 1));
      bytes += Number(size ?? 0);
      byKind[kind] = (byKind[kind] ?? 0) + Number(size ?? 0);
    });
  }
  return { keys: keys.length, bytes, byKind };
}

/** Bytes by kind of key, per item, largest first, leaving out kinds under 5 B per item. */
export function perItem(byKind: Record<string, number>, items: number): Record<string, number> {
  return Object.fromEntries(
    Object.entries(byKind)
      .map(([kind, bytes]) => [kind, Math.round(bytes / items)] as const)
      .filter(([, bytes]) => bytes >= 5)
      .sort((a, b) => b[1] - a[1]),
  );
}

function keyKind(key: string): string {
  return key
    .replace(/\{s\d+\}/, '{s}')
    .replace(/:ntc_[0-9a-z]+(-[a-z0-9-]+)?$/, (_, job: string | undefined) => (job ? ':job' : ''))
    .replace(/:[0-9a-f]{16,}$/, '');
}

/** Deletes every key under `prefix` (and only those), on every master of a Cluster. */
export async function deleteKeys(redis: RedisClient, prefix: string): Promise<void> {
  if (isCluster(redis)) {
    for (const node of masterNodes(redis)) for (const key of await scanKeys(node, `${prefix}:*`)) await node.del(key);
    return;
  }
  const keys = await scanKeys(redis, `${prefix}:*`);
  for (let i = 0; i < keys.length; i += 1000) await redis.del(...keys.slice(i, i + 1000));
}
