import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { sleep, waitFor } from './env.js';
import { freePort, RedisServer } from './redis-server.js';

/** The master's name the sentinels watch. */
export const SENTINEL_MASTER = 'herald';

/** One `redis-server --sentinel` with its generated configuration file (Sentinel rewrites it). */
class SentinelProcess {
  readonly dir = mkdtempSync(join(tmpdir(), 'herald-sentinel-'));
  private child: ChildProcess | undefined;
  output = '';

  constructor(
    readonly port: number,
    private readonly password: string,
  ) {}

  async start(master: { port: number; user: string; password: string }, timing: SentinelTiming): Promise<void> {
    const file = join(this.dir, 'sentinel.conf');
    writeFileSync(
      file,
      [
        `port ${this.port}`,
        'bind 127.0.0.1',
        `dir ${this.dir}`,
        `requirepass ${this.password}`,
        // The sentinels know each other by the same password.
        `sentinel sentinel-pass ${this.password}`,
        `sentinel monitor ${SENTINEL_MASTER} 127.0.0.1 ${master.port} 2`,
        `sentinel auth-user ${SENTINEL_MASTER} ${master.user}`,
        `sentinel auth-pass ${SENTINEL_MASTER} ${master.password}`,
        `sentinel down-after-milliseconds ${SENTINEL_MASTER} ${timing.downAfterMs}`,
        `sentinel failover-timeout ${SENTINEL_MASTER} ${timing.failoverTimeoutMs}`,
        `sentinel parallel-syncs ${SENTINEL_MASTER} 1`,
        '',
      ].join('\n'),
    );
    const child = spawn('redis-server', [file, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    this.child = child;
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`sentinel exited with ${child.exitCode}: ${this.output}`);
        return this.ask(async (s) => (await s.ping()) === 'PONG').catch(() => false);
      },
      15_000,
      `sentinel on port ${this.port}`,
    );
  }

  /** A question to this sentinel on a connection of its own. */
  async ask<T>(question: (sentinel: Redis) => Promise<T>): Promise<T> {
    const client = new Redis({
      port: this.port,
      host: '127.0.0.1',
      password: this.password,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 1000,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return await question(client);
    } finally {
      client.disconnect();
    }
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface SentinelTiming {
  /** `down-after-milliseconds`: how long the master may be silent before a sentinel deems it down. */
  downAfterMs: number;
  /** `failover-timeout`. */
  failoverTimeoutMs: number;
}

/**
 * A Sentinel-watched master of a test's own: a master, one replica and three sentinels (quorum
 * 2) on free ports, with an ACL user on the data nodes and a password on the sentinels, as
 * Herald's REDIS_URL credentials and REDIS_SENTINEL_PASSWORD name them. `stop` kills them all
 * and removes their directories; call it in a `finally` / `afterAll`.
 */
export class SentinelSetup {
  readonly user = { name: 'herald', password: 'herald-data-pw' };
  readonly sentinelPassword = 'herald-sentinel-pw';
  servers: RedisServer[] = [];
  sentinels: SentinelProcess[] = [];

  private constructor(
    private readonly timing: SentinelTiming,
    private readonly appendfsync: 'always' | 'everysec',
  ) {}

  /** `appendfsync`: of the data nodes (`everysec` unless asked). */
  static async start(opts: Partial<SentinelTiming> & { appendfsync?: 'always' | 'everysec' } = {}): Promise<SentinelSetup> {
    const { appendfsync = 'everysec', ...timing } = opts;
    const setup = new SentinelSetup({ downAfterMs: 1000, failoverTimeoutMs: 3000, ...timing }, appendfsync);
    try {
      await setup.boot();
    } catch (error) {
      await setup.stop();
      throw error;
    }
    return setup;
  }

  private async boot(): Promise<void> {
    const auth = ['--masteruser', this.user.name, '--masterauth', this.user.password];
    const master = await RedisServer.start({ appendfsync: this.appendfsync, user: this.user, args: auth });
    this.servers.push(master);
    this.servers.push(
      await RedisServer.start({
        appendfsync: 'everysec',
        user: this.user,
        args: [...auth, '--replicaof', '127.0.0.1', String(master.port)],
      }),
    );
    await this.waitForReplicas(master, 1);
    for (let i = 0; i < 3; i += 1) this.sentinels.push(new SentinelProcess(await freePort(), this.sentinelPassword));
    for (const sentinel of this.sentinels) {
      await sentinel.start({ port: master.port, user: this.user.name, password: this.user.password }, this.timing);
    }
    // Each sentinel has found the replica and the two other sentinels (their hello messages).
    await waitFor(
      async () => {
        const views = await Promise.all(
          this.sentinels.map((s) =>
            s.ask(async (c) => {
              const replicas = (await c.call('SENTINEL', 'REPLICAS', SENTINEL_MASTER)) as unknown[];
              const others = (await c.call('SENTINEL', 'SENTINELS', SENTINEL_MASTER)) as unknown[];
              return replicas.length >= 1 && others.length >= 2;
            }),
          ),
        );
        return views.every(Boolean);
      },
      30_000,
      'the sentinels to know the replica and each other',
    );
  }

  /** Herald's variables for this setup: the sentinels, the master's name, the credentials. */
  get env(): Record<string, string> {
    return {
      REDIS_URL: `redis://${this.user.name}:${this.user.password}@127.0.0.1`,
      REDIS_SENTINELS: this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      REDIS_SENTINEL_MASTER: SENTINEL_MASTER,
      REDIS_SENTINEL_PASSWORD: this.sentinelPassword,
    };
  }

  /** The master's port as the sentinels name it (the first that answers). */
  async masterPort(): Promise<number> {
    for (const sentinel of this.sentinels) {
      try {
        const [, port] = (await sentinel.ask((c) => c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_MASTER))) as [string, string];
        return Number(port);
      } catch {
        // this sentinel is down: ask the next
      }
    }
    throw new Error('no sentinel answers');
  }

  /** The server the sentinels name as master. */
  async master(): Promise<RedisServer> {
    const port = await this.masterPort();
    const server = this.servers.find((s) => s.port === port);
    if (!server) throw new Error(`the sentinels name an unknown master on port ${port}`);
    return server;
  }

  /** Kills the master with SIGKILL (a crash); returns it, to restart it later. */
  async killMaster(): Promise<RedisServer> {
    const master = await this.master();
    await master.kill('SIGKILL');
    return master;
  }

  /** Waits until the sentinels have promoted another server than `old` and it answers as master. */
  async waitForPromotion(old: RedisServer, timeoutMs = 30_000): Promise<RedisServer> {
    return waitFor(
      async () => {
        const port = await this.masterPort().catch(() => old.port);
        if (port === old.port) return undefined;
        const server = this.servers.find((s) => s.port === port);
        if (!server) return undefined;
        const role = await this.role(server).catch(() => undefined);
        return role === 'master' ? server : undefined;
      },
      timeoutMs,
      'the sentinels to promote a replica',
    );
  }

  /** Waits until `master` has `count` online replicas. */
  async waitForReplicas(master: RedisServer, count: number, timeoutMs = 30_000): Promise<void> {
    await waitFor(
      async () => {
        const client = master.client({ maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000, lazyConnect: true });
        client.on('error', () => undefined);
        try {
          await client.connect();
          const info = await client.info('replication');
          return (info.match(/^slave\d+:.*state=online/gm) ?? []).length >= count;
        } catch {
          return false;
        } finally {
          client.disconnect();
        }
      },
      timeoutMs,
      `${count} replica(s) of the master on port ${master.port} to be online`,
    );
  }

  /** `role` of a server: master or slave. */
  async role(server: RedisServer): Promise<string> {
    const client = server.client({ maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000, lazyConnect: true });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return String(((await client.call('ROLE')) as unknown[])[0]);
    } finally {
      client.disconnect();
    }
  }

  /** Kills every server and sentinel and removes their directories. */
  async stop(): Promise<void> {
    await Promise.allSettled([...this.sentinels.map((s) => s.stop()), ...this.servers.map((s) => s.stop())]);
    await sleep(0);
  }
}
