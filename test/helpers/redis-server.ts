import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { sleep } from './env.js';

/** A TCP port nothing listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A `redis-server` of a test's own, on a free port, with the append-only file in a temporary
 * directory, so that the test may kill and restart it without touching the shared Redis.
 * `appendfsync always` makes every acknowledged write survive a kill; `everysec` may lose up
 * to the last second of them.
 */
export class RedisServer {
  readonly dir = mkdtempSync(join(tmpdir(), 'herald-redis-'));
  private child: ChildProcess | undefined;
  /** Times the server was started, the first start included. */
  starts = 0;

  private constructor(
    readonly port: number,
    private readonly fsync: 'always' | 'everysec',
  ) {}

  /** Starts a server on a free port and resolves once it answers PING. */
  static async start(opts: { appendfsync?: 'always' | 'everysec' } = {}): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), opts.appendfsync ?? 'always');
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts (or restarts) the server on its port and directory; it loads what the AOF holds. */
  async start(): Promise<void> {
    if (this.running) return;
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--appendonly',
        'yes',
        '--appendfsync',
        this.fsync,
        '--dir',
        this.dir,
        '--save',
        '',
        '--logfile',
        '',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    this.child = child;
    this.starts += 1;
    const until = Date.now() + 15_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}: ${stderr}`);
      if (await this.answers()) return;
      if (Date.now() > until) throw new Error(`redis-server on port ${this.port} did not answer: ${stderr}`);
      await sleep(50);
    }
  }

  /** Kills the server (SIGKILL by default: a crash, nothing flushed beyond what fsync wrote). */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
  }

  /** Stops the server and removes its directory. */
  async stop(): Promise<void> {
    await this.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async answers(): Promise<boolean> {
    const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 500 });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      // PING answers LOADING while the AOF is read back; only a ready server counts.
      return (await probe.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      probe.disconnect();
    }
  }
}
