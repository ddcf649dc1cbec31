import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { Config } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { startWorker, type WorkerHandle } from '../../src/worker.js';
import { testConfig, testEnv } from './env.js';
import { cleanUp, startWebUnderTest, type WebUnderTest } from './herald.js';
import { noticeClient, type ApiCall, type NoticeClient } from './notice-client.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface Stack extends NoticeClient {
  config: Config;
  env: Record<string, string>;
  sandbox: Sandbox;
  web: WebUnderTest;
  /** In-process worker, when the stack was started with one. */
  worker: WorkerHandle | undefined;
  close(): Promise<void>;
}

/**
 * Herald as a test runs it: the sandbox emulators, the web app (in-process, `inject`), and
 * optionally an in-process worker, all on real Redis under the test's own prefix.
 */
export async function startStack(opts: {
  prefix: string;
  env?: Record<string, string>;
  inProcessWorker?: boolean;
  workerLogger?: Logger;
}): Promise<Stack> {
  const sandbox = await startSandbox({ port: 0 });
  const env = testEnv(opts.prefix, {
    POSTMARK_API_URL: sandbox.url,
    TWILIO_API_URL: sandbox.url,
    SENDGRID_API_URL: sandbox.url,
    // The feed providers (HERALD_EMAIL_PROVIDER=ses, HERALD_SMS_PROVIDER=aws-sms) and their events queues.
    AWS_ENDPOINT_URL_SESV2: sandbox.url,
    AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2: sandbox.url,
    AWS_ENDPOINT_URL_SQS: sandbox.url,
    INFRAI_API_URL: sandbox.url,
    LOG_LEVEL: 'warn',
    ...opts.env,
  });
  const config = testConfig(opts.prefix, env);
  const web = await startWebUnderTest(config);
  const worker =
    opts.inProcessWorker === false
      ? undefined
      : await startWorker(config, { logger: opts.workerLogger ?? createLogger('herald-test-worker', 'silent') });

  const call: ApiCall = async (method, path, body, headers) => {
    const res = await web.call(method, path, body, headers);
    let json: unknown;
    try {
      json = res.json();
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, json, text: res.body };
  };
  return {
    config,
    env,
    sandbox,
    web,
    worker,
    ...noticeClient(call, sandbox, 20_000),
    async close() {
      await worker?.close();
      await web.close();
      await sandbox.close();
      await cleanUp(opts.prefix);
    },
  };
}

/** A worker in its own process (compiled JavaScript, as the Procfile runs it). */
export class WorkerProcess {
  private child: ChildProcess | undefined;
  exitCode: number | null = null;
  output = '';
  private outputAtStart = 0;

  /** `nodeArgs` go to node before the script (`--import` a hook). */
  constructor(
    private readonly env: Record<string, string>,
    private readonly nodeArgs: string[] = [],
  ) {}

  start(): this {
    this.exitCode = null;
    this.outputAtStart = this.output.length;
    this.child = spawn(process.execPath, [...this.nodeArgs, 'dist/src/worker.js'], {
      cwd: ROOT,
      env: { ...process.env, ...this.env, LOG_LEVEL: this.env.LOG_LEVEL ?? 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    this.child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    this.child.on('exit', (code, signal) => (this.exitCode = code ?? (signal ? 128 : -1)));
    return this;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * True once this start of the process has logged that it runs, i.e. its signal handlers are
   * installed (needs LOG_LEVEL info or lower).
   */
  get ready(): boolean {
    return this.exitCode === null && this.output.includes('herald worker running', this.outputAtStart);
  }

  /** Sends a signal and resolves with the exit code once the process is gone. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return this.exitCode;
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill(signal);
    return exited;
  }
}
