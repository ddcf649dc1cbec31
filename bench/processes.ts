/** The processes a benchmark runs: compiled entry points started with their own environment. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** The repository root: bench/*.js is compiled into dist/bench/. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A TCP port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A Node process running one compiled script (`dist/...js`), with what it printed. */
export class NodeProcess {
  private child: ChildProcess | undefined;
  output = '';

  constructor(
    private readonly script: string,
    private readonly env: Record<string, string>,
  ) {}

  start(): this {
    // BENCH_CPU_PROF=<dir>: each process writes its V8 CPU profile there as it exits.
    const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
    const child = spawn(process.execPath, [...profile, this.script], {
      cwd: ROOT,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Kept short: a process that logs per request would otherwise fill memory.
    const keep = (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.child = child;
    return this;
  }

  /** The process ID, once started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends `signal` and resolves once the process is gone. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    const forced = setTimeout(() => child.kill('SIGKILL'), 25_000);
    await exited;
    clearTimeout(forced);
  }
}

/** Polls `probe` every `everyMs` until it is truthy; throws after `timeoutMs`, naming `what`. */
export async function until<T>(
  probe: () => Promise<T | false | null | undefined>,
  timeoutMs: number,
  what: string,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves once `url` answers 200. */
export async function httpReady(url: string, proc: NodeProcess, timeoutMs = 120_000): Promise<void> {
  await until(
    async () => {
      if (!proc.running) throw new Error(`process exited before ${url} answered:\n${proc.output}`);
      try {
        return (await fetch(url)).status === 200;
      } catch {
        return false;
      }
    },
    timeoutMs,
    url,
    100,
  );
}

/** Clock ticks per second of /proc/<pid>/stat's CPU times (Linux's USER_HZ, 100 on every common build). */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system, ms) a process has used so far, from /proc; 0 once it is gone. */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** CPU time (user + system, ms) this process has used so far. */
export function ownCpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
