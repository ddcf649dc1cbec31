import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { startSandbox, type Sandbox } from './sandbox/index.js';
import { startWeb } from './server.js';
import { exitOnSignals } from './signals.js';
import { startWorker } from './worker.js';

/**
 * `npm start`: web and worker in one process. In sandbox mode (the default) the Postmark and
 * Twilio emulators run here too, and a dev API key is printed.
 */
async function main(): Promise<void> {
  const log = createLogger('herald');
  let sandbox: Sandbox | undefined;
  if ((process.env.HERALD_PROVIDERS ?? 'sandbox') === 'sandbox' && !process.env.POSTMARK_API_URL && !process.env.TWILIO_API_URL) {
    sandbox = await startSandbox({ port: Number(process.env.HERALD_SANDBOX_PORT ?? 4010) });
    process.env.POSTMARK_API_URL = sandbox.url;
    process.env.TWILIO_API_URL = sandbox.url;
  }
  const config = loadConfig();
  const worker = await startWorker(config, { logger: log });
  const web = await startWeb(config);
  const lines = [
    '',
    `  Herald is running (${config.providers} providers) at ${web.url.replace('0.0.0.0', '127.0.0.1')}`,
    sandbox ? `  Sandbox Postmark/Twilio emulators at ${sandbox.url} (see ${sandbox.url}/__sandbox/sms)` : '',
    config.devApiKey ? `  Dev API key: ${config.devApiKey}` : '',
    config.devApiKey ? `  export HERALD_KEY=${config.devApiKey}` : '',
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
