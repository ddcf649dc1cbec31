/**
 * The one place that builds Herald's shared pieces from a Config: Redis connections by role, the
 * stores, the queues and their scheduler, the archive (one per process), the trail reader, the
 * web's AppDeps and the worker's engine, reconciler and log mirror. server.ts, worker.ts, dev.ts,
 * the test helpers and the bench wire through here, so that each piece is made one way. Starting
 * and stopping processes (listeners, BullMQ workers, signals) stays with the entry points.
 */
import { NoticeIndex } from './store/notice-index.js';
import { Keys } from './store/keys.js';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { RedisClient } from './store/redis.js';
import type { Logger } from 'pino';
import type { AppDeps } from './app.js';
import type { Archive } from './archive/archive.js';
import { LogMirror } from './retention/mirror.js';
import { openArchive } from './archive/open.js';
import { trailReader, type TrailReader } from './archive/trail.js';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { keyringOf } from './crypto.js';
import { NoticeEngine, type EngineSettings } from './notice/engine.js';
import type { ReconcilerDeps } from './notice/reconciler.js';
import type { EmailProvider, SmsProvider } from './providers/types.js';
import { NoticeStore } from './store/notices.js';
import { PolicyStore } from './store/policies.js';
import { connectRedis, type RedisRole } from './store/redis.js';
import { SuppressionStore } from './store/suppressions.js';
import { closeQueues, openQueues, QueueScheduler, type HeraldQueues } from '../queues/index.js';
import { FeedSweep } from './providers/feed.js';
import { feedObservationTtlMs, feedSources } from './providers/registry.js';
import { ProviderFeedStore } from './store/provider-feed.js';
import { within } from './time-limit.js';

/**
 * Longest a log-mirror sweep keeps reading new batches: long enough to drain a burst, short
 * enough that a shutdown waiting for the running sweep stays within its bound.
 */
const MIRROR_SWEEP_BUDGET_MS = 10_000;

/** A connection of one role (src/store/redis.ts), its errors logged rather than thrown. */
export function openRedis(config: Pick<Config, 'redis'>, role: RedisRole, name: string, log: Logger): RedisClient {
  const redis = connectRedis(config.redis, role, name);
  redis.on('error', (error) => log.warn({ err: error }, 'redis connection error'));
  return redis;
}

export interface Stores {
  store: NoticeStore;
  policies: PolicyStore;
  suppressions: SuppressionStore;
  /** The notices Redis holds, newest first (the notices list). */
  noticeIndex: NoticeIndex;
}

/**
 * The stores on one connection. Only the worker passes the content keyring: the web seals content
 * (acceptNotice) and never opens it.
 */
export function openStores(redis: RedisClient, config: Config, opts: { openContent?: boolean } = {}): Stores {
  return {
    store: new NoticeStore(redis, config.prefix, {
      ...(opts.openContent ? { keyring: keyringOf(config.encryptionKeys) } : {}),
      replicasExpected: config.redis.sentinels !== undefined || config.redis.clusterNodes !== undefined,
      contentTtlMs: config.contentTtlMs,
    }),
    policies: new PolicyStore(redis, config.prefix, { versionsKept: config.policyVersionsKept }),
    suppressions: new SuppressionStore(redis, config.prefix, { max: config.suppressionsMax }),
    noticeIndex: new NoticeIndex(redis, new Keys(config.prefix)),
  };
}

/**
 * Herald's queues on `redis`, the notice queues in `partitions` partitions (HERALD_QUEUE_PARTITIONS),
 * and the engine's scheduler over them. Whoever opens them closes them.
 */
export function openScheduling(
  redis: RedisClient,
  store: NoticeStore,
  clock: Clock,
  partitions = 1,
): { queues: HeraldQueues; scheduler: QueueScheduler } {
  const queues = openQueues(redis, store.keys, partitions);
  return { queues, scheduler: new QueueScheduler(queues, clock) };
}

/** The archive of a process that reads it only now and then: opened on first need, closed by its owner. */
export function lazyArchive(config: Config, redis: RedisClient): { get(): Archive; close(): Promise<void> } {
  let archive: Archive | undefined;
  return {
    get: () => (archive ??= openArchive(config, redis)),
    close: async () => archive?.close(),
  };
}

/** The engine's settings as the configuration gives them. */
export function engineSettings(config: Config): EngineSettings {
  return {
    providerTimeoutMs: config.providerTimeoutMs,
    minPollIntervalMs: config.minPollIntervalMs,
    maxChecksPerNotice: config.maxChecksPerNotice,
    prices: config.prices,
    rules: config.rules,
    maxRetryAfterMs: config.maxRetryAfterMs,
    statusChecksPerSecond: config.statusChecksPerSecond,
  };
}

export interface WebParts {
  deps: AppDeps;
  /** Closes the queues, the archive and the connection (after the app has closed). */
  close(): Promise<void>;
}

/**
 * What the web process's app runs on: two fail-fast connections (Herald's stores on one that
 * pipelines automatically, BullMQ's queues on one of their own: src/store/redis.ts says why), one
 * lazy archive — or, when the worker runs in the same process (`npm start`), the worker's
 * archive, which its owner closes.
 */
export function composeWeb(
  config: Config,
  opts: { clock: Clock; logger: Logger; connectionName?: string; archive?: Archive },
): WebParts {
  const name = opts.connectionName ?? 'herald-web';
  const redis = openRedis(config, 'web', name, opts.logger);
  const queueRedis = openRedis(config, 'web-queues', `${name}-queues`, opts.logger);
  const stores = openStores(redis, config);
  const { queues, scheduler } = openScheduling(queueRedis, stores.store, opts.clock, config.queuePartitions);
  const shared = opts.archive;
  const archive = shared ? { get: () => shared, close: async () => undefined } : lazyArchive(config, redis);
  const trails = trailReader({ store: stores.store, archive: archive.get, auditRetentionMs: config.auditRetentionMs, clock: opts.clock });
  const deps: AppDeps = { config, redis, queueRedis, ...stores, scheduler, queues, trails, archive: archive.get, clock: opts.clock, logger: opts.logger };
  return {
    deps,
    close: async () => {
      await closeQueues(queues);
      await archive.close().catch((error: unknown) => opts.logger.warn({ err: error }, 'closing the archive failed'));
      await Promise.all([redis, queueRedis].map((r) => r.quit().catch(() => r.disconnect())));
    },
  };
}

export interface WorkerParts extends Stores {
  /** BullMQ's connection (blocking reads, its scripts). */
  redis: RedisClient;
  /** The engine's own pipelining connection. */
  stepRedis: RedisClient;
  queues: HeraldQueues;
  scheduler: QueueScheduler;
  engine: NoticeEngine;
  reconciler: ReconcilerDeps;
  archive: Archive;
  mirror: LogMirror;
}

/**
 * What the worker process's jobs run on. The engine's reads and transitions go on a pipelining
 * connection of their own; BullMQ, the sweeps and the mirror keep `redis`.
 */
export function composeWorker(
  config: Config,
  opts: { clock: Clock; log: Logger; providers: { email: EmailProvider; sms: SmsProvider } },
): WorkerParts {
  const { clock, log } = opts;
  const redis = openRedis(config, 'worker', 'herald-worker', log);
  const stepRedis = openRedis(config, 'worker-steps', 'herald-worker-steps', log);
  const stores = openStores(stepRedis, config, { openContent: true });
  const { queues, scheduler } = openScheduling(redis, stores.store, clock, config.queuePartitions);
  const engine = new NoticeEngine({ ...stores, ...opts.providers, clock, log, schedule: scheduler, settings: engineSettings(config) });
  const reconciler: ReconcilerDeps = {
    store: stores.store,
    engine,
    clock,
    log,
    graceMs: config.reconcileGraceMs,
    leaseMs: 3 * config.providerTimeoutMs + 10_000,
    owner: `${hostname()}:${process.pid}`,
  };
  const archive = openArchive(config, redis);
  const mirror = new LogMirror({
    redis,
    keys: stores.store.keys,
    archive,
    clock,
    log,
    // Unique per process and per start: a restarted worker's old batches are claimed like a dead one's.
    consumer: `${reconciler.owner}:${randomBytes(3).toString('hex')}`,
    settings: {
      batchSize: config.mirror.batchSize,
      reclaimAfterMs: config.mirror.reclaimAfterMs,
      keepHotMs: config.mirror.keepHotMs,
      sweepBudgetMs: MIRROR_SWEEP_BUDGET_MS,
    },
    contentTtlMs: config.contentTtlMs,
    noticeKeepHotMs: config.noticeKeepHotMs,
  });
  return { redis, stepRedis, ...stores, queues, scheduler, engine, reconciler, archive, mirror };
}

/**
 * The feed sweep's long poll and how long one run may drain a busy queue: short enough that a
 * shutdown waiting for the running sweep stays within its bound.
 */
const FEED_SWEEP = { waitSeconds: 1, budgetMs: 5_000 } as const;

/** The feed providers' sweep, and the store it and their adapters share on a connection of their own. */
export interface ProviderFeed {
  store: ProviderFeedStore;
  sweep: FeedSweep;
  close(): Promise<void>;
}

/** The feed store and sweep when a chosen provider reports through an events queue (SES, AWS SMS), on a connection of their own. */
export function openProviderFeed(config: Config, sandboxUrl: string | undefined, log: Logger): ProviderFeed | undefined {
  const feeds = feedSources(config, { sandboxUrl });
  if (!feeds) return undefined;
  const redis = openRedis(config, 'worker', 'herald-provider-feed', log);
  const store = new ProviderFeedStore(redis, config.prefix, feedObservationTtlMs(config));
  const sweep = new FeedSweep({
    sources: feeds.sources,
    sqs: feeds.sqs,
    store,
    suppressions: new SuppressionStore(redis, config.prefix, { max: config.suppressionsMax }),
    clock: systemClock,
    log,
    settings: FEED_SWEEP,
  });
  return {
    store,
    sweep,
    close: async () => {
      sweep.close();
      if (!(await within(1_000, redis.quit().then(() => true, () => false)))) redis.disconnect();
    },
  };
}
