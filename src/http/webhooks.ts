import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppDeps } from '../app.js';
import { engineSettings } from '../compose.js';
import { StepContext } from '../notice/steps/context.js';
import { noProviderCalls, recordWebhookEvent, type WebhookOutcome } from '../notice/steps/webhook.js';
import { webhookReceivers } from '../webhooks/index.js';
import { WebhookPayloadError, type WebhookReceiver } from '../webhooks/types.js';
import { errorBody } from './errors.js';

/**
 * `POST /webhooks/<provider>` (SPEC §11), one route per configured provider; the others answer
 * 404. A request is verified on its raw bytes (401 and nothing stored when it fails), its events
 * are recorded on their notices, and every verified request gets 200, whether its events were
 * recorded, duplicates, or about messages Herald does not know: the answer reveals nothing.
 */
export async function webhookRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const receivers = webhookReceivers(deps.config);
  if (receivers.length === 0) return;
  const ctx = new StepContext({
    ...noProviderCalls(),
    store: deps.store,
    policies: deps.policies,
    suppressions: deps.suppressions,
    clock: deps.clock,
    log: deps.logger,
    schedule: deps.scheduler,
    settings: engineSettings(deps.config),
  });
  // Signatures are over the bytes sent: every body reaches the receiver as it came.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  for (const receiver of receivers) {
    app.post(`/webhooks/${receiver.provider}`, { schema: { hide: true } }, (request, reply) => receive(ctx, receiver, request, reply));
  }
}

async function receive(ctx: StepContext, receiver: WebhookReceiver, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const webhookRequest = {
    rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
    headers: request.headers,
    url: request.url,
  };
  if (!receiver.verify(webhookRequest)) {
    request.log.warn({ provider: receiver.provider }, 'webhook refused: it does not verify');
    return reply.code(401).send(errorBody('unauthorized', 'The webhook request does not verify.'));
  }
  let events;
  try {
    events = receiver.events(webhookRequest);
  } catch (error) {
    if (!(error instanceof WebhookPayloadError)) throw error;
    return reply.code(400).send(errorBody('validation_failed', `The webhook body is not ${receiver.provider}'s: ${error.message}`));
  }
  const outcomes: WebhookOutcome[] = [];
  for (const event of events) outcomes.push(await recordWebhookEvent(ctx, receiver.provider, event));
  request.log.debug({ provider: receiver.provider, outcomes }, 'webhook received');
  return reply.code(200).send({ received: events.length });
}
