import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { TEST_API_KEY, waitFor } from './env.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The web in its own process (compiled JavaScript, as the Procfile runs it), on the port it logs. */
export class WebProcess {
  private child: ChildProcess | undefined;
  output = '';
  url = '';

  constructor(private readonly env: Record<string, string>) {}

  /** Starts it and resolves once it logs that it listens (LOG_LEVEL info or lower). */
  async start(): Promise<this> {
    const child = spawn(process.execPath, ['dist/src/server.js'], {
      cwd: ROOT,
      env: { ...process.env, ...this.env, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`the web process exited with ${child.exitCode}: ${this.output}`);
        return /"url":"(http:[^"]+)".*herald web listening/.exec(this.output);
      },
      60_000,
      'the web process to listen',
    ).then((match) => (this.url = match[1]!));
    return this;
  }

  /** One API call with the test key; `timeoutMs` bounds it (an answer that does not come is a hang). */
  async call(method: string, path: string, body?: unknown, opts: { headers?: Record<string, string>; timeoutMs?: number } = {}) {
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TEST_API_KEY}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...opts.headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000),
    });
    const text = await res.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, json, text };
  }

  async stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill(signal);
    await exited;
  }
}

/** Runs the compiled CLI with `args` and the given environment; its exit code and output. */
export async function runCliProcess(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['dist/src/cli.js', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  return { code, stdout, stderr };
}

/** Runs a compiled entry point with only the given environment until it exits (killed after `timeoutMs`): its code and its stdout and stderr together. */
export function runEntryPoint(
  script: string,
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const guard = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(guard);
      resolve({ code, output });
    }),
  );
}
