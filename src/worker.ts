import { hostname } from 'node:os';
import { pathToFileURL } from 'node:url';
import { Worker, type Processor } from 'bullmq';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import { ConfigError, describeConfig, loadConfig, type Config } from './config.js';
import { createLogger } from './logger.js';
import { NoticeEngine } from './notice/engine.js';
import type { ReconcilerDeps } from './notice/reconciler.js';
import { createPostmarkProvider } from './providers/postmark.js';
import { createTwilioProvider } from './providers/twilio.js';
import type { EmailProvider, SmsProvider } from './providers/types.js';
import { startSandbox, type Sandbox } from './sandbox/index.js';
import { exitOnSignals, once, SHUTDOWN_BOUND_MS } from './signals.js';
import { NoticeStore } from './store/notices.js';
import { PolicyStore } from './store/policies.js';
import { connectRedis } from './store/redis.js';
import { closeQueues, openQueues, QUEUE_NAMES, QueueScheduler, type NoticeJob } from '../queues/index.js';
import { sendEmailProcessor } from '../queues/email-send.js';
import { pollEmailProcessor } from '../queues/email-poll.js';
import { runDeadlineProcessor } from '../queues/deadline.js';
import { sendSmsProcessor } from '../queues/sms-send.js';
import { pollSmsProcessor } from '../queues/sms-poll.js';
import { reconcileProcessor } from '../queues/reconcile.js';

export interface WorkerHandle {
  engine: NoticeEngine;
  reconciler: ReconcilerDeps;
  /** The embedded sandbox, when sandbox mode had no emulator URL given. */
  sandbox: Sandbox | undefined;
  close(): Promise<void>;
}

/** The provider adapters for this configuration; sandbox mode without URLs starts the emulators. */
export async function createProviders(
  config: Config,
  log: Logger,
): Promise<{ email: EmailProvider; sms: SmsProvider; sandbox: Sandbox | undefined }> {
  let sandbox: Sandbox | undefined;
  if (!config.postmark.apiUrl || !config.twilio.apiUrl) {
    sandbox = await startSandbox({ port: 0 });
    log.info({ url: sandbox.url }, 'sandbox providers started');
  }
  const postmarkUrl = config.postmark.apiUrl ?? sandbox!.url;
  const twilioUrl = config.twilio.apiUrl ?? sandbox!.url;
  const timeoutMs = config.providerTimeoutMs;
  return {
    email: createPostmarkProvider({ ...config.postmark, apiUrl: postmarkUrl, timeoutMs }),
    sms: createTwilioProvider({
      accountSid: config.twilio.accountSid,
      authToken: config.twilio.authToken,
      from: config.twilio.from,
      messagingServiceSid: config.twilio.messagingServiceSid,
      apiUrl: twilioUrl,
      timeoutMs,
    }),
    sandbox,
  };
}

/**
 * Starts the worker process's BullMQ workers (one per queue) and the reconciler schedule.
 * Providers may be passed in (tests); otherwise they come from the configuration.
 */
export async function startWorker(
  config: Config,
  opts: { clock?: Clock; logger?: Logger; providers?: { email: EmailProvider; sms: SmsProvider } } = {},
): Promise<WorkerHandle> {
  const clock = opts.clock ?? systemClock;
  const log = opts.logger ?? createLogger('herald-worker');
  const redis = connectRedis(config.redisUrl, 'worker', 'herald-worker');
  redis.on('error', (error) => log.warn({ err: error }, 'redis connection error'));
  const store = new NoticeStore(redis, config.prefix);
  const queues = openQueues(redis, store.keys.queuePrefix);
  const made = opts.providers ? { ...opts.providers, sandbox: undefined } : await createProviders(config, log);
  const engine = new NoticeEngine({
    store,
    policies: new PolicyStore(redis, config.prefix),
    email: made.email,
    sms: made.sms,
    clock,
    log,
    schedule: new QueueScheduler(queues, clock),
    settings: {
      providerTimeoutMs: config.providerTimeoutMs,
      minPollIntervalMs: config.minPollIntervalMs,
      maxChecksPerNotice: config.maxChecksPerNotice,
    },
  });
  const reconciler: ReconcilerDeps = {
    store,
    engine,
    clock,
    log,
    graceMs: config.reconcileGraceMs,
    leaseMs: 3 * config.providerTimeoutMs + 10_000,
    owner: `${hostname()}:${process.pid}`,
  };

  const prefix = store.keys.queuePrefix;
  const processors: [string, Processor<NoticeJob>][] = [
    [QUEUE_NAMES.emailSend, sendEmailProcessor(engine, clock)],
    [QUEUE_NAMES.emailPoll, pollEmailProcessor(engine, clock)],
    [QUEUE_NAMES.deadline, runDeadlineProcessor(engine, clock)],
    [QUEUE_NAMES.smsSend, sendSmsProcessor(engine, clock)],
    [QUEUE_NAMES.smsPoll, pollSmsProcessor(engine, clock)],
  ];
  const workers = processors.map(
    ([name, processor]) => new Worker<NoticeJob>(name, processor, { connection: redis, prefix, concurrency: config.workerConcurrency }),
  );
  workers.push(new Worker(QUEUE_NAMES.reconcile, reconcileProcessor(reconciler), { connection: redis, prefix, concurrency: 1 }));
  for (const worker of workers) {
    worker.on('failed', (job, error) => log.warn({ err: error, queue: worker.name, jobId: job?.id }, 'job failed'));
    worker.on('error', (error) => log.warn({ err: error, queue: worker.name }, 'worker error'));
  }
  await queues.reconcile.upsertJobScheduler('reconcile-sweep', { every: config.reconcileIntervalMs }, { name: 'reconcile' });

  const close = once(async () => {
    // Stop fetching jobs and wait for the running ones, within the shutdown bound.
    const bound = new Promise<void>((resolve) => setTimeout(resolve, SHUTDOWN_BOUND_MS - 5_000).unref());
    await Promise.race([Promise.allSettled(workers.map((w) => w.close())), bound]);
    await Promise.allSettled(workers.map((w) => w.close(true)));
    await closeQueues(queues);
    await redis.quit().catch(() => redis.disconnect());
    await made.sandbox?.close();
  });
  return { engine, reconciler, sandbox: made.sandbox, close };
}

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger('herald-worker');
  const worker = await startWorker(config, { logger: log });
  log.info({ pid: process.pid, ...describeConfig(config) }, 'herald worker running');
  exitOnSignals(worker.close, log);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(error instanceof ConfigError ? error.message : error);
    process.exit(1);
  });
}
