/** The event endpoints callers manage through the API: create (its secret shown once), list, delete, read its deliveries. */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import {
  CALLER_EVENT_TYPES,
  type CallerEventType,
  type DeliveryRecord,
  type EventEndpoint,
  type EventEndpointStore,
} from '../store/event-endpoints.js';
import { checkEndpointUrl, EndpointUrlError, type EndpointUrlRules } from './endpoint-url.js';

/** The most endpoints one tenant may have. */
export const MAX_ENDPOINTS_PER_TENANT = 20;

/** What the API shows of an endpoint: everything but its secret. */
export interface EndpointView {
  id: string;
  url: string;
  events: CallerEventType[];
  createdAt: string;
  /** Set once the endpoint no longer receives events: why, and since when. */
  disabled: { reason: string; at: string } | null;
  lastDeliveredAt: string | null;
  failingSince: string | null;
}

/** A request Herald refuses, with the field at fault. */
export class EndpointRequestError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

export interface EndpointDeps {
  endpoints: EventEndpointStore;
  clock: Clock;
  rules: EndpointUrlRules;
}

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

export function endpointView(endpoint: EventEndpoint): EndpointView {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: endpoint.events,
    createdAt: new Date(endpoint.createdAt).toISOString(),
    disabled: endpoint.disabledAt === undefined ? null : { reason: endpoint.disabledReason ?? 'failing', at: iso(endpoint.disabledAt)! },
    lastDeliveredAt: iso(endpoint.lastDeliveredAt),
    failingSince: iso(endpoint.failingSince),
  };
}

/** Creates an endpoint of `tenant`; its `whsec_` secret is in the answer and never again. */
export async function createEndpoint(
  deps: EndpointDeps,
  tenant: string,
  request: { url: string; events: string[] },
): Promise<EndpointView & { secret: string }> {
  const events = [...new Set(request.events)];
  if (events.length === 0) throw new EndpointRequestError('events', 'events must name at least one event');
  for (const event of events) {
    if (!(CALLER_EVENT_TYPES as readonly string[]).includes(event)) {
      throw new EndpointRequestError('events', `events may be ${CALLER_EVENT_TYPES.join(', ')}`);
    }
  }
  let url: string;
  try {
    url = await checkEndpointUrl(request.url, deps.rules);
  } catch (error) {
    if (error instanceof EndpointUrlError) throw new EndpointRequestError('url', error.message);
    throw error;
  }
  const endpoint: EventEndpoint = {
    id: `ep_${randomBytes(12).toString('base64url')}`,
    tenant,
    url,
    events: events as CallerEventType[],
    secret: `whsec_${randomBytes(24).toString('base64')}`,
    createdAt: deps.clock.now(),
    disabledAt: undefined,
    disabledReason: undefined,
    lastDeliveredAt: undefined,
    failingSince: undefined,
  };
  if (!(await deps.endpoints.create(endpoint, MAX_ENDPOINTS_PER_TENANT))) {
    throw new EndpointRequestError('url', `a tenant may have at most ${MAX_ENDPOINTS_PER_TENANT} event endpoints`);
  }
  return { ...endpointView(endpoint), secret: endpoint.secret };
}

/** The endpoint of `tenant` with this ID, or undefined (another tenant's is not found either). */
export async function endpointOf(deps: Pick<EndpointDeps, 'endpoints'>, tenant: string, id: string): Promise<EventEndpoint | undefined> {
  const endpoint = /^ep_[A-Za-z0-9_-]{1,40}$/.test(id) ? await deps.endpoints.get(id) : undefined;
  return endpoint?.tenant === tenant ? endpoint : undefined;
}

/** A delivery record as the API lists it. */
export function deliveryView(record: DeliveryRecord) {
  return { ...record, at: new Date(record.at).toISOString() };
}
