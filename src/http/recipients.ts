import type { FastifyInstance } from 'fastify';
import { iso } from '../clock.js';
import type { AppDeps } from './deps.js';
import { ErrorResponse, PolicyVersionResponse, RecipientPolicyResponse, RecipientParams, RecipientPolicyBody } from './schemas.js';

const secured = { tags: ['recipients'], security: [{ apiKey: [] }] };
const errors = { 400: ErrorResponse, 401: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };

/** `/v1/recipients/:id/policy`: versioned consent and region of a recipient. */
export async function recipientRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.put<{ Params: RecipientParams; Body: RecipientPolicyBody }>(
    '/v1/recipients/:id/policy',
    {
      schema: {
        ...secured,
        summary: 'Write a new version of a recipient policy',
        params: RecipientParams,
        body: RecipientPolicyBody,
        response: { 200: PolicyVersionResponse, ...errors },
      },
    },
    async (request) => {
      const version = await deps.policies.put(request.params.id, request.body, iso(deps.clock.now()), request.tenant);
      return { version };
    },
  );

  app.get<{ Params: RecipientParams }>(
    '/v1/recipients/:id/policy',
    {
      schema: {
        ...secured,
        summary: 'The current policy of a recipient (version 0: none written, both channels allowed)',
        params: RecipientParams,
        response: { 200: RecipientPolicyResponse, ...errors },
      },
    },
    async (request) => deps.policies.get(request.params.id, request.tenant),
  );
}
