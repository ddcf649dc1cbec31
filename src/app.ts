import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { storeUnreachable } from './store/redis.js';
import type { Config } from './config.js';
import type { AppDeps } from './http/deps.js';
import { adminRoutes } from './http/admin.js';
import { metricsRoutes } from './http/metrics.js';
import { ApiKeyVerifier, DEFAULT_TENANT, forbidden, type Caller } from './http/auth.js';
import type { Scope } from './store/api-keys.js';
import { scopeOf } from './http/scopes.js';
import { AuthFailures, sendTooManyFailures } from './http/auth-failures.js';
import { leasedRateLimitStore } from './http/rate-limit.js';
import {
  clientErrorHandler,
  ERROR_CATALOGUE,
  errorBody,
  errorHandler,
  frameworkErrors,
  HttpError,
  quotedPath,
  urlGuard,
} from './http/errors.js';
import { healthRoutes } from './http/health.js';
import { noticeRoutes } from './http/notices.js';
import { recipientRoutes } from './http/recipients.js';
import { statsRoutes } from './http/stats.js';
import { suppressionRoutes } from './http/suppressions.js';
import { webhookRoutes } from './http/webhooks.js';
import { eventEndpointRoutes } from './http/event-endpoints.js';

export type { AppDeps } from './http/deps.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** A stable ID of the API key the request authenticated with. */
    apiKeyId: string;
    /** The tenant the key acts for: what it creates is that tenant's, and it sees no other's. */
    tenant: string;
    /** What the key may do. */
    scopes: readonly Scope[];
  }
}

/**
 * HERALD_TRUST_PROXY as Fastify takes it: a hop count becomes "trust the nearest n hops", and
 * `true` trusts the nearest one. (Fastify's own `true` trusts every hop, so the client address
 * would be the first X-Forwarded-For entry, which the client writes itself.)
 */
function fastifyTrustProxy(trust: Config['trustProxy']): boolean | string | ((address: string, hop: number) => boolean) {
  const hops = trust === true ? 1 : trust;
  return typeof hops === 'number' ? (_address, hop) => hop < hops : hops;
}

/** A stable name for an operation, for clients generated from /docs/json: `POST /v1/notices/:id/cancel` → `postNoticesIdCancel`. */
function operationId(method: string, url: string): string {
  const words = url
    .replace(/^\/v1\//, '/')
    .split(/[/:-]/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1));
  return `${method.toLowerCase()}${words.join('')}`;
}

/** Builds the web app (no listen): tests call `app.inject()`, server.ts listens. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: deps.config.bodyLimit,
    // Route parameters carry recipient IDs (≤ 128) and suppressed addresses (≤ 254).
    routerOptions: { maxParamLength: 300 },
    // Reject what the schema does not allow instead of silently dropping or coercing it.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: true } },
    requestIdHeader: 'x-request-id',
    // One line per request, written when it completes (see the onResponse hook), not two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => `req_${Math.random().toString(36).slice(2, 12)}`,
    // request.ip and request.protocol (the login cookie's Secure) from X-Forwarded-* only when set.
    trustProxy: fastifyTrustProxy(deps.config.trustProxy),
    // Every answer is Herald's JSON error, even for what fails before routing.
    frameworkErrors,
    clientErrorHandler,
  });
  app.setErrorHandler(errorHandler((error) => !storeUnreachable(deps.redis, error)));
  // Fastify parses text/plain by default; Herald's API takes JSON only (415 for the rest).
  app.removeContentTypeParser('text/plain');
  app.addHook('onRequest', urlGuard);
  // Below info (LOG_LEVEL=warn) the line would not be written: no hook then puts it together.
  if (deps.logger.isLevelEnabled('info'))
    app.addHook('onResponse', async (request, reply) => {
      request.log.info(
        {
          method: request.method,
          url: request.routeOptions.url ?? quotedPath(request.url),
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime),
        },
        'request',
      );
    });
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send(errorBody('not_found', `No route ${request.method} ${quotedPath(request.url)}.`)),
  );

  await app.register(swagger, {
    openapi: {
      // 3.1: its schemas are JSON Schema, as the routes' are (3.0 refuses some of their keywords).
      openapi: '3.1.0',
      info: {
        title: 'Herald',
        version: '0.1.0',
        description:
          'Gets a notice to a person before a deadline: email first, then exactly one SMS when delivery is not confirmed by the channel deadline, with a decision log that explains every step. ' +
          `Errors are { "error": { "code", "message", "details"? } } with these codes: ${Object.entries(ERROR_CATALOGUE)
            .map(([code, { status }]) => `${code} (${status})`)
            .join(', ')}.`,
      },
      servers: [
        {
          url: deps.config.publicUrl ?? `http://${deps.config.host === '0.0.0.0' ? '127.0.0.1' : deps.config.host}:${deps.config.port}`,
          description: 'This Herald',
        },
      ],
      components: {
        securitySchemes: {
          apiKey: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key: one of HERALD_API_KEYS (tenant default, every scope), or one made by `herald keys create --tenant T --scopes …`. Each operation names the scope it needs: send (create, batch, cancel), read (view, events, list, stats), manage (recipient policies, suppressions, event endpoints); a key without it gets 403 forbidden.',
          },
        },
      },
      tags: [
        { name: 'notices', description: 'Accept, read, audit and cancel notices.' },
        { name: 'recipients', description: 'Versioned recipient consent and region.' },
        { name: 'suppressions', description: 'Addresses no notice may be sent to, per channel.' },
        { name: 'events', description: "Endpoints that receive the notices' outcomes as signed POSTs (Standard Webhooks)." },
        { name: 'operations', description: 'Health and readiness.' },
      ],
    },
    // Each /v1 operation's security names the scope it needs, from the one table the hook checks.
    transform: ({ schema, url, route }) => {
      const method = Array.isArray(route.method) ? route.method[0]! : route.method;
      const scope = scopeOf(method, url);
      const transformed = { ...schema } as Record<string, unknown>;
      if (scope !== undefined) transformed.security = [{ apiKey: [scope] }];
      transformed.operationId ??= operationId(method, url);
      return { schema: transformed as typeof schema, url };
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  const failures = new AuthFailures(deps.redis, deps.store.keys, deps.config.authFailuresPerMinute, deps.clock);
  await app.register(async (scope) => healthRoutes(scope, deps));
  // With HERALD_METRICS_PORT, /metrics is served by the listener of its own only (server.ts).
  if (deps.config.metrics.port === undefined) await app.register(async (scope) => metricsRoutes(scope, deps, failures));
  await app.register(async (scope) => adminRoutes(scope, deps, failures));
  await app.register(async (scope) => webhookRoutes(scope, deps, failures));
  const verifier = new ApiKeyVerifier(deps.config.apiKeys, deps.apiKeys, deps.clock);
  await app.register(async (v1) => {
    v1.decorateRequest('apiKeyId', '');
    v1.decorateRequest('tenant', DEFAULT_TENANT);
    // A reference type may not be a decorator's default: set by the hook below for every request.
    v1.decorateRequest('scopes', null as unknown as readonly Scope[]);
    v1.addHook('onRequest', async (request, reply) => {
      let caller: Caller;
      try {
        caller = await verifier.verify(request);
      } catch (error) {
        // A missing key guesses nothing; a wrong one counts towards the client's limit. A right
        // one is never refused for what other requests from its address did.
        const wrong = error instanceof HttpError && error.code === 'unauthorized' && Boolean(request.headers.authorization);
        const blocked = wrong ? await failures.fail(request.ip) : undefined;
        if (blocked !== undefined) return sendTooManyFailures(reply, blocked);
        throw error;
      }
      request.apiKeyId = caller.keyId;
      request.tenant = caller.tenant;
      request.scopes = caller.scopes;
      // Each route needs a scope (src/http/scopes.ts); a key without it gets 403.
      if (request.routeOptions.url === undefined) return; // no route: the 404 handler answers
      const scope = scopeOf(request.method, request.routeOptions.url);
      if (scope === undefined) throw new HttpError('forbidden', 'No API key may call this route.');
      if (!caller.scopes.includes(scope)) throw forbidden(scope);
    });
    if (deps.config.rateLimitPerMinute > 0) {
      // Per API key, shared by every web process through Redis, a lease of places at a time
      // (src/http/rate-limit.ts); a Redis outage does not block requests here (the route itself
      // answers 503).
      await v1.register(rateLimit, {
        max: deps.config.rateLimitPerMinute,
        timeWindow: 60_000,
        keyGenerator: (request) => request.apiKeyId,
        store: leasedRateLimitStore(deps.redis, deps.store.keys.rateLimitNamespace, deps.clock),
        skipOnError: true,
        errorResponseBuilder: (_request, context) =>
          Object.assign(new Error(`Rate limit of ${context.max} requests per minute reached; retry in ${context.after}.`), {
            statusCode: 429,
          }),
      });
    }
    await noticeRoutes(v1, deps);
    await recipientRoutes(v1, deps);
    await suppressionRoutes(v1, deps);
    await statsRoutes(v1, deps);
    await eventEndpointRoutes(v1, deps);
  });
  return app;
}

/** The app of the metrics listener (HERALD_METRICS_PORT): /metrics and nothing else. */
export async function buildMetricsApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 1024,
    trustProxy: fastifyTrustProxy(deps.config.trustProxy),
    frameworkErrors,
    clientErrorHandler,
  });
  app.setErrorHandler(errorHandler((error) => !storeUnreachable(deps.redis, error)));
  app.setNotFoundHandler((request, reply) =>
    reply.status(404).send(errorBody('not_found', `No route ${request.method} ${quotedPath(request.url)}; this listener serves /metrics.`)),
  );
  const failures = new AuthFailures(deps.redis, deps.store.keys, deps.config.authFailuresPerMinute, deps.clock);
  await app.register(async (scope) => metricsRoutes(scope, deps, failures));
  return app;
}
