/** Builds the sandbox's Fastify instance: both emulated APIs and the control routes, not listening. */
import { setMaxListeners } from 'node:events';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyServerOptions } from 'fastify';
import { registerControl } from './control-api.js';
import { EventReceiver, registerEventReceiver } from './event-receiver.js';
import type { SandboxContext } from './exchange.js';
import { isMailgunPath, mailgunError, registerMailgun } from './mailgun-api.js';
import { INFRAI_ERROR_CODES, INFRAI_PATHS, infraiError, registerInfrai } from './infrai-api.js';
import { registerPostmark } from './postmark-api.js';
import { isSendgridPath, registerSendgrid, sendgridError } from './sendgrid-api.js';
import { emailView, SandboxState, smsView } from './state.js';
import { registerTwilio, twilioError } from './twilio-api.js';
import { registerAwsSms } from './aws-sms-api.js';
import { registerSes, sesError } from './ses-api.js';
import { AwsJsonTargets, awsJsonError, isAwsJsonRequest, registerAwsJson, registerSqs, SandboxQueues } from './sqs-api.js';
import type { Sandbox, SandboxOptions } from './types.js';
import { WebhookOutbox } from './webhooks.js';

/** The in-process controls, served over HTTP by the control routes too. */
export type SandboxControls = Omit<Sandbox, 'url' | 'port' | 'close'>;

export interface SandboxApp {
  app: FastifyInstance;
  controls: SandboxControls;
  /** Ends pending answer delays; call before closing the app. */
  abortPending(): void;
}

const DEFAULTS = { indexLagMs: 300, slowMs: 1500, maxMessages: 100_000, maxRequests: 100_000 };

/** Builds the sandbox app (call `listen` on it, or `inject` for tests). */
export function buildSandboxApp(opts: SandboxOptions = {}): SandboxApp {
  const state = new SandboxState({
    maxMessages: opts.maxMessages ?? DEFAULTS.maxMessages,
    maxRequests: opts.maxRequests ?? DEFAULTS.maxRequests,
  });
  // The events queues the feed providers (SES, AWS SMS) publish into.
  const queues = new SandboxQueues(opts.maxMessages ?? DEFAULTS.maxMessages);
  const closing = new AbortController();
  // Every held answer and every webhook delivery in flight listens for the close: many at once.
  setMaxListeners(0, closing.signal);
  const ctx: SandboxContext = {
    state,
    closing: closing.signal,
    indexLagMs: opts.indexLagMs ?? DEFAULTS.indexLagMs,
    slowMs: opts.slowMs ?? DEFAULTS.slowMs,
    webhooks: new WebhookOutbox(closing.signal, opts.webhookRandom),
  };
  const app = Fastify({
    logger: (opts.logger ?? false) as FastifyServerOptions['logger'],
    // Hanging requests are the point of some faults: closing must not wait for them.
    forceCloseConnections: true,
  });

  // A caller's endpoint for Herald's events, to see the loop with no code of one's own.
  const events = new EventReceiver();
  const controls: SandboxControls = {
    emails: () => {
      const now = Date.now();
      return [...state.emails.values()].map((r) => emailView(r, now));
    },
    sms: () => {
      const now = Date.now();
      return [...state.sms.values()].map((r) => smsView(r, now));
    },
    requests: () => state.requests(),
    feedQueues: () => queues.view(),
    injectFault: (fault) => state.faults.add(fault),
    faults: () => state.faults.list(),
    clearFaults: () => state.faults.clear(),
    configureWebhooks: (target) => ctx.webhooks.configure(target),
    setWebhookFaults: (rates) => ctx.webhooks.setFaults(rates),
    webhookDeliveries: () => ctx.webhooks.deliveries(),
    webhookTarget: () => ctx.webhooks.configured,
    webhookFaults: () => ctx.webhooks.faults(),
    reset: () => {
      state.reset();
      events.clear();
      queues.clear();
      ctx.webhooks.clear();
    },
  };

  const isTwilio = (url: string): boolean => url.startsWith('/2010-04-01/');
  const isSes = (url: string): boolean => url.startsWith('/v2/email/');
  const send = (reply: FastifyReply, answer: { status: number; body?: unknown; headers?: Record<string, string> }) =>
    reply
      .code(answer.status)
      .headers(answer.headers ?? {})
      .send(answer.body);
  const isInfrai = (url: string): boolean => INFRAI_PATHS.some((prefix) => url.startsWith(prefix));
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    if (isSes(request.url)) return send(reply, sesError(404, 'NotFoundException', `Not found: ${request.method} ${path}`));
    if (request.headers['x-amz-target'] !== undefined)
      return send(reply, awsJsonError(400, 'UnknownOperationException', `Unknown operation ${request.method} ${path}`));
    if (isTwilio(request.url)) {
      const { status, body } = twilioError(404, 20404, `The requested resource ${path} was not found`);
      return reply.code(status).send(body);
    }
    // Mailgun's paths are /v3/<domain>/…, inside SendGrid's /v3/: Mailgun's are told apart first.
    if (isMailgunPath(request.url)) return reply.code(404).send(mailgunError(404, 'Not Found').body);
    if (isSendgridPath(request.url)) {
      const { status, body } = sendgridError(404, `resource not found: ${request.method} ${path}`);
      return reply.code(status).send(body);
    }
    if (isInfrai(request.url)) {
      const { status, body, headers } = infraiError(404, INFRAI_ERROR_CODES.notFound, `Not found: ${request.method} ${path}`);
      return reply
        .code(status)
        .headers(headers ?? {})
        .send(body);
    }
    return reply.code(404).send({ ErrorCode: 0, Message: `Not found: ${request.method} ${path}` });
  });
  app.setErrorHandler((error: { statusCode?: number; message: string }, request, reply) => {
    const clientError = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500;
    if (isTwilio(request.url)) {
      const { status, body } = clientError ? twilioError(400, 20001, error.message) : twilioError(500, 20500, 'Internal Server Error');
      return reply.code(status).send(body);
    }
    if (isMailgunPath(request.url)) {
      const { status, body } = clientError ? mailgunError(400, error.message) : mailgunError(500, 'Internal Server Error');
      return reply.code(status).send(body);
    }
    if (isSendgridPath(request.url)) {
      const { status, body } = clientError
        ? sendgridError(400, `Bad Request: ${error.message}`)
        : sendgridError(500, 'internal server error');
      return reply.code(status).send(body);
    }
    if (isSes(request.url)) {
      return send(
        reply,
        clientError ? sesError(400, 'BadRequestException', error.message) : sesError(500, 'InternalFailure', 'Internal Failure'),
      );
    }
    if (isAwsJsonRequest(request)) {
      return send(
        reply,
        clientError ? awsJsonError(400, 'SerializationException', error.message) : awsJsonError(500, 'InternalFailure', 'Internal Failure'),
      );
    }
    if (isInfrai(request.url)) {
      const { status, body, headers } = clientError
        ? infraiError(400, INFRAI_ERROR_CODES.invalid, `Unreadable request: ${error.message}`)
        : infraiError(500, INFRAI_ERROR_CODES.internal, 'Internal error');
      return reply
        .code(status)
        .headers(headers ?? {})
        .send(body);
    }
    if (request.url.startsWith('/__sandbox/')) {
      return reply.code(clientError ? (error.statusCode as number) : 500).send({ error: error.message });
    }
    // Postmark answers unreadable requests (bad JSON) with 422 and ErrorCode 402.
    return clientError
      ? reply.code(422).send({ ErrorCode: 402, Message: `Received invalid JSON input: ${error.message}` })
      : reply.code(500).send({ ErrorCode: 0, Message: 'Internal Server Error' });
  });

  registerPostmark(app, ctx);
  registerTwilio(app, ctx);
  registerSendgrid(app, ctx);
  registerSes(app, ctx, queues);
  const awsTargets = new AwsJsonTargets();
  registerSqs(awsTargets, ctx, queues);
  registerAwsSms(awsTargets, ctx, queues);
  registerAwsJson(app, awsTargets);
  registerMailgun(app, ctx);
  registerInfrai(app, ctx);
  registerControl(app, controls);
  registerEventReceiver(app, events);

  return { app, controls, abortPending: () => closing.abort() };
}
