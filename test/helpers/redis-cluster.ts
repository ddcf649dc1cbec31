import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { freePort } from './redis-server.js';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every cluster node started by this process, so that an exit stops them even when a test failed. */
const started = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of started) child.kill('SIGKILL');
});

/** One `redis-server` of a cluster, on its own port and directory. */
export class ClusterNode {
  readonly dir = mkdtempSync(join(tmpdir(), 'herald-cluster-'));
  child: ChildProcess | undefined;

  constructor(
    readonly port: number,
    /** With an append-only file, fsynced so (a restarted node keeps what it acknowledged); none by default. */
    private readonly appendfsync?: 'always' | 'everysec',
  ) {}

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        // A dead master is failed over within a few seconds.
        '--cluster-node-timeout',
        '2000',
        // The masters that run keep serving their slots while another's are being failed over.
        '--cluster-require-full-coverage',
        'no',
        // Replicas copy their master at once (a replica that never synced cannot take over).
        '--repl-diskless-sync-delay',
        '0',
        ...(this.appendfsync ? ['--appendonly', 'yes', '--appendfsync', this.appendfsync] : ['--appendonly', 'no']),
        '--save',
        '',
        '--dir',
        this.dir,
        '--logfile',
        'redis.log',
      ],
      { stdio: ['ignore', 'ignore', 'ignore'] },
    );
    started.add(child);
    child.once('exit', () => started.delete(child));
    this.child = child;
  }

  /** SIGKILL: a crash. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  /** A plain connection to this node alone. */
  connect(): Redis {
    const redis = new Redis(this.port, '127.0.0.1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 1000,
    });
    redis.on('error', () => undefined);
    return redis;
  }

  /** The reply of a command to this node, or undefined when it does not answer. */
  async ask(...command: string[]): Promise<string | undefined> {
    const redis = this.connect();
    try {
      await redis.connect();
      return String(await redis.call(command[0]!, ...command.slice(1)));
    } catch {
      return undefined;
    } finally {
      redis.disconnect();
    }
  }
}

/**
 * A real Redis Cluster of the test's own: `masters` masters with `replicasPerMaster` replicas
 * each, every node a `redis-server` on a free port with its own temporary directory, created
 * with `redis-cli --cluster create`. `stop()` kills them all and removes their directories; an
 * exit of the test process kills any left running.
 */
export class RedisCluster {
  private constructor(readonly nodes: ClusterNode[]) {}

  static async start(
    opts: { masters?: number; replicasPerMaster?: number; appendfsync?: 'always' | 'everysec' } = {},
  ): Promise<RedisCluster> {
    const masters = opts.masters ?? 3;
    const replicas = opts.replicasPerMaster ?? 1;
    const ports: number[] = [];
    while (ports.length < masters * (1 + replicas)) {
      const port = await freePort();
      // The cluster bus listens on port + 10000: both must be free and below 65536.
      if (port < 55_000 && !ports.includes(port)) ports.push(port);
    }
    const cluster = new RedisCluster(ports.map((port) => new ClusterNode(port, opts.appendfsync)));
    try {
      for (const node of cluster.nodes) node.start();
      for (const node of cluster.nodes)
        await waitUntil(async () => (await node.ask('PING')) === 'PONG', 15_000, `node ${node.port} to answer`);
      await run(
        'redis-cli',
        ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
        { timeout: 60_000 },
      );
      await cluster.waitHealthy(60_000);
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  /** `host:port,…` of every node, as REDIS_CLUSTER_NODES takes them. */
  get seeds(): string {
    return this.nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
  }

  /** The running nodes that are masters now. */
  async masters(): Promise<ClusterNode[]> {
    const found: ClusterNode[] = [];
    for (const node of this.nodes) {
      if (!node.running) continue;
      const role = await node.ask('ROLE');
      if (role?.startsWith('master')) found.push(node);
    }
    return found;
  }

  /**
   * Resolves once every running node says `cluster_state:ok` and sees every slot served by a
   * master that runs (after a kill: once the dead master's replica has taken over), and every
   * running replica has its master's data (its link is up).
   */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    await waitUntil(
      async () => {
        for (const node of this.nodes.filter((n) => n.running)) {
          const info = await node.ask('CLUSTER', 'INFO');
          if (!info?.includes('cluster_state:ok')) return false;
          const replication = await node.ask('INFO', 'replication');
          if (replication?.includes('role:slave') && !replication.includes('master_link_status:up')) return false;
          const nodes = await node.ask('CLUSTER', 'NODES');
          if (!nodes) return false;
          for (const line of nodes.trim().split('\n')) {
            const [, address, flags, , , , , , ...slots] = line.split(' ');
            if (!flags!.includes('master') || slots.length === 0) continue;
            const port = Number(address!.split(':')[1]!.split('@')[0]);
            if (flags!.includes('fail') || !this.nodes.find((n) => n.port === port)?.running) return false;
          }
        }
        return true;
      },
      timeoutMs,
      'the cluster to be healthy',
    );
  }

  /** A Cluster client for the test's own reads. */
  client(): Cluster {
    const cluster = new Cluster(
      this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
      { redisOptions: { maxRetriesPerRequest: 3, connectTimeout: 1000 }, slotsRefreshInterval: 1000 },
    );
    cluster.on('error', () => undefined);
    return cluster;
  }

  /** The master serving `slot` (from a running node's view). */
  async masterOfSlot(slot: number): Promise<ClusterNode | undefined> {
    for (const node of this.nodes.filter((n) => n.running)) {
      const nodes = await node.ask('CLUSTER', 'NODES');
      if (!nodes) continue;
      for (const line of nodes.trim().split('\n')) {
        const [, address, flags, , , , , , ...slots] = line.split(' ');
        if (!flags!.includes('master') || flags!.includes('fail')) continue;
        const serves = slots.some((range) => {
          const [from, to] = range.split('-').map(Number);
          return slot >= from! && slot <= (to ?? from!);
        });
        if (serves) return this.nodes.find((n) => n.port === Number(address!.split(':')[1]!.split('@')[0]));
      }
    }
    return undefined;
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill()));
    for (const node of this.nodes) rmSync(node.dir, { recursive: true, force: true });
  }
}

async function waitUntil(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}
