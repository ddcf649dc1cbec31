/**
 * What the routes run on (src/http/*), built once per process by src/compose.ts: no route opens
 * a store, a connection or an archive of its own. src/app.ts registers the routes over it.
 */
import type { Logger } from 'pino';
import type { Archive } from '../archive/archive.js';
import type { TrailReader } from '../archive/trail.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Scheduler } from '../notice/outcome.js';
import type { StepContext } from '../notice/steps/context.js';
import type { NoticeIndex } from '../store/notice-index.js';
import type { NoticeStore } from '../store/notices.js';
import type { PolicyStore } from '../store/policies.js';
import type { RedisClient } from '../store/redis.js';
import type { SuppressionStore } from '../store/suppressions.js';
import type { EventEndpointStore } from '../store/event-endpoints.js';
import type { ApiKeyStore } from '../store/api-keys.js';
import type { HeraldQueues } from '../../queues/index.js';

export interface AppDeps {
  config: Config;
  /** Herald's own reads and scripts (stores, rate limits, sessions). */
  redis: RedisClient;
  /** BullMQ's queues' connection. */
  queueRedis: RedisClient;
  store: NoticeStore;
  policies: PolicyStore;
  suppressions: SuppressionStore;
  scheduler: Scheduler;
  queues: HeraldQueues;
  /** Views and trails, from Redis or the process's one archive. */
  trails: TrailReader;
  /** The process's one archive, opened on first need (its owner closes it). */
  archive: () => Archive;
  /** The notices Redis holds, newest first (the notices list). */
  noticeIndex: NoticeIndex;
  /** The callers' event endpoints and their deliveries. */
  eventEndpoints: EventEndpointStore;
  /** The API keys `herald keys create` made. */
  apiKeys: ApiKeyStore;
  clock: Clock;
  logger: Logger;
  /** The steps a webhook's observation runs through: the engine's, with no provider to call. */
  webhookSteps: StepContext;
}
