import { startSandbox, type Sandbox } from '@herald/sandbox';
import { mailgunWebhookSigningKey, sendgridWebhookKeys, type SendgridWebhookKeys } from '@herald/sandbox/webhook-keys';
import { testEnv, waitFor } from './env.js';
import { noticeClient, type NoticeClient } from './notice-client.js';
import { cleanUp } from './herald.js';
import { WorkerProcess } from './stack.js';
import { WebProcess } from './web-process.js';

/**
 * Herald as providers reach it: the web and a worker in processes of their own (compiled, as the
 * Procfile runs them), the web listening on a port, and the sandbox emulators pushing their
 * messages' webhooks to it, signed with secrets made for the run. Real Redis, the test's prefix.
 */
export interface WebhookStack extends NoticeClient {
  env: Record<string, string>;
  sandbox: Sandbox;
  web: WebProcess;
  worker: WorkerProcess;
  /** The SendGrid key pair (Herald holds the public key) and the Mailgun signing key of this run. */
  sendgridKeys: SendgridWebhookKeys;
  mailgunSigningKey: string;
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
  return {
    env,
    sandbox,
    web: webProcess,
    worker,
    sendgridKeys,
    mailgunSigningKey,
    ...noticeClient((method, path, body, headers) => webProcess.call(method, path, body, { headers }), sandbox, 30_000),
    close,
  };
}
