import type { AddressInfo } from 'node:net';
import { testPrefix, waitFor } from './env.js';
import { startStack, WorkerProcess, type Stack } from './stack.js';

/** The URL the test's Herald believes providers reach it at (HERALD_PUBLIC_URL): Twilio signs it. */
export const WEBHOOK_PUBLIC_URL = 'https://herald.example.test';
/** HERALD_POSTMARK_WEBHOOK_AUTH of the test's Herald. */
export const POSTMARK_WEBHOOK_AUTH = 'herald-hooks:pm-secret-of-the-test';
/** TWILIO_AUTH_TOKEN of the test's Herald and of the emulator's signatures. */
export const TWILIO_WEBHOOK_TOKEN = 'twilio-token-of-the-test';

export interface WebhookStack extends Stack {
  /** Where the web app listens (the outbox pushes here). */
  url: string;
  /** The worker, in its own process (compiled JavaScript). */
  workerProcess: WorkerProcess;
  /** POSTs raw bytes to the listening web app, as a provider would. */
  post(path: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }>;
  /** The Prometheus text of /metrics (uncached). */
  metrics(): Promise<string>;
}

/**
 * Herald with its webhook routes on (Postmark, Twilio), the web app listening on a port of its
 * own, the sandbox's webhook outbox pushing to it, and a worker in its own process. The Twilio
 * adapter's sends then carry StatusCallback URLs under WEBHOOK_PUBLIC_URL; the outbox sends
 * them to the listening app, signed over the public URL as Twilio signs the URL it called.
 */
export async function startWebhookStack(label: string, env: Record<string, string> = {}): Promise<WebhookStack> {
  const stack = await startStack({
    prefix: testPrefix(label),
    inProcessWorker: false,
    env: {
      HERALD_POSTMARK_WEBHOOK_AUTH: POSTMARK_WEBHOOK_AUTH,
      HERALD_PUBLIC_URL: WEBHOOK_PUBLIC_URL,
      TWILIO_AUTH_TOKEN: TWILIO_WEBHOOK_TOKEN,
      HERALD_METRICS_CACHE_MS: '0',
      ...env,
    },
  });
  await stack.web.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = stack.web.app.server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  stack.sandbox.configureWebhooks({
    url,
    publicUrl: WEBHOOK_PUBLIC_URL,
    postmarkAuth: POSTMARK_WEBHOOK_AUTH,
    twilioAuthToken: TWILIO_WEBHOOK_TOKEN,
  });
  const workerProcess = new WorkerProcess({ ...stack.env, LOG_LEVEL: 'info' }).start();
  try {
    await waitFor(
      async () => workerProcess.ready || (workerProcess.exitCode !== null ? Promise.reject(new Error(workerProcess.output)) : false),
      60_000,
      'the worker process to run',
    );
  } catch (error) {
    await workerProcess.stop();
    await stack.close();
    throw error;
  }
  return {
    ...stack,
    url,
    workerProcess,
    async post(path, headers, body) {
      const res = await fetch(`${url}${path}`, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
      return { status: res.status, text: await res.text() };
    },
    async metrics() {
      return (await stack.web.app.inject({ method: 'GET', url: '/metrics' })).body;
    },
    async close() {
      stack.sandbox.configureWebhooks(undefined);
      await workerProcess.stop();
      await stack.close();
    },
  };
}
