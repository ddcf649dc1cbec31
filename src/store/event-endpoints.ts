import type { Keys } from './keys.js';
import type { RedisClient } from './redis.js';

/** The events a caller may subscribe an endpoint to, as the decision log names them. */
export const CALLER_EVENT_TYPES = ['notice.completed', 'fallback.decided', 'notice.failed'] as const;
export type CallerEventType = (typeof CALLER_EVENT_TYPES)[number];

/** Why an endpoint stopped receiving events: it answered 410, or it still failed when the retries ran out. */
export type DisabledReason = 'gone' | 'failing';

/** An event endpoint as stored. */
export interface EventEndpoint {
  id: string;
  tenant: string;
  url: string;
  events: CallerEventType[];
  /** `whsec_<base64>`: what the deliveries are signed with (Standard Webhooks). */
  secret: string;
  createdAt: number;
  disabledAt: number | undefined;
  disabledReason: DisabledReason | undefined;
  /** When the last delivery to it succeeded. */
  lastDeliveredAt: number | undefined;
  /** Since when its deliveries fail (cleared by a success). */
  failingSince: number | undefined;
}

/** How one delivery attempt of one event to an endpoint ended. */
export type DeliveryOutcome = 'delivered' | 'failed' | 'gone' | 'given_up' | 'dropped';

/** One delivery attempt, as `GET /v1/event-endpoints/:id/deliveries` lists it. */
export interface DeliveryRecord {
  eventId: string;
  type: CallerEventType;
  noticeId: string;
  outcome: DeliveryOutcome;
  /** The endpoint's HTTP status, when it answered. */
  status: number | null;
  attempts: number;
  error: string | null;
  at: number;
}

/** How many delivery attempts of each endpoint are kept to be listed. */
export const DELIVERIES_KEPT = 100;

/**
 * The callers' event endpoints, their recent deliveries, the events still to deliver and the
 * delivery counters, all under one hash tag (`{evt}`): endpoints are few, and the delivery steps
 * touch them together.
 */
export class EventEndpointStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** Stores a new endpoint, unless its tenant already has `max`; false then. */
  async create(endpoint: EventEndpoint, max: number): Promise<boolean> {
    const tenantCount = (await this.list(endpoint.tenant)).length;
    if (tenantCount >= max) return false;
    await this.redis
      .multi()
      .hset(this.keys.eventEndpoint(endpoint.id), flatten(endpoint))
      .zadd(this.keys.eventEndpoints, endpoint.createdAt, endpoint.id)
      .exec();
    return true;
  }

  async get(id: string): Promise<EventEndpoint | undefined> {
    return parse(id, await this.redis.hgetall(this.keys.eventEndpoint(id)));
  }

  /** Every endpoint, or a tenant's, oldest first. */
  async list(tenant?: string): Promise<EventEndpoint[]> {
    const ids = await this.redis.zrange(this.keys.eventEndpoints, 0, '-1');
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.keys.eventEndpoint(id));
    const replies = (await pipeline.exec()) ?? [];
    const endpoints = ids.flatMap((id, i) => {
      const found = parse(id, (replies[i]?.[1] ?? {}) as Record<string, string>);
      return found ? [found] : [];
    });
    return tenant === undefined ? endpoints : endpoints.filter((e) => e.tenant === tenant);
  }

  /** Whether any endpoint exists: with none, the decision log's events need no reading. */
  async any(): Promise<boolean> {
    return (await this.redis.zcard(this.keys.eventEndpoints)) > 0;
  }

  /** Deletes an endpoint and its delivery records; its queued deliveries then find it gone. */
  async delete(id: string): Promise<boolean> {
    const replies = await this.redis
      .multi()
      .del(this.keys.eventEndpoint(id))
      .zrem(this.keys.eventEndpoints, id)
      .del(this.keys.eventDeliveries(id))
      .exec();
    return Number(replies?.[0]?.[1]) > 0;
  }

  /** Stops an endpoint from receiving events (kept, and shown, until a caller deletes it). */
  async disable(id: string, reason: DisabledReason, at: number): Promise<void> {
    const key = this.keys.eventEndpoint(id);
    // Only an endpoint that still exists, and only once: the first reason stays.
    if ((await this.redis.exists(key)) === 0) return;
    await this.redis.hsetnx(key, 'disabledAt', String(at));
    await this.redis.hsetnx(key, 'disabledReason', reason);
  }

  /**
   * Records one delivery attempt: its record (the newest `DELIVERIES_KEPT` are kept), the
   * endpoint's health, the outcome's counter, and, once the event is settled for this endpoint,
   * its leaving the undelivered index.
   */
  async recordAttempt(endpointId: string, record: DeliveryRecord, settled: boolean): Promise<void> {
    const key = this.keys.eventEndpoint(endpointId);
    const multi = this.redis
      .multi()
      .lpush(this.keys.eventDeliveries(endpointId), JSON.stringify(record))
      .ltrim(this.keys.eventDeliveries(endpointId), 0, DELIVERIES_KEPT - 1)
      .hincrby(this.keys.eventMetrics, `outcome|${record.outcome}`, 1);
    if (record.outcome === 'delivered') multi.hset(key, 'lastDeliveredAt', String(record.at)).hdel(key, 'failingSince');
    else if (record.outcome === 'failed') multi.hsetnx(key, 'failingSince', String(record.at));
    if (settled) multi.zrem(this.keys.eventsUndelivered, undeliveredMember(endpointId, record.eventId));
    await multi.exec();
    // The endpoint may have been deleted meanwhile: its records go with it.
    if ((await this.redis.exists(key)) === 0) await this.redis.del(this.keys.eventDeliveries(endpointId));
  }

  /** An endpoint's recent delivery attempts, newest first. */
  async deliveries(endpointId: string, limit = DELIVERIES_KEPT): Promise<DeliveryRecord[]> {
    const items = await this.redis.lrange(this.keys.eventDeliveries(endpointId), 0, limit - 1);
    return items.map((item) => JSON.parse(item) as DeliveryRecord);
  }

  /** Marks events as queued for endpoints and not yet delivered, each scored by when it happened. */
  async markUndelivered(events: readonly { endpointId: string; eventId: string; at: number }[]): Promise<void> {
    if (events.length === 0) return;
    const members = events.flatMap((e) => [e.at, undeliveredMember(e.endpointId, e.eventId)]);
    // NX: an event queued again (a crash before its log entry was acknowledged) keeps its first time.
    await this.redis.zadd(this.keys.eventsUndelivered, 'NX', ...members);
  }

  /** How many events wait for an endpoint, and when the oldest of them happened (undefined: none). */
  async undelivered(): Promise<{ count: number; oldestAt: number | undefined }> {
    const [count, oldest] = await Promise.all([
      this.redis.zcard(this.keys.eventsUndelivered),
      this.redis.zrange(this.keys.eventsUndelivered, 0, '0', 'WITHSCORES'),
    ]);
    return { count, oldestAt: oldest.length === 2 ? Number(oldest[1]) : undefined };
  }

  /** The delivery counters by outcome. */
  async outcomes(): Promise<Record<string, number>> {
    const hash = await this.redis.hgetall(this.keys.eventMetrics);
    const counts: Record<string, number> = {};
    for (const [field, value] of Object.entries(hash))
      if (field.startsWith('outcome|')) counts[field.slice('outcome|'.length)] = Number(value);
    return counts;
  }
}

function undeliveredMember(endpointId: string, eventId: string): string {
  return `${endpointId} ${eventId}`;
}

function flatten(endpoint: EventEndpoint): Record<string, string> {
  const fields: Record<string, string> = {
    tenant: endpoint.tenant,
    url: endpoint.url,
    events: endpoint.events.join(','),
    secret: endpoint.secret,
    createdAt: String(endpoint.createdAt),
  };
  if (endpoint.disabledAt !== undefined) fields.disabledAt = String(endpoint.disabledAt);
  if (endpoint.disabledReason !== undefined) fields.disabledReason = endpoint.disabledReason;
  return fields;
}

function parse(id: string, hash: Record<string, string>): EventEndpoint | undefined {
  if (hash.url === undefined) return undefined;
  const num = (field: string) => (hash[field] === undefined ? undefined : Number(hash[field]));
  return {
    id,
    tenant: hash.tenant ?? 'default',
    url: hash.url,
    events: (hash.events ?? '').split(',').filter(Boolean) as CallerEventType[],
    secret: hash.secret ?? '',
    createdAt: Number(hash.createdAt),
    disabledAt: num('disabledAt'),
    disabledReason: hash.disabledReason as DisabledReason | undefined,
    lastDeliveredAt: num('lastDeliveredAt'),
    failingSince: num('failingSince'),
  };
}
