/**
 * `BENCH_PIN=1`: the cost part runs with Redis on a core of its own. On a small machine the web,
 * worker and emulator processes keep every core busy, and Redis, preempted and sharing caches with
 * them, spends more CPU on the same calls; Herald's processes spend about three times the floor
 * worker's CPU per notice, so this weighs on Herald's figure more than on its floor's, which is
 * not what the ratio of the two is meant to say. Pinned, Redis (every thread of it) runs on core
 * 0 and this process (every thread, and every process it starts from then on) on the others, as
 * a deployment whose Redis has a host of its own; both get every core back after. `taskset`
 * (util-linux) does it; Redis must be a local process of this machine.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { Redis } from 'ioredis';

export const PIN = process.env.BENCH_PIN === '1';

/** The local process of the Redis at the other end of `redis` (`INFO server` process_id). */
async function redisPid(redis: Redis): Promise<number> {
  const pid = Number(/^process_id:(\d+)/m.exec(await redis.info('server'))?.[1]);
  const comm = `/proc/${pid}/comm`;
  if (!(pid > 0) || !existsSync(comm) || !readFileSync(comm, 'utf8').startsWith('redis-server'))
    throw new Error(`BENCH_PIN=1 needs a redis-server of this machine; the one at REDIS_URL says it is process ${pid}`);
  return pid;
}

const setAffinity = (pid: number, cores: string) => execFileSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { stdio: 'ignore' });

/** Runs `work` with Redis on core 0 and this process on the other cores; every core back after. */
export async function withRedisPinned<T>(redis: Redis, work: () => Promise<T>): Promise<T> {
  const count = cpus().length;
  if (count < 2) throw new Error('BENCH_PIN=1 needs two cores or more');
  const pid = await redisPid(redis);
  const all = `0-${count - 1}`;
  setAffinity(pid, '0');
  setAffinity(process.pid, `1-${count - 1}`);
  try {
    return await work();
  } finally {
    setAffinity(process.pid, all);
    setAffinity(pid, all);
  }
}
