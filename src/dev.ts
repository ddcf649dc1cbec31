import { ConfigError, loadConfig, newDevApiKey } from './config.js';
import { createLogger } from './logger.js';
import { startSandbox, type Sandbox } from './sandbox/index.js';
import { startWeb } from './server.js';
import { exitOnSignals } from './signals.js';
import { startWorker } from './worker.js';

/**
 * `npm start`: web and worker in one process, on 127.0.0.1 unless HOST says otherwise. In
 * sandbox mode (the default) the provider emulators run here too, and without
 * HERALD_API_KEYS a dev API key is made and printed to the terminal (never to the log).
 */
async function main(): Promise<void> {
  const log = createLogger('herald');
  const env: Record<string, string | undefined> = { ...process.env, HOST: process.env.HOST ?? '127.0.0.1' };
  const sandboxMode = (env.HERALD_PROVIDERS ?? 'sandbox') === 'sandbox';
  let sandbox: Sandbox | undefined;
  if (sandboxMode && !env.POSTMARK_API_URL && !env.TWILIO_API_URL) {
    sandbox = await startSandbox({ port: Number(env.HERALD_SANDBOX_PORT ?? 4010) });
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
  const devApiKey = sandboxMode && !env.HERALD_API_KEYS?.trim() ? newDevApiKey() : undefined;
  if (devApiKey) env.HERALD_API_KEYS = devApiKey;
  const config = loadConfig(env);
  const worker = await startWorker(config, { logger: log });
  // One archive for the process: the web reads through the worker's.
  const web = await startWeb(config, { archive: worker.archive });
  const lines = [
    '',
    `  Herald is running (${config.providers} providers) at ${web.url}`,
    sandbox
      ? `  Sandbox emulators (${config.emailProvider}, ${config.smsProvider}) at ${sandbox.url} (see ${sandbox.url}/__sandbox/sms)`
      : '',
    devApiKey ? `  Dev API key: ${devApiKey}` : '',
    devApiKey ? `  export HERALD_KEY=${devApiKey}` : '',
    '',
  ];
  process.stdout.write(lines.filter((l, i) => l !== '' || i === 0 || i === lines.length - 1).join('\n') + '\n');
  exitOnSignals(async () => {
    await web.close();
    await worker.close();
    await sandbox?.close();
  }, log);
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
