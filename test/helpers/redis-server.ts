import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { sleep } from './env.js';

/** A TCP port nothing listens on right now (the OS picks it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Certificates a test made for a TLS `redis-server`: a CA of its own, and the server's pair it signed for 127.0.0.1. */
export interface TlsFiles {
  dir: string;
  ca: string;
  cert: string;
  key: string;
}

/** Makes a throwaway CA and a server certificate for 127.0.0.1 / localhost in a temporary directory. */
export function makeTlsFiles(): TlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'herald-tls-'));
  const at = (name: string) => join(dir, name);
  // `@name`: a file of the directory (temporary paths hold no spaces).
  const openssl = (command: string) =>
    execFileSync(
      'openssl',
      command.split(' ').map((word) => (word.startsWith('@') ? at(word.slice(1)) : word)),
      { stdio: 'pipe' },
    );
  openssl('req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=herald-test-ca -keyout @ca.key -out @ca.crt');
  openssl('req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout @server.key -out @server.csr');
  writeFileSync(at('san.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  openssl('x509 -req -days 2 -in @server.csr -CA @ca.crt -CAkey @ca.key -CAcreateserial -out @server.crt -extfile @san.cnf');
  return { dir, ca: at('ca.crt'), cert: at('server.crt'), key: at('server.key') };
}

/** What a test's `redis-server` is started with, beyond its port and directory. */
export interface RedisServerOptions {
  appendfsync?: 'always' | 'everysec';
  /** TLS only (the plain port is off); clients must trust `tls.ca` (NODE_EXTRA_CA_CERTS for a child process). */
  tls?: TlsFiles;
  /** An ACL user with every right; the `default` user is then off. */
  user?: { name: string; password: string };
  /** More `redis-server` arguments (`--replicaof host port`, ...). */
  args?: string[];
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
    private readonly opts: RedisServerOptions,
  ) {}

  /** Starts a server on a free port and resolves once it answers PING. */
  static async start(opts: RedisServerOptions = {}): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), opts);
    await server.start();
    return server;
  }

  /** The server's URL, with its scheme (`rediss://` with TLS) and the ACL user's credentials. */
  get url(): string {
    const user = this.opts.user ? `${encodeURIComponent(this.opts.user.name)}:${encodeURIComponent(this.opts.user.password)}@` : '';
    return `${this.opts.tls ? 'rediss' : 'redis'}://${user}127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts (or restarts) the server on its port and directory; it loads what the AOF holds. */
  async start(): Promise<void> {
    if (this.running) return;
    const { tls, user } = this.opts;
    const child = spawn(
      'redis-server',
      [
        ...(tls
          ? ['--port', '0', '--tls-port', String(this.port), '--tls-cert-file', tls.cert, '--tls-key-file', tls.key]
          : ['--port', String(this.port)]),
        ...(tls ? ['--tls-ca-cert-file', tls.ca, '--tls-auth-clients', 'no', '--tls-replication', 'yes'] : []),
        ...(user ? ['--user', user.name, 'on', `>${user.password}`, '~*', '&*', '+@all', '--user', 'default', 'off'] : []),
        '--bind',
        '127.0.0.1',
        '--appendonly',
        'yes',
        '--appendfsync',
        this.opts.appendfsync ?? 'always',
        '--dir',
        this.dir,
        '--save',
        '',
        '--logfile',
        '',
        ...(this.opts.args ?? []),
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

  /** Sends a signal without waiting for an exit: SIGSTOP freezes the server (its sockets stay open), SIGCONT thaws it. */
  signal(signal: NodeJS.Signals): void {
    if (this.running) this.child!.kill(signal);
  }

  /** Stops the server and removes its directory. */
  async stop(): Promise<void> {
    this.signal('SIGCONT');
    await this.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** A client of this server (trusting its test CA), for the test's own reads. */
  client(options: RedisOptions = {}): Redis {
    return new Redis(this.url, { ...(this.opts.tls ? { tls: { ca: readFileSync(this.opts.tls.ca) } } : {}), ...options });
  }

  private async answers(): Promise<boolean> {
    const probe = this.client({ lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 500 });
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
