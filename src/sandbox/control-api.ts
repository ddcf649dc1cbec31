/**
 * The sandbox's own control routes under `/__sandbox/`, for tests that drive Herald's worker
 * processes from outside: what was sent, what was asked, and faults to inject.
 */
import type { FastifyInstance } from 'fastify';
import type { SandboxControls } from './server.js';

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

  app.post('/__sandbox/reset', async (_request, reply) => {
    controls.reset();
    return reply.code(204).send();
  });
}
