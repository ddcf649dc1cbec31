/**
 * The one place that builds Herald's shared pieces from a Config: Redis connections by role, the
 * stores, the queues and their scheduler, the archive (one per process), the trail reader, the
 * web's AppDeps, the worker's engine, reconciler and log mirror, and what the `herald` commands
 * read. server.ts, worker.ts, dev.ts, the CLI, the test helpers and the bench wire through here, so
 * that each piece is made one way. Starting and stopping processes (listeners, BullMQ workers,
 * signals) stays with the entry points.
 */
import { NoticeIndex } from './store/notice-index.js';
import { Keys } from './store/keys.js';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { RedisClient } from './store/redis.js';
import type { Logger } from 'pino';
import type { AppDeps } from './http/deps.js';
import type { Archive } from './archive/archive.js';
import { LogMirror } from './retention/mirror.js';
import { openArchive } from './archive/open.js';
import { readTrail, trailReader, type Trail } from './archive/trail.js';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { keyringOf } from './crypto.js';
import { NoticeEngine, type EngineSettings } from './notice/engine.js';
import { StepContext } from './notice/steps/context.js';
import { noProviderCalls } from './notice/steps/webhook.js';
import type { ReconcilerDeps } from './notice/reconciler.js';
import type { EmailProvider, SmsProvider } from './providers/types.js';
import { NoticeStore } from './store/notices.js';
import { PolicyStore } from './store/policies.js';
import { connectRedis, waitReady, type RedisRole } from './store/redis.js';
import { LogMirrorStore } from './store/log-mirror.js';
import { SuppressionStore } from './store/suppressions.js';
import { StatusReadLimiter } from './store/status-reads.js';
import { closeQueues, deliveryQueue, openQueues, QueueScheduler, type HeraldQueues } from '../queues/index.js';
import { deliverEvent, type DeliveryStep } from './events/deliver.js';
import { EventDispatch, type EventDeliveryJob } from './events/dispatch.js';
import { EventEndpointStore } from './store/event-endpoints.js';
import { ApiKeyStore } from './store/api-keys.js';
import { EventLogStore } from './store/event-log.js';
import { FeedSweep } from './providers/feed.js';
import { feedObservationTtlMs, feedSources } from './providers/registry.js';
import { ProviderFeedStore } from './store/provider-feed.js';
import { within } from './time-limit.js';

/**
 * Longest a log-mirror sweep keeps reading new batches: long enough to drain a burst, short
 * enough that a shutdown waiting for the running sweep stays within its bound.
 */
const MIRROR_SWEEP_BUDGET_MS = 10_000;
/** Log entries the event dispatch reads at once from a shard, and how long one sweep keeps reading a busy one. */
const EVENT_DISPATCH_BATCH = 500;
const EVENT_DISPATCH_BUDGET_MS = 5_000;

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
  /** The callers' event endpoints and their deliveries. */
  eventEndpoints: EventEndpointStore;
  /** The API keys `herald keys create` made. */
  apiKeys: ApiKeyStore;
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
    eventEndpoints: new EventEndpointStore(redis, new Keys(config.prefix)),
    apiKeys: new ApiKeyStore(redis, new Keys(config.prefix)),
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
export function composeWeb(config: Config, opts: { clock: Clock; logger: Logger; connectionName?: string; archive?: Archive }): WebParts {
  const name = opts.connectionName ?? 'herald-web';
  const redis = openRedis(config, 'web', name, opts.logger);
  const queueRedis = openRedis(config, 'web-queues', `${name}-queues`, opts.logger);
  const stores = openStores(redis, config);
  const { queues, scheduler } = openScheduling(queueRedis, stores.store, opts.clock, config.queuePartitions);
  const shared = opts.archive;
  const archive = shared ? { get: () => shared, close: async () => undefined } : lazyArchive(config, redis);
  const trails = trailReader({
    store: stores.store,
    archive: archive.get,
    auditRetentionMs: config.auditRetentionMs,
    noticeKeepHotMs: config.noticeKeepHotMs,
    clock: opts.clock,
  });
  // A webhook records its observation through the steps a check uses, with no provider to call.
  const webhookSteps = new StepContext({
    ...noProviderCalls(),
    ...stores,
    clock: opts.clock,
    log: opts.logger,
    schedule: scheduler,
    settings: engineSettings(config),
  });
  const deps: AppDeps = {
    config,
    redis,
    queueRedis,
    ...stores,
    scheduler,
    queues,
    trails,
    archive: archive.get,
    clock: opts.clock,
    logger: opts.logger,
    webhookSteps,
  };
  return {
    deps,
    close: async () => {
      await closeQueues(queues);
      await archive.close().catch((error: unknown) => opts.logger.warn({ err: error }, 'closing the archive failed'));
      await Promise.all([redis, queueRedis].map((r) => r.quit().catch(() => r.disconnect())));
    },
  };
}

/** The events to callers, as a worker runs them: the dispatch sweep, and one delivery attempt. */
export interface CallerEvents {
  dispatch: EventDispatch;
  deliver(job: EventDeliveryJob): Promise<DeliveryStep>;
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
  events: CallerEvents;
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
  // The planned checks of the notices' jobs take their provider's status reads here, shared by every worker.
  const statusReads = new StatusReadLimiter(stepRedis, stores.store.keys, {
    email: { provider: opts.providers.email.name, perSecond: config.statusChecksPerSecond.email },
    sms: { provider: opts.providers.sms.name, perSecond: config.statusChecksPerSecond.sms },
  });
  const engine = new NoticeEngine({
    ...stores,
    ...opts.providers,
    clock,
    log,
    schedule: scheduler,
    settings: engineSettings(config),
    statusReads,
  });
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
  const events: CallerEvents = {
    dispatch: new EventDispatch({
      log: new EventLogStore(redis, stores.store.keys),
      endpoints: stores.eventEndpoints,
      store: stores.store,
      queue: deliveryQueue(queues),
      clock,
      logger: log,
      shards: stores.store.keys.allShards(),
      consumer: `${reconciler.owner}:${randomBytes(3).toString('hex')}`,
      reclaimAfterMs: config.mirror.reclaimAfterMs,
      batchSize: EVENT_DISPATCH_BATCH,
      budgetMs: EVENT_DISPATCH_BUDGET_MS,
    }),
    deliver: (job) =>
      deliverEvent(
        {
          endpoints: stores.eventEndpoints,
          clock,
          logger: log,
          settings: {
            retryForMs: config.events.retryForMs,
            retryBaseMs: config.events.retryBaseMs,
            allowPrivateUrls: config.events.allowPrivateUrls,
          },
        },
        job,
      ),
  };
  return { redis, stepRedis, ...stores, queues, scheduler, engine, reconciler, archive, mirror, events };
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
      if (
        !(await within(
          1_000,
          redis.quit().then(
            () => true,
            () => false,
          ),
        ))
      )
        redis.disconnect();
    },
  };
}

/** How long a `herald` command waits for Redis before it goes on without it, or gives up. */
const CLI_REDIS_WAIT_MS = 3_000;

/** What the `herald` commands read: each piece is made on first use, and `close()` closes what was made. */
export interface CliParts {
  keys: Keys;
  /**
   * Connects (once) and waits for Redis: the connection when it answered within 3 s, else
   * undefined, for the commands that can do without it.
   */
  reach(): Promise<RedisClient | undefined>;
  /** The same wait, for the commands that need Redis: rejects when it did not answer. */
  ready(): Promise<RedisClient>;
  /** Herald's stores on the CLI's connection. */
  stores(): Stores;
  /** Redis's record of each shard's archive chain and of the batches the log mirror holds. */
  chains(): LogMirrorStore;
  /**
   * The archive, opened on first call. Opened after `reach()` or `ready()` found Redis, it also
   * asks Redis where the chain of a shard not anchored yet began; otherwise its anchors alone say.
   */
  archive(): Archive;
  /** A notice's trail as `herald audit` reads it: retired notices' records are read directly, with no retirement gate. */
  trail(noticeId: string): Promise<Trail>;
  /** Drops the connection and closes the archive; may be called twice. */
  close(): Promise<void>;
}

/**
 * The CLI's pieces: one fail-fast connection (a command reports instead of hanging on a Redis that
 * is down) whose errors are left to the wait for it to say, and one archive.
 */
export function composeCli(config: Config, opts: { clock: Clock }): CliParts {
  const keys = new Keys(config.prefix);
  let redis: RedisClient | undefined;
  let waited: Promise<RedisClient> | undefined;
  let reached = false;
  let stores: Stores | undefined;
  let chains: LogMirrorStore | undefined;
  let archive: Archive | undefined;
  let closing: Promise<void> | undefined;
  const connection = (): RedisClient => {
    if (redis) return redis;
    redis = connectRedis(config.redis, 'web', 'herald-cli');
    // A command that needs Redis says so once, through ready(); the connection's retries would only repeat it.
    redis.on('error', () => undefined);
    return redis;
  };
  const ready = (): Promise<RedisClient> =>
    (waited ??= (async () => {
      const client = connection();
      await waitReady(client, CLI_REDIS_WAIT_MS);
      reached = true;
      return client;
    })());
  const openedStores = (): Stores => (stores ??= openStores(connection(), config));
  const openedArchive = (): Archive => (archive ??= openArchive(config, reached ? redis : undefined));
  return {
    keys,
    reach: () =>
      ready().then(
        (client) => client,
        () => undefined,
      ),
    ready,
    stores: openedStores,
    chains: () => (chains ??= new LogMirrorStore(connection(), keys)),
    archive: openedArchive,
    trail: (noticeId) =>
      readTrail(
        { store: openedStores().store, archive: openedArchive, retainedSince: opts.clock.now() - config.auditRetentionMs },
        noticeId,
      ),
    close: () =>
      (closing ??= (async () => {
        // Dropped, not quit: the command has reported, and a Redis that is down must not hold up its exit.
        try {
          redis?.disconnect();
        } finally {
          await archive?.close();
        }
      })()),
  };
}
