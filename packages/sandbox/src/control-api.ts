/**
 * The sandbox's own control routes under `/__sandbox/`, for tests that drive Herald's worker
 * processes from outside: what was sent, what was asked, and faults to inject.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { SandboxControls } from './server.js';
import { WEBHOOK_FAULTS, WEBHOOK_PROVIDERS, type WebhookFaultRates, type WebhookProvider, type WebhookTarget } from './webhooks.js';

/** Registers the `/__sandbox/` routes. */
export function registerControl(app: FastifyInstance, controls: SandboxControls): void {
  const contains = (value: string | null | undefined, wanted: string | undefined): boolean =>
    !wanted || (value ?? '').toLowerCase().includes(wanted.toLowerCase());

  app.get<{ Querystring: { to?: string } }>('/__sandbox/emails', async (request) =>
    controls.emails().filter((e) => contains(e.to, request.query.to)),
  );

  app.get<{ Querystring: { to?: string } }>('/__sandbox/sms', async (request) =>
    controls.sms().filter((s) => contains(s.to, request.query.to)),
  );

  app.get<{ Querystring: { operation?: string; recipient?: string } }>('/__sandbox/requests', async (request) =>
    controls
      .requests()
      .filter((r) => !request.query.operation || r.operation === request.query.operation)
      .filter((r) => contains(r.recipient, request.query.recipient)),
  );

  app.get('/__sandbox/faults', async () => controls.faults());

  app.get('/__sandbox/queues', async () => controls.feedQueues());

  app.post('/__sandbox/faults', async (request, reply) => {
    try {
      return await reply.code(201).send(controls.injectFault(request.body as never));
    } catch (error) {
      if (error instanceof TypeError) return reply.code(400).send({ error: error.message });
      throw error;
    }
  });

  app.delete('/__sandbox/faults', async (_request, reply) => {
    controls.clearFaults();
    return reply.code(204).send();
  });

  // Webhooks: where the outbox pushes, with which faults, and what became of each push.
  const badRequest = (reply: FastifyReply, run: () => unknown) => {
    try {
      return run();
    } catch (error) {
      if (error instanceof TypeError) return reply.code(400).send({ error: error.message });
      throw error;
    }
  };

  app.get('/__sandbox/webhooks', async () => webhookSettings(controls));

  app.put('/__sandbox/webhooks', async (request, reply) =>
    badRequest(reply, () => {
      controls.configureWebhooks(parseWebhookTarget(request.body));
      return webhookSettings(controls);
    }),
  );

  app.delete('/__sandbox/webhooks', async (_request, reply) => {
    controls.configureWebhooks(undefined);
    return reply.code(204).send();
  });

  app.put('/__sandbox/webhooks/faults', async (request, reply) =>
    badRequest(reply, () => {
      controls.setWebhookFaults(parseWebhookFaultRates(request.body));
      return webhookSettings(controls);
    }),
  );

  app.get<{ Querystring: { provider?: string; messageId?: string } }>('/__sandbox/webhooks/deliveries', async (request) =>
    controls
      .webhookDeliveries()
      .filter((d) => !request.query.provider || d.provider === request.query.provider)
      .filter((d) => !request.query.messageId || d.messageId === request.query.messageId),
  );

  app.post('/__sandbox/reset', async (_request, reply) => {
    controls.reset();
    return reply.code(204).send();
  });
}

/** What the outbox is set to, without its secrets: which providers it can sign for. */
function webhookSettings(controls: SandboxControls) {
  const target = controls.webhookTarget();
  return {
    target: target
      ? {
          url: target.url,
          publicUrl: target.publicUrl ?? target.url,
          providers: WEBHOOK_PROVIDERS.filter((p) => Boolean(target[SECRET_OF[p]])),
        }
      : null,
    faults: controls.webhookFaults(),
  };
}

const SECRET_OF = {
  postmark: 'postmarkAuth',
  twilio: 'twilioAuthToken',
  sendgrid: 'sendgridPrivateKey',
  mailgun: 'mailgunSigningKey',
} as const satisfies Record<WebhookProvider, keyof WebhookTarget>;

/** Checks an untrusted webhook target (from the HTTP control API); throws TypeError saying what is wrong. */
export function parseWebhookTarget(input: unknown): WebhookTarget {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new TypeError('a webhook target must be a JSON object');
  const known = new Set(['url', 'publicUrl', ...Object.values(SECRET_OF)]);
  const fields = input as Record<string, unknown>;
  for (const name of Object.keys(fields))
    if (!known.has(name)) throw new TypeError(`unknown field ${name}: a target has ${[...known].join(', ')}`);
  for (const name of ['url', 'publicUrl']) {
    const value = fields[name];
    if (value === undefined && name === 'publicUrl') continue;
    if (typeof value !== 'string' || !/^https?:\/\/[^/]/.test(value)) throw new TypeError(`${name} must be an http:// or https:// URL`);
  }
  for (const name of Object.values(SECRET_OF)) {
    const value = fields[name];
    if (value !== undefined && (typeof value !== 'string' || value === '')) throw new TypeError(`${name} must be a non-empty string`);
  }
  const strip = (url: string) => url.replace(/\/+$/, '');
  return {
    ...(fields as unknown as WebhookTarget),
    url: strip(fields.url as string),
    ...(typeof fields.publicUrl === 'string' ? { publicUrl: strip(fields.publicUrl) } : {}),
  };
}

/** Checks untrusted webhook fault rates: each a probability from 0 to 1, and `delayMs` up to a minute. */
export function parseWebhookFaultRates(input: unknown): WebhookFaultRates {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new TypeError('webhook faults must be a JSON object');
  const rates: WebhookFaultRates = {};
  for (const [name, value] of Object.entries(input)) {
    if ((WEBHOOK_FAULTS as readonly string[]).includes(name)) {
      if (typeof value !== 'number' || !(value >= 0 && value <= 1)) throw new TypeError(`${name} must be a probability from 0 to 1`);
      rates[name as keyof Omit<WebhookFaultRates, 'delayMs'>] = value;
    } else if (name === 'delayMs') {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 60_000)
        throw new TypeError('delayMs must be a whole number of milliseconds from 0 to 60000');
      rates.delayMs = value;
    } else {
      throw new TypeError(`unknown fault ${name}: the faults are ${[...WEBHOOK_FAULTS, 'delayMs'].join(', ')}`);
    }
  }
  return rates;
}
