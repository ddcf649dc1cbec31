import { pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from './clock.js';
import { ConfigError, describeConfig, loadConfig, warnUnknownVariables, type Config } from './config.js';
import { buildApp, buildMetricsApp } from './app.js';
import type { Archive } from './archive/archive.js';
import { composeWeb } from './compose.js';
import { createLogger } from './logger.js';
import { exitOnSignals, once } from './signals.js';
import { startupMessage } from './startup.js';

export interface WebHandle {
  app: FastifyInstance;
  url: string;
  /** The metrics listener's URL, when HERALD_METRICS_PORT gave /metrics a listener of its own. */
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

/** Starts the web process: the HTTP API on config.host:config.port (on `archive`, when a worker in the same process opened one). */
export async function startWeb(config: Config, opts: { clock?: Clock; archive?: Archive } = {}): Promise<WebHandle> {
  // Without a key every request would be refused; only `npm start` invents one, and prints it.
  if (config.apiKeys.length === 0)
    throw new ConfigError(['HERALD_API_KEYS must list at least one API key (`npm start` makes a dev key and prints it)']);
  const clock = opts.clock ?? systemClock;
  const logger = createLogger('herald-web');
  const parts = composeWeb(config, { clock, logger, archive: opts.archive });
  const { deps } = parts;
  const app = await buildApp(deps);
  const address = await app.listen({ port: config.port, host: config.host });
  // A scrape-only listener, so /metrics can stay off the port the API is published on.
  const metricsApp = config.metrics.port === undefined ? undefined : await buildMetricsApp(deps);
  const metricsUrl = metricsApp && (await metricsApp.listen({ port: config.metrics.port, host: config.metrics.host ?? config.host }));
  const close = once(async () => {
    // Stop taking requests and let running ones finish, then close what this process opened.
    await app.close().catch((error) => logger.error({ err: error }, 'closing the HTTP server failed'));
    await metricsApp?.close().catch((error) => logger.error({ err: error }, 'closing the metrics listener failed'));
    await parts.close();
  });
  return { app, url: address, metricsUrl, close };
}

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger('herald-web');
  warnUnknownVariables(process.env, log);
  const starting = startWeb(config);
  exitOnSignals(async () => (await starting).close(), log);
  const web = await starting;
  log.info({ url: web.url, ...(web.metricsUrl ? { metricsUrl: web.metricsUrl } : {}), ...describeConfig(config) }, 'herald web listening');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(startupMessage(error, process.env));
    process.exit(1);
  });
}
