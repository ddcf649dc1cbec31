import { pathToFileURL } from 'node:url';
import { Worker, type Processor } from 'bullmq';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import { composeWorker, openProviderFeed, type ProviderFeed } from './compose.js';
import { describeConfig, loadConfig, warnUnknownVariables, type Config } from './config.js';
import { loadSandbox } from './load-sandbox.js';
import { createLogger } from './logger.js';
import type { NoticeEngine } from './notice/engine.js';
import { reconcileOnce, type ReconcilerDeps } from './notice/reconciler.js';
import { createEmailProvider, createSmsProvider, emailUrl, needsSandbox, smsUrl } from './providers/registry.js';
import { timeProviderCalls } from './providers/timed.js';
import { buildWorkerMetricsApp, WorkerMetrics } from './http/worker-metrics.js';
import type { EmailProvider, SmsProvider } from './providers/types.js';
import type { Sandbox } from '@herald/sandbox';
import { exitOnSignals, once, SHUTDOWN_BOUND_MS } from './signals.js';
import { startupMessage } from './startup.js';
import { within } from './time-limit.js';
import {
  closeQueues,
  KEEP_JOBS,
  listQueues,
  pausedUnderBullmq5,
  QUEUE_NAMES,
  type NoticeJob,
  type PartitionedQueue,
} from '../queues/index.js';
import { eventDeliveryProcessor, noticeProcessor, sweepProcessor } from '../queues/processors.js';
import { NoticeWorker } from '../queues/notice-worker.js';
import type { Archive } from './archive/archive.js';
import type { LogMirror } from './retention/mirror.js';
import { backfillStatsOnce } from './store/stats.js';
import { indexExistingNoticesOnce } from './store/notice-index.js';
import { indexAddressesOnce } from './store/address-index.js';
import { AddressLookup } from './notice/address-lookup.js';
import { retentionSweepOnce } from './retention/sweep.js';

/** How soon a job of a dead worker counts as stalled and runs again. */
export const STALLED_AFTER_MS = 10_000;
/**
 * The notices' jobs run this many times HERALD_WORKER_CONCURRENCY at once: each notice's send,
 * checks, deadline and SMS are runs of its one job, which the other notice queues (kept for jobs
 * queued before) shared.
 */
export const NOTICE_JOB_CONCURRENCY_FACTOR = 4;
/** How often the decision log's new entries become deliveries of events to callers. */
const EVENT_DISPATCH_EVERY_MS = 500;
/** How often the feed sweep (SES, AWS SMS events) runs. */
const FEED_SWEEP_EVERY_MS = 1_000;

export interface WorkerHandle {
  engine: NoticeEngine;
  reconciler: ReconcilerDeps;
  /** The embedded sandbox, when sandbox mode had no emulator URL given. */
  sandbox: Sandbox | undefined;
  /** The decision-log mirror this worker runs on the `log-mirror` schedule. */
  mirror: LogMirror;
  /** The process's archive, closed by `close`; a web app in the same process reads through it. */
  archive: Archive;
  /** The URL of the worker's /metrics and /healthz listener (HERALD_WORKER_METRICS_PORT), when it has one. */
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

/**
 * The provider adapters for this configuration; sandbox mode without URLs starts the emulators
 * here, the only case in which the worker loads the sandbox package.
 * In sandbox mode the adapters are named `<provider>-sandbox`, the name every `*.requested`
 * entry records, so that no audit trail can pass an emulated delivery off as a real one.
 */
export async function createProviders(
  config: Config,
  log: Logger,
): Promise<{ email: EmailProvider; sms: SmsProvider; sandbox: Sandbox | undefined; feed: ProviderFeed | undefined }> {
  const sandbox = needsSandbox(config) ? await (await loadSandbox()).startSandbox({ port: 0 }) : undefined;
  const feed = openProviderFeed(config, sandbox?.url, log);
  const deps = { sandboxUrl: sandbox?.url, feed: feed?.store, publicUrl: config.publicUrl };
  const email = createEmailProvider(config, deps);
  const sms = createSmsProvider(config, deps);
  if (config.providers === 'live') return { email, sms, sandbox, feed };
  const emailAt = emailUrl(config) ?? sandbox!.url;
  const smsAt = smsUrl(config) ?? sandbox!.url;
  log.warn(
    { providers: 'sandbox', email: email.name, sms: sms.name, emailUrl: emailAt, smsUrl: smsAt },
    `HERALD_PROVIDERS=sandbox: email and SMS go to Herald's emulators, never to a real inbox or phone; log entries name the provider ${email.name}-sandbox and ${sms.name}-sandbox`,
  );
  return { email: { ...email, name: `${email.name}-sandbox` }, sms: { ...sms, name: `${sms.name}-sandbox` }, sandbox, feed };
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
  // Providers passed in belong to the caller, who closes them; those made here are closed by `close`.
  const made = opts.providers
    ? { ...opts.providers, sandbox: undefined, feed: undefined, owned: false }
    : { ...(await createProviders(config, log)), owned: true };
  // Every provider call the engine makes is timed here, whichever step makes it.
  const metrics = new WorkerMetrics();
  const timed = { ...made, email: timeProviderCalls(made.email, metrics.recordCall), sms: timeProviderCalls(made.sms, metrics.recordCall) };
  const parts = composeWorker(config, { clock, log, providers: timed });
  const { redis, stepRedis, store, queues, engine, reconciler, archive, mirror, events } = parts;

  const prefix = store.keys.queuePrefix;
  // The notice's job (the `deadline` queue) takes its checks' status reads from the limiter every
  // worker shares (src/store/status-reads.ts), never from BullMQ's, which would hold deadlines back.
  // Jobs of the poll queues, queued before one job per notice, keep BullMQ's per-queue limiter
  // (global per queue, so each partition gets its share); a 429 there pauses every partition for
  // its Retry-After (the queue's rateLimit, which BullMQ keeps where it deprecates the worker's).
  const pause = (queue: PartitionedQueue) => async (ms: number) => {
    await Promise.all(queue.all.map((partition) => partition.rateLimit(ms)));
  };
  const processors: [PartitionedQueue, Processor<NoticeJob>, { max: number; duration: number } | undefined, number?][] = [
    // Every step of every notice runs in its job here, so this queue runs many at once.
    [
      queues.deadline,
      noticeProcessor('deadline', engine, { clock, log, states: store }),
      undefined,
      config.workerConcurrency * NOTICE_JOB_CONCURRENCY_FACTOR,
    ],
    [queues.emailSend, noticeProcessor('emailSend', engine, { clock, log }), undefined],
    [
      queues.emailPoll,
      noticeProcessor('emailPoll', engine, { clock, log, pause: pause(queues.emailPoll) }),
      { max: config.statusChecksPerSecond.email, duration: 1000 },
    ],
    [queues.smsSend, noticeProcessor('smsSend', engine, { clock, log }), undefined],
    [
      queues.smsPoll,
      noticeProcessor('smsPoll', engine, { clock, log, pause: pause(queues.smsPoll) }),
      { max: config.statusChecksPerSecond.sms, duration: 1000 },
    ],
  ];
  // One BullMQ Worker per partition of each notice queue (and per earlier unpartitioned queue
  // still drained): every worker process consumes every partition.
  const workers: Worker[] = processors.flatMap(([partitioned, processor, limiter, concurrency]) => {
    const each = partitioned.all;
    const shares = limiter ? shareLimit(limiter, each.length) : [];
    return each.map(
      (queue, i) =>
        new NoticeWorker(queue.name, metrics.counted(queue.name, processor), {
          connection: redis,
          prefix: queue.opts.prefix,
          concurrency: concurrency ?? config.workerConcurrency,
          limiter: shares[i],
          ...KEEP_JOBS,
          // A job whose worker was killed is given back within seconds, not BullMQ's default 30 s:
          // the reconciler re-queues status checks under their own job IDs, which wait for it.
          // Running jobs renew their lock every half period, so long steps keep theirs.
          lockDuration: STALLED_AFTER_MS,
          stalledInterval: STALLED_AFTER_MS / 2,
        }),
    );
  });
  const sweep = (queue: string, pass: () => Promise<unknown>) =>
    new Worker(queue, metrics.counted(queue, sweepProcessor(pass)), { connection: redis, prefix, concurrency: 1 });
  workers.push(sweep(QUEUE_NAMES.reconcile, () => reconcileOnce(reconciler)));
  workers.push(sweep(QUEUE_NAMES.logMirror, () => mirror.mirrorOnce()));
  // The `content-purge` queue (its persisted name) runs the retention sweep: purge, then retire.
  const purge = { redis, store, clock, log };
  // Looked at again once the mirror has had time to archive the notice's last entries.
  const addressLookup = new AddressLookup(config.addressKeys);
  const retire = {
    redis,
    store,
    archive,
    clock,
    log,
    retryMs: 2 * config.mirror.intervalMs,
    statsRetentionMs: config.statsRetentionMs,
    addressLookup,
  };
  workers.push(sweep(QUEUE_NAMES.retentionSweep, () => retentionSweepOnce(purge, retire)));
  const feed = made.feed;
  if (feed) workers.push(sweep(QUEUE_NAMES.providerFeed, () => feed.sweep.sweepOnce()));
  // Events to callers: the log's entries become deliveries, and each delivery is a signed POST.
  workers.push(sweep(QUEUE_NAMES.eventDispatch, () => events.dispatch.sweepOnce()));
  workers.push(
    new Worker(QUEUE_NAMES.eventDelivery, metrics.counted(QUEUE_NAMES.eventDelivery, eventDeliveryProcessor(events.deliver, clock)), {
      connection: redis,
      prefix,
      // An endpoint may take its 10 s to answer: many deliveries wait at once.
      concurrency: config.workerConcurrency,
      lockDuration: STALLED_AFTER_MS * 2,
      stalledInterval: STALLED_AFTER_MS,
      // A delivery whose worker died (however often) runs again: no event is dropped for it.
      maxStalledCount: 100_000,
    }),
  );
  for (const worker of workers) {
    const queue = worker.opts.prefix === prefix ? worker.name : `${worker.opts.prefix}:${worker.name}`;
    worker.on('failed', (job, error) => log.warn({ err: error, queue, jobId: job?.id }, 'job failed'));
    worker.on('error', (error) => log.warn({ err: error, queue }, 'worker error'));
  }
  await queues.reconcile.upsertJobScheduler('reconcile-sweep', { every: config.reconcileIntervalMs }, { name: 'reconcile' });
  await queues.logMirror.upsertJobScheduler('log-mirror-sweep', { every: config.mirror.intervalMs }, { name: 'log-mirror' });
  await queues.retentionSweep.upsertJobScheduler(
    'content-purge-sweep',
    { every: config.contentPurgeIntervalMs },
    { name: 'content-purge' },
  );
  await queues.eventDispatch.upsertJobScheduler('event-dispatch-sweep', { every: EVENT_DISPATCH_EVERY_MS }, { name: 'event-dispatch' });
  // Only while a feed provider is chosen: a worker of another configuration takes the schedule away.
  if (made.feed)
    await queues.providerFeed.upsertJobScheduler('provider-feed-sweep', { every: FEED_SWEEP_EVERY_MS }, { name: 'provider-feed' });
  else await queues.providerFeed.removeJobScheduler('provider-feed-sweep');
  // Notices created by versions before the stats counters are counted once; start-up does not wait.
  const backfill = backfillStatsOnce(redis, store.keys, clock.now()).then(
    (report) => report && log.info(report, 'stats counters backfilled from the created indexes of earlier versions'),
    (error: unknown) => log.warn({ err: error }, 'stats backfill failed; it runs again at the next start or with herald retention apply'),
  );
  // Notices created before the notices list's index are added to it once; start-up does not wait.
  const indexed = indexExistingNoticesOnce(redis, store.keys, clock.now()).then(
    (added) => added && log.info({ added }, 'notices of earlier versions added to the notices list index'),
    (error: unknown) => log.warn({ err: error }, 'notices list index backfill failed; it runs again at the next start'),
  );
  // Live notices created before the address lookup's index are added to it once; start-up does not wait.
  const addressesIndexed = indexAddressesOnce(redis, store.keys, addressLookup, clock.now()).then(
    (added) => added && log.info({ added }, 'live notices of earlier versions added to the address index'),
    (error: unknown) => log.warn({ err: error }, 'address index backfill failed; it runs again at the next start'),
  );

  // Jobs a queue paused under BullMQ 5 holds where BullMQ 6 does not count them: said once at start.
  const paused = pausedUnderBullmq5(redis, listQueues(queues)).then(
    (found) => {
      for (const { label, jobs } of found)
        log.warn(
          { queue: label, jobs },
          'queue paused under BullMQ 5: its waiting jobs run once it is resumed (Bull Board), and are not counted until then',
        );
    },
    (error: unknown) => log.warn({ err: error }, 'could not look for queues paused under BullMQ 5'),
  );

  // The process's own /metrics and /healthz, for a scraper and an orchestrator's probe.
  const metricsApp =
    config.workerMetricsPort === undefined
      ? undefined
      : await buildWorkerMetricsApp(
          metrics,
          () => ({
            redis: { jobs: redis.status, steps: stepRedis.status },
            workers: { running: workers.filter((w) => w.isRunning()).length, total: workers.length },
          }),
          log,
        );
  const close = once(async () => {
    // Stop fetching jobs and wait for the running ones, within the shutdown bound.
    mirror.stop();
    await within(SHUTDOWN_BOUND_MS - 7_000, Promise.allSettled(workers.map((w) => w.close())));
    // BullMQ's close can wait forever once Redis went away during it, even after Redis is back
    // (bullmq #2430, #4656): every later step is bounded too, and the connections are cut below.
    await within(2_000, Promise.allSettled(workers.map((w) => w.close(true))));
    // Scraped while the jobs drain; closed once none runs.
    await metricsApp?.close().catch((error: unknown) => log.warn({ err: error }, 'closing the metrics listener failed'));
    await within(1_000, Promise.all([backfill, indexed, addressesIndexed, paused]));
    await within(2_000, closeQueues(queues));
    await Promise.all(
      [redis, stepRedis].map(async (connection) => {
        if (
          !(await within(
            1_000,
            connection.quit().then(
              () => true,
              () => false,
            ),
          ))
        )
          connection.disconnect();
      }),
    );
    await archive.close().catch((error: unknown) => log.warn({ err: error }, 'closing the archive failed'));
    await made.feed?.close();
    if (made.owned) {
      // The adapters' keep-alive sockets, once no job can call a provider any more.
      made.email.close?.();
      made.sms.close?.();
    }
    await made.sandbox?.close();
  });
  // A port in use stops the worker whole, before it is handed back.
  const metricsUrl =
    metricsApp &&
    (await metricsApp.listen({ port: config.workerMetricsPort, host: config.host }).catch(async (error: unknown) => {
      await close();
      throw error;
    }));
  return { engine, reconciler, sandbox: made.sandbox, mirror, archive, metricsUrl, close };
}

/**
 * A global rate limit split over `parts` queues so that together they never exceed it: whole
 * shares of `max` per `duration` while there are enough, else one job per a longer period each.
 */
export function shareLimit(limit: { max: number; duration: number }, parts: number): { max: number; duration: number }[] {
  if (limit.max >= parts) {
    return Array.from({ length: parts }, (_, i) => ({
      max: Math.floor(limit.max / parts) + (i < limit.max % parts ? 1 : 0),
      duration: limit.duration,
    }));
  }
  return Array.from({ length: parts }, () => ({ max: 1, duration: Math.ceil((limit.duration * parts) / limit.max) }));
}

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger('herald-worker');
  warnUnknownVariables(process.env, log);
  // Signals are handled from the start: jobs may begin before start-up has finished.
  const starting = startWorker(config, { logger: log });
  exitOnSignals(async () => (await starting).close(), log);
  const worker = await starting;
  log.info(
    { pid: process.pid, ...(worker.metricsUrl ? { metricsUrl: worker.metricsUrl } : {}), ...describeConfig(config) },
    'herald worker running',
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(startupMessage(error, process.env));
    process.exit(1);
  });
}
