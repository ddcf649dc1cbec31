import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from './deps.js';
import type { StepContext } from '../notice/steps/context.js';
import { recordWebhookEvent, type WebhookOutcome } from '../notice/steps/webhook.js';
import { WebhookOnceStore } from '../store/webhook-once.js';
import { webhookReceivers } from '../webhooks/index.js';
import {
  WEBHOOK_BODY_LIMITS,
  WEBHOOK_MAX_FORM_FIELDS,
  WebhookPayloadError,
  type WebhookReceiver,
  type WebhookRequest,
} from '../webhooks/types.js';
import { sendTooManyFailures, type AuthFailures } from './auth-failures.js';
import { errorBody } from './errors.js';

/**
 * `POST /webhooks/<provider>`, one route per configured provider; the others answer 404. What a
 * request costs before it proves itself is bounded: each route has its own small body limit
 * (413), and a form with more fields than a provider sends is refused (400) before any
 * signature is computed. A request is verified on its raw bytes (401 and nothing stored when it
 * fails, counted in the client's failure limit: 429 past it), a signature that does not cover
 * its event is taken once, its events are recorded on their notices, and every verified request
 * gets 200, whether its events were recorded, duplicates, or about messages Herald does not
 * know: the answer reveals nothing.
 */
export async function webhookRoutes(app: FastifyInstance, deps: AppDeps, failures: AuthFailures): Promise<void> {
  const receivers = webhookReceivers(deps.config, { warn: (details, message) => deps.logger.warn(details, message) });
  if (receivers.length === 0) return;
  const ctx = deps.webhookSteps;
  const once = new WebhookOnceStore(deps.redis, deps.store.keys);
  // Signatures are over the bytes sent: every body reaches the receiver as it came.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  for (const receiver of receivers) {
    app.post(
      `/webhooks/${receiver.provider}`,
      { schema: { hide: true }, bodyLimit: WEBHOOK_BODY_LIMITS[receiver.provider] },
      (request, reply) => receive({ ctx, once, failures }, receiver, request, reply),
    );
  }
}

interface ReceiveDeps {
  ctx: StepContext;
  once: WebhookOnceStore;
  failures: AuthFailures;
}

async function receive(deps: ReceiveDeps, receiver: WebhookReceiver, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const webhookRequest: WebhookRequest = {
    rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
    headers: request.headers,
    url: request.url,
  };
  if ((receiver.readsForm || isForm(request)) && formFields(webhookRequest.rawBody) > WEBHOOK_MAX_FORM_FIELDS) {
    return reply.code(400).send(errorBody('validation_failed', `The webhook form has more than ${WEBHOOK_MAX_FORM_FIELDS} fields.`));
  }
  if (!receiver.verify(webhookRequest)) return refuse(deps, receiver, request, reply, 'it does not verify');
  const claim = receiver.once?.(webhookRequest);
  if (claim && !(await deps.once.claim(receiver.provider, claim.identity, claim.forMs))) {
    return refuse(deps, receiver, request, reply, 'its signature was used before');
  }
  let events;
  try {
    events = receiver.events(webhookRequest);
  } catch (error) {
    if (!(error instanceof WebhookPayloadError)) throw error;
    return reply.code(400).send(errorBody('validation_failed', `The webhook body is not ${receiver.provider}'s: ${error.message}`));
  }
  const outcomes: WebhookOutcome[] = [];
  try {
    for (const event of events) outcomes.push(await recordWebhookEvent(deps.ctx, receiver.provider, event));
  } catch (error) {
    // Not recorded (Redis failed): the provider's retry, under the same signature, must be taken.
    if (claim) await deps.once.release(receiver.provider, claim.identity).catch(() => undefined);
    throw error;
  }
  request.log.debug({ provider: receiver.provider, outcomes }, 'webhook received');
  return reply.code(200).send({ received: events.length });
}

async function refuse(
  deps: ReceiveDeps,
  receiver: WebhookReceiver,
  request: FastifyRequest,
  reply: FastifyReply,
  why: string,
): Promise<unknown> {
  request.log.warn({ provider: receiver.provider }, `webhook refused: ${why}`);
  const blocked = await deps.failures.fail(request.ip);
  if (blocked !== undefined) return sendTooManyFailures(reply, blocked);
  return reply.code(401).send(errorBody('unauthorized', `The webhook request was refused: ${why}.`));
}

function isForm(request: FastifyRequest): boolean {
  return (request.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded');
}

/** How many fields a form body has, counted without parsing it. */
function formFields(body: Buffer): number {
  if (body.length === 0) return 0;
  let fields = 1;
  for (let at = body.indexOf(0x26); at !== -1; at = body.indexOf(0x26, at + 1)) fields += 1;
  return fields;
}
