import { startSandbox, type Sandbox } from '../../src/sandbox/index.js';
import { mailgunWebhookSigningKey, sendgridWebhookKeys, type SendgridWebhookKeys } from '../../src/sandbox/webhook-keys.js';
import type { StoredEntry } from '../../src/store/notices.js';
import { testEnv, waitFor } from './env.js';
import { cleanUp } from './herald.js';
import { WorkerProcess } from './stack.js';
import { WebProcess } from './web-process.js';

/**
 * Herald as providers reach it: the web and a worker in processes of their own (compiled, as the
 * Procfile runs them), the web listening on a port, and the sandbox emulators pushing their
 * messages' webhooks to it, signed with secrets made for the run. Real Redis, the test's prefix.
 */
export interface WebhookStack {
  env: Record<string, string>;
  sandbox: Sandbox;
  web: WebProcess;
  worker: WorkerProcess;
  /** The SendGrid key pair (Herald holds the public key) and the Mailgun signing key of this run. */
  sendgridKeys: SendgridWebhookKeys;
  mailgunSigningKey: string;
  createNotice(body: Record<string, unknown>): Promise<string>;
  view(id: string): Promise<any>;
  events(id: string): Promise<StoredEntry[]>;
  waitForState(id: string, states: string[], timeoutMs?: number): Promise<any>;
  /** SMS the emulator received for a phone number. */
  smsTo(phone: string): number;
  close(): Promise<void>;
}

/** Starts sandbox, web process and worker process, with the webhook secrets set on both sides. */
export async function startWebhookStack(opts: { prefix: string; env?: Record<string, string> }): Promise<WebhookStack> {
  const sandbox = await startSandbox({ port: 0 });
  const sendgridKeys = sendgridWebhookKeys();
  const mailgunSigningKey = mailgunWebhookSigningKey();
  const env = testEnv(opts.prefix, {
    POSTMARK_API_URL: sandbox.url,
    TWILIO_API_URL: sandbox.url,
    SENDGRID_API_URL: sandbox.url,
    MAILGUN_API_URL: sandbox.url,
    MAILGUN_DOMAIN: 'mg.sandbox.example',
    SENDGRID_WEBHOOK_PUBLIC_KEY: sendgridKeys.publicKey,
    MAILGUN_WEBHOOK_SIGNING_KEY: mailgunSigningKey,
    LOG_LEVEL: 'warn',
    // The tests read /metrics before and after what they count.
    HERALD_METRICS_CACHE_MS: '0',
    ...opts.env,
  });
  let web: WebProcess | undefined;
  let worker: WorkerProcess | undefined;
  const close = async () => {
    await worker?.stop('SIGTERM');
    await web?.stop('SIGTERM');
    await sandbox.close();
    await cleanUp(opts.prefix);
  };
  try {
    web = await new WebProcess(env).start();
    worker = new WorkerProcess({ ...env, LOG_LEVEL: 'info' }).start();
    const running = worker;
    await waitFor(async () => running.ready, 60_000, 'the worker process to run');
  } catch (error) {
    await close();
    throw error;
  }
  sandbox.configureWebhooks({ url: web.url, sendgridPrivateKey: sendgridKeys.privateKey, mailgunSigningKey });
  const webProcess = web;
  const stack: WebhookStack = {
    env,
    sandbox,
    web: webProcess,
    worker,
    sendgridKeys,
    mailgunSigningKey,
    async createNotice(body) {
      const res = await webProcess.call('POST', '/v1/notices', body);
      if (res.status !== 202) throw new Error(`create answered ${res.status}: ${res.text}`);
      return res.json.id as string;
    },
    async view(id) {
      return (await webProcess.call('GET', `/v1/notices/${id}`)).json;
    },
    async events(id) {
      return (await webProcess.call('GET', `/v1/notices/${id}/events`)).json.events as StoredEntry[];
    },
    async waitForState(id, states, timeoutMs = 30_000) {
      return waitFor(
        async () => {
          const view = await stack.view(id);
          return states.includes(view.state) ? view : undefined;
        },
        timeoutMs,
        `notice ${id} to reach ${states.join('|')}`,
      );
    },
    smsTo(phone) {
      return sandbox.sms().filter((m) => m.to === phone).length;
    },
    close,
  };
  return stack;
}
