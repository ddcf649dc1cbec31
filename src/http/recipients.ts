import type { FastifyInstance } from 'fastify';
import { iso } from '../clock.js';
import type { AppDeps } from '../app.js';
import { RecipientParams, RecipientPolicyBody } from './schemas.js';

/** `/v1/recipients/:id/policy`: versioned consent and region of a recipient. */
export async function recipientRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.put<{ Params: RecipientParams; Body: RecipientPolicyBody }>(
    '/v1/recipients/:id/policy',
    { schema: { params: RecipientParams, body: RecipientPolicyBody } },
    async (request) => {
      const version = await deps.policies.put(request.params.id, request.body, iso(deps.clock.now()));
      return { version };
    },
  );

  app.get<{ Params: RecipientParams }>('/v1/recipients/:id/policy', { schema: { params: RecipientParams } }, async (request) =>
    deps.policies.get(request.params.id),
  );
}
