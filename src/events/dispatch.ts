/**
 * From the decision log to deliveries: a sweep reads each shard's log through the events'
 * consumer group (src/store/event-log.ts), turns each entry a caller may hear of into one
 * delivery job per endpoint subscribed to it, and acknowledges the entries only once their jobs
 * are queued. A worker killed at any point leaves the entries pending: they are handed out again
 * (to it, or to another worker after `reclaimAfterMs`) and queued again under the same job IDs.
 * So an event written is never lost, and a delivery is queued at least once.
 */
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { StoredEntry } from '../notice/entries.js';
import type { EventEndpoint, EventEndpointStore } from '../store/event-endpoints.js';
import type { EventLogStore } from '../store/event-log.js';
import type { NoticeStore, StoredNotice } from '../store/notices.js';
import { callerEvent, callerEventId, isCallerEvent } from './event.js';

/** One delivery of one event to one endpoint: the `event-delivery` job's data. */
export interface EventDeliveryJob {
  endpointId: string;
  eventId: string;
  type: string;
  noticeId: string;
  /** When the event happened (the entry's time, ms): retries stop `HERALD_EVENT_RETRY_FOR` after it. */
  at: number;
  /** The JSON body, the same bytes on every attempt. */
  body: string;
  /** Attempts made so far. */
  attempts?: number;
}

/** Where the dispatch queues deliveries: the `event-delivery` queue. */
export interface DeliveryQueue {
  /** Adds jobs, each under its ID: a job whose ID exists is not added again. */
  addDeliveries(jobs: readonly { jobId: string; data: EventDeliveryJob }[]): Promise<void>;
}

export interface DispatchDeps {
  log: EventLogStore;
  endpoints: EventEndpointStore;
  store: NoticeStore;
  queue: DeliveryQueue;
  clock: Clock;
  logger: Pick<Logger, 'warn' | 'info'>;
  shards: readonly number[];
  /** This worker's consumer name in the group: unique per process and start. */
  consumer: string;
  /** How long a consumer may hold entries before another worker takes them. */
  reclaimAfterMs: number;
  /** Entries read at once from one shard. */
  batchSize: number;
  /** How long one sweep keeps reading a busy shard. */
  budgetMs: number;
}

/** The job ID of one event's delivery to one endpoint (BullMQ job IDs may not contain ':'). */
export function deliveryJobId(eventId: string, endpointId: string): string {
  return `${eventId}-${endpointId}`;
}

/** The tenant a notice belongs to (the keys' tenants; `default` for every notice before them). */
function tenantOf(notice: StoredNotice | undefined): string {
  return (notice as { tenant?: string } | undefined)?.tenant ?? 'default';
}

/** How often the dispatch forgets consumers of workers that exited (idle, holding nothing). */
const FORGET_IDLE_EVERY_MS = 60_000;

/** The dispatch sweep, run on the `event-dispatch` schedule by one worker at a time. */
export class EventDispatch {
  private forgotAt = 0;

  constructor(private readonly deps: DispatchDeps) {}

  /** One sweep over every shard; returns how many deliveries it queued. */
  async sweepOnce(): Promise<{ queued: number }> {
    const result = await dispatchOnce(this.deps);
    const now = this.deps.clock.now();
    if (now - this.forgotAt > FORGET_IDLE_EVERY_MS) {
      this.forgotAt = now;
      await Promise.all(
        this.deps.shards.map((shard) =>
          this.deps.log.forgetIdleConsumers(shard, Math.max(FORGET_IDLE_EVERY_MS, 2 * this.deps.reclaimAfterMs)),
        ),
      );
    }
    return result;
  }
}

/** One sweep over every shard; returns how many deliveries it queued. */
export async function dispatchOnce(deps: DispatchDeps): Promise<{ queued: number }> {
  // Each shard's newest entry is read before the endpoints are counted: with none, the group moves
  // up to it, and nothing written after it (perhaps for an endpoint created meanwhile) is skipped.
  const lastIds = await Promise.all(deps.shards.map((shard) => deps.log.lastId(shard)));
  if (!(await deps.endpoints.any())) {
    await Promise.all(deps.shards.map((shard, i) => deps.log.skipTo(shard, lastIds[i]!)));
    return { queued: 0 };
  }
  const counts = await Promise.all(deps.shards.map((shard) => dispatchShard(deps, shard)));
  return { queued: counts.reduce((sum, n) => sum + n, 0) };
}

async function dispatchShard(deps: DispatchDeps, shard: number): Promise<number> {
  const started = deps.clock.now();
  let queued = 0;
  for (;;) {
    const entries = await deps.log.next(shard, deps.consumer, deps.batchSize, deps.reclaimAfterMs);
    if (entries.length === 0) break;
    // Read after the entries: every endpoint created before one of them is in the list.
    const endpoints = (await deps.endpoints.list()).filter((e) => e.disabledAt === undefined);
    const jobs = await deliveriesOf(deps, entries, endpoints);
    await deps.queue.addDeliveries(jobs);
    await deps.endpoints.markUndelivered(jobs.map(({ data }) => ({ endpointId: data.endpointId, eventId: data.eventId, at: data.at })));
    await deps.log.ack(
      shard,
      entries.map((e) => e.id),
    );
    queued += jobs.length;
    if (entries.length < deps.batchSize || deps.clock.now() - started > deps.budgetMs) break;
  }
  return queued;
}

async function deliveriesOf(
  deps: DispatchDeps,
  entries: readonly StoredEntry[],
  endpoints: readonly EventEndpoint[],
): Promise<{ jobId: string; data: EventDeliveryJob }[]> {
  const jobs: { jobId: string; data: EventDeliveryJob }[] = [];
  const notices = new Map<string, Promise<[StoredNotice | undefined, StoredEntry | undefined]>>();
  const noticeOf = (id: string) => {
    let read = notices.get(id);
    if (!read) {
      read = Promise.all([deps.store.get(id).then((n) => n ?? undefined), deps.store.firstEntry(id)]);
      notices.set(id, read);
    }
    return read;
  };
  for (const entry of entries) {
    if (!isCallerEvent(entry)) continue;
    const at = Date.parse(entry.at);
    const subscribed = endpoints.filter((e) => e.events.includes(entry.type) && e.createdAt <= at);
    if (subscribed.length === 0) continue;
    const [notice, accepted] = await noticeOf(entry.noticeId);
    const tenant = tenantOf(notice);
    const forTenant = subscribed.filter((e) => e.tenant === tenant);
    if (forTenant.length === 0) continue;
    const eventId = callerEventId(entry);
    const body = JSON.stringify(callerEvent(entry, notice, accepted, tenant));
    for (const endpoint of forTenant) {
      jobs.push({
        jobId: deliveryJobId(eventId, endpoint.id),
        data: { endpointId: endpoint.id, eventId, type: entry.type, noticeId: entry.noticeId, at, body },
      });
    }
  }
  return jobs;
}
