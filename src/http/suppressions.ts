import { Type, type Static } from 'typebox';
import type { FastifyInstance } from 'fastify';
import { iso } from '../clock.js';
import type { AppDeps } from './deps.js';
import { normalizeEmail, normalizePhone, RejectedRequest } from '../notice/accept.js';
import { SuppressionListFullError } from '../store/suppressions.js';
import type { Channel } from '../providers/types.js';
import { HttpError } from './errors.js';
import { ErrorResponse } from './schemas.js';

export const SuppressionBody = Type.Object(
  {
    channel: Type.Union([Type.Literal('email'), Type.Literal('sms')]),
    address: Type.String({ minLength: 3, maxLength: 254 }),
    reason: Type.String({ minLength: 1, maxLength: 200 }),
  },
  { additionalProperties: false },
);
const SuppressionParams = Type.Object({
  channel: Type.Union([Type.Literal('email'), Type.Literal('sms')]),
  address: Type.String({ maxLength: 254 }),
});
export const SuppressionResponse = Type.Object({
  channel: Type.String(),
  address: Type.String(),
  reason: Type.String(),
  source: Type.String({
    description:
      'manual, postmark_hard_bounce, postmark_inactive, postmark_unsubscribe, twilio_opt_out, sendgrid_hard_bounce, sendgrid_dropped, sendgrid_unsubscribe, ses_hard_bounce, ses_complaint, mailgun_bounce, mailgun_suppressed, aws_sms_opt_out or infrai_suppressed',
  }),
  noticeId: Type.Optional(Type.String()),
  createdAt: Type.String({ format: 'date-time' }),
});

const secured = { tags: ['suppressions'], security: [{ apiKey: [] }] };
const errors = { 400: ErrorResponse, 401: ErrorResponse, 404: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse, 507: ErrorResponse };

/** Addresses as the list keeps them: email lower-case, phone E.164. */
function normalize(channel: Channel, address: string): string {
  if (channel === 'email') {
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(address))
      throw new HttpError('validation_failed', 'address is not an email address', [{ path: 'address', message: 'not an email address' }]);
    return normalizeEmail(address);
  }
  try {
    return normalizePhone(address);
  } catch (error) {
    if (error instanceof RejectedRequest)
      throw new HttpError('validation_failed', error.message, [{ path: 'address', message: error.message }]);
    throw error;
  }
}

/** `/v1/suppressions`: the per-channel suppression list (manual entries; providers add their own). */
export async function suppressionRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { suppressions } = deps;

  app.post<{ Body: Static<typeof SuppressionBody> }>(
    '/v1/suppressions',
    {
      schema: {
        ...secured,
        summary: 'Suppress an address on one channel',
        body: SuppressionBody,
        response: { 201: SuppressionResponse, ...errors },
      },
    },
    async (request, reply) => {
      const { channel, reason } = request.body;
      const address = normalize(channel, request.body.address);
      const record = { channel, address, reason, source: 'manual' as const, createdAt: iso(deps.clock.now()) };
      try {
        await suppressions.add(record);
      } catch (error) {
        if (!(error instanceof SuppressionListFullError)) throw error;
        throw new HttpError(
          'suppression_list_full',
          `The ${channel} suppression list holds ${error.max} addresses (HERALD_SUPPRESSIONS_MAX); lift some or raise the bound.`,
          { channel, max: error.max },
        );
      }
      return reply.status(201).send(record);
    },
  );

  app.get<{ Params: Static<typeof SuppressionParams> }>(
    '/v1/suppressions/:channel/:address',
    {
      schema: {
        ...secured,
        summary: 'Look up a suppression',
        params: SuppressionParams,
        response: { 200: SuppressionResponse, ...errors },
      },
    },
    async (request) => {
      const address = normalize(request.params.channel, request.params.address);
      const record = await suppressions.get(request.params.channel, address);
      if (!record) throw new HttpError('not_found', 'That address is not suppressed on that channel.');
      return record;
    },
  );

  app.delete<{ Params: Static<typeof SuppressionParams> }>(
    '/v1/suppressions/:channel/:address',
    { schema: { ...secured, summary: 'Lift a suppression', params: SuppressionParams, response: { ...errors } } },
    async (request, reply) => {
      const address = normalize(request.params.channel, request.params.address);
      if (!(await suppressions.remove(request.params.channel, address)))
        throw new HttpError('not_found', 'That address is not suppressed on that channel.');
      return reply.status(204).send();
    },
  );
}
