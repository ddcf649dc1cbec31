import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { loadConfig, newDevApiKey, warnUnknownVariables } from './config.js';
import { createLogger } from './logger.js';
import { loadSandbox, type SandboxPackage } from './load-sandbox.js';
import type { Sandbox, WebhookTarget } from '@herald/sandbox';
import { startWeb } from './server.js';
import { exitOnSignals } from './signals.js';
import { requireRedis, startupMessage } from './startup.js';
import { startWorker } from './worker.js';

type Env = Record<string, string | undefined>;

/**
 * `npm start`: web and worker in one process, on 127.0.0.1 unless HOST says otherwise. In
 * sandbox mode (the default) the provider emulators run here too, push their webhooks to the
 * web (unless HERALD_SANDBOX_WEBHOOKS=0), and without HERALD_API_KEYS a dev API key is made and
 * printed to the terminal (never to the log).
 */
async function main(): Promise<void> {
  const log = createLogger('herald');
  const env: Env = { ...process.env, HOST: process.env.HOST ?? '127.0.0.1' };
  const sandboxMode = (env.HERALD_PROVIDERS ?? 'sandbox') === 'sandbox';
  // The sandbox package is loaded only to run the emulators here.
  const emulators = sandboxMode && !env.POSTMARK_API_URL && !env.TWILIO_API_URL ? await loadSandbox() : undefined;
  let sandbox: Sandbox | undefined;
  if (emulators) {
    sandbox = await emulators.startSandbox({ port: Number(env.HERALD_SANDBOX_PORT ?? 4010) });
    env.POSTMARK_API_URL = sandbox.url;
    env.TWILIO_API_URL = sandbox.url;
    env.SENDGRID_API_URL ??= sandbox.url;
    // The feed providers (SES, AWS SMS) and their events queues, on the same emulator.
    env.AWS_ENDPOINT_URL_SESV2 ??= sandbox.url;
    env.AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2 ??= sandbox.url;
    env.AWS_ENDPOINT_URL_SQS ??= sandbox.url;
    env.MAILGUN_API_URL ??= sandbox.url;
    env.INFRAI_API_URL ??= sandbox.url;
  }
  // A developer's event listener is on this machine: npm start lets endpoints reach private addresses.
  if (sandboxMode) env.HERALD_ALLOW_PRIVATE_EVENT_URLS ??= '1';
  const webhooks = emulators && webhooksWanted(env) ? await sandboxWebhooks(env, emulators) : undefined;
  const devApiKey = sandboxMode && !env.HERALD_API_KEYS?.trim() ? newDevApiKey() : undefined;
  if (devApiKey) env.HERALD_API_KEYS = devApiKey;
  const config = loadConfig(env);
  warnUnknownVariables(env, log);
  await requireRedis(config.redis);
  const worker = await startWorker(config, { logger: log });
  // One archive for the process: the web reads through the worker's.
  const web = await startWeb(config, { archive: worker.archive });
  if (sandbox && webhooks) {
    sandbox.configureWebhooks({ ...webhooks.target, url: web.url, publicUrl: config.publicUrl, twilioAuthToken: config.twilio.authToken });
  }
  const lines = [
    '',
    `  Herald is running (${config.providers} providers) at ${web.url}`,
    sandbox
      ? `  Sandbox emulators (${config.emailProvider}, ${config.smsProvider}) at ${sandbox.url} (see ${sandbox.url}/__sandbox/sms)`
      : '',
    sandbox && webhooks && webhooks.providers.length > 0
      ? `  Webhooks on: the emulators push ${webhooks.providers.join(', ')} events to ${web.url}/webhooks/… (HERALD_SANDBOX_WEBHOOKS=0: polling only)`
      : '',
    devApiKey ? `  Dev API key: ${devApiKey}` : '',
    devApiKey ? `  export HERALD_KEY=${devApiKey}` : '',
    // Events to callers, seen with no code: the sandbox's receiver stands in for the caller's endpoint.
    sandbox
      ? `  Hear back instead of polling: curl -s ${web.url}/v1/event-endpoints -H "Authorization: Bearer $HERALD_KEY" -H 'Content-Type: application/json' -d '{"url":"${sandbox.url}/__sandbox/events","events":["notice.completed","fallback.decided","notice.failed"]}'`
      : '',
    sandbox ? `  then watch ${sandbox.url}/__sandbox/events (add ?secret=<the whsec_ secret it answered> to verify the signatures)` : '',
    '',
  ];
  process.stdout.write(lines.filter((l, i) => l !== '' || i === 0 || i === lines.length - 1).join('\n') + '\n');
  exitOnSignals(async () => {
    await web.close();
    await worker.close();
    await sandbox?.close();
  }, log);
}

/** HERALD_SANDBOX_WEBHOOKS: on unless `0`, `false`, `no` or `off`. */
function webhooksWanted(env: Env): boolean {
  return !['0', 'false', 'no', 'off'].includes((env.HERALD_SANDBOX_WEBHOOKS ?? '').trim().toLowerCase());
}

/**
 * Turns the webhooks of the chosen providers on in `env`: fresh secrets (unless the variable is
 * set) and HERALD_PUBLIC_URL at the web's own address, which is fixed before the web listens
 * (Twilio signs the URL, and the worker puts it in each SMS's status callback).
 */
async function sandboxWebhooks(
  env: Env,
  { urlHost, sendgridWebhookKeys, mailgunWebhookSigningKey }: SandboxPackage,
): Promise<{ target: Omit<WebhookTarget, 'url'>; providers: string[] }> {
  if (env.PORT?.trim() === '0') env.PORT = String(await freePort(env.HOST!));
  env.HERALD_PUBLIC_URL = env.HERALD_PUBLIC_URL?.trim() || `http://${urlHost(env.HOST!)}:${env.PORT?.trim() || '3000'}`;
  const email = env.HERALD_EMAIL_PROVIDER?.trim() || 'postmark';
  const target: Omit<WebhookTarget, 'url'> = {};
  const providers: string[] = [];
  if (email === 'postmark') {
    target.postmarkAuth = env.HERALD_POSTMARK_WEBHOOK_AUTH =
      env.HERALD_POSTMARK_WEBHOOK_AUTH?.trim() || `postmark:${randomBytes(18).toString('base64url')}`;
    providers.push('postmark');
  } else if (email === 'sendgrid' && !env.SENDGRID_WEBHOOK_PUBLIC_KEY?.trim()) {
    // Only a key pair made here can sign: a verification key given from outside leaves SendGrid to polling.
    const keys = sendgridWebhookKeys();
    env.SENDGRID_WEBHOOK_PUBLIC_KEY = keys.publicKey;
    target.sendgridPrivateKey = keys.privateKey;
    providers.push('sendgrid');
  } else if (email === 'mailgun') {
    target.mailgunSigningKey = env.MAILGUN_WEBHOOK_SIGNING_KEY = env.MAILGUN_WEBHOOK_SIGNING_KEY?.trim() || mailgunWebhookSigningKey();
    providers.push('mailgun');
  }
  // Twilio signs with the account's auth token; the route takes only one set explicitly, so the
  // run makes its own (the emulator takes any token for the API).
  if ((env.HERALD_SMS_PROVIDER?.trim() || 'twilio') === 'twilio') {
    env.TWILIO_AUTH_TOKEN = env.TWILIO_AUTH_TOKEN?.trim() || randomBytes(18).toString('base64url');
    providers.push('twilio');
  }
  return { target, providers };
}

/** A port free on `host` now: the web's address must be known before it listens. */
async function freePort(host: string): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, host, resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error(`no free port on ${host}`);
  return address.port;
}

main().catch((error: unknown) => {
  console.error(startupMessage(error, process.env));
  process.exit(1);
});
