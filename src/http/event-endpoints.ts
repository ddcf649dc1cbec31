import type { FastifyInstance } from 'fastify';
import { createEndpoint, deliveryView, EndpointRequestError, endpointOf, endpointView, type EndpointDeps } from '../events/endpoints.js';
import type { AppDeps } from './deps.js';
import { HttpError } from './errors.js';
import {
  CreatedEventEndpoint,
  CreateEventEndpointBody,
  DeliveryList,
  ErrorResponse,
  EventEndpointList,
  EventEndpointParams,
} from './schemas.js';

const secured = { tags: ['events'], security: [{ apiKey: [] }] };
const errors = { 400: ErrorResponse, 401: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };

/** The tenant a request acts for. */
const tenantOf = (request: { tenant: string }) => request.tenant;

/** `/v1/event-endpoints`: where Herald POSTs a caller's events (signed per Standard Webhooks). */
export async function eventEndpointRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const endpointDeps: EndpointDeps = {
    endpoints: deps.eventEndpoints,
    clock: deps.clock,
    rules: { httpsOnly: deps.config.events.httpsOnly, allowPrivate: deps.config.events.allowPrivateUrls },
  };
  const found = async (request: { params: EventEndpointParams; tenant: string }) => {
    const endpoint = await endpointOf(endpointDeps, tenantOf(request), request.params.id);
    if (!endpoint) throw new HttpError('not_found', `No event endpoint ${request.params.id}.`);
    return endpoint;
  };

  app.post<{ Body: CreateEventEndpointBody }>(
    '/v1/event-endpoints',
    {
      schema: {
        ...secured,
        summary: 'Subscribe an endpoint to events',
        description:
          'Herald POSTs each subscribed event (notice.completed, fallback.decided, notice.failed) to the URL, signed with the secret in this answer (shown once) per Standard Webhooks: webhook-id (the same on every retry), webhook-timestamp and webhook-signature. A 2xx is delivered; anything else, or no answer in 10 s, is retried with backoff for HERALD_EVENT_RETRY_FOR; 410 disables the endpoint.',
        body: CreateEventEndpointBody,
        response: { 201: CreatedEventEndpoint, ...errors },
      },
    },
    async (request, reply) => {
      try {
        return reply.status(201).send(await createEndpoint(endpointDeps, tenantOf(request), request.body));
      } catch (error) {
        if (error instanceof EndpointRequestError) {
          throw new HttpError('validation_failed', error.message, [{ path: `body.${error.field}`, message: error.message }]);
        }
        throw error;
      }
    },
  );

  app.get(
    '/v1/event-endpoints',
    { schema: { ...secured, summary: 'The event endpoints', response: { 200: EventEndpointList, ...errors } } },
    async (request) => ({
      endpoints: (await deps.eventEndpoints.list(tenantOf(request))).map(endpointView),
    }),
  );

  app.delete<{ Params: EventEndpointParams }>(
    '/v1/event-endpoints/:id',
    {
      schema: {
        ...secured,
        summary: 'Delete an event endpoint: no more events go to it',
        params: EventEndpointParams,
        response: { 204: { type: 'null' }, ...errors },
      },
    },
    async (request, reply) => {
      const endpoint = await found(request);
      await deps.eventEndpoints.delete(endpoint.id);
      return reply.status(204).send();
    },
  );

  app.get<{ Params: EventEndpointParams }>(
    '/v1/event-endpoints/:id/deliveries',
    {
      schema: {
        ...secured,
        summary: "An endpoint's recent delivery attempts, newest first",
        params: EventEndpointParams,
        response: { 200: DeliveryList, ...errors },
      },
    },
    async (request) => {
      const endpoint = await found(request);
      return { deliveries: (await deps.eventEndpoints.deliveries(endpoint.id)).map(deliveryView) };
    },
  );
}
