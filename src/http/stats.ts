import { Type, type Static } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { AppDeps } from './deps.js';
import { DAY } from '../clock.js';
import { formatDuration } from '../durations.js';
import { noticeStats, STATS_HOUR_MS } from '../notice/stats.js';
import { HttpError } from './errors.js';
import { ErrorResponse } from './schemas.js';

const StatsQuery = Type.Object(
  { from: Type.Optional(Type.String({ format: 'date-time' })), to: Type.Optional(Type.String({ format: 'date-time' })) },
  { additionalProperties: false },
);
const Spend = Type.Object({
  currency: Type.String(),
  total: Type.Number(),
  byChannel: Type.Object({ email: Type.Number(), sms: Type.Number() }),
});
export const StatsResponse = Type.Object({
  from: Type.String(),
  to: Type.String(),
  window: Type.Object(
    { from: Type.String({ format: 'date-time' }), to: Type.String({ format: 'date-time' }) },
    {
      description:
        'The UTC hours counted: every hour that overlaps [from, to), at least one. Notices are counted by the hour they were created in.',
    },
  ),
  notices: Type.Integer(),
  byState: Type.Record(Type.String(), Type.Integer()),
  fallbackByReason: Type.Record(Type.String(), Type.Integer()),
  fallbackRate: Type.Number({ minimum: 0, maximum: 1 }),
  checksPerNotice: Type.Number(),
  estimatedSpend: Spend,
});

const MAX_SPAN = 31 * DAY;

/** `GET /v1/stats?from=&to=`: outcomes, fallback rate, checks per notice and spend of a period. */
export async function statsRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get<{ Querystring: Static<typeof StatsQuery> }>(
    '/v1/stats',
    {
      schema: {
        tags: ['notices'],
        security: [{ apiKey: [] }],
        summary:
          'Counts of the notices created in the UTC hours overlapping a period (default: the last 24 hours, at most 31 days, within HERALD_STATS_RETENTION)',
        querystring: StatsQuery,
        response: { 200: StatsResponse, 400: ErrorResponse, 401: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse },
      },
    },
    async (request) => {
      const now = deps.clock.now();
      const to = request.query.to ? Date.parse(request.query.to) : now;
      // By default the 24 hour buckets that end with the one holding `to`.
      const from = request.query.from ? Date.parse(request.query.from) : Math.ceil(to / STATS_HOUR_MS) * STATS_HOUR_MS - DAY;
      if (!(from <= to))
        throw new HttpError('validation_failed', '"from" must not be after "to"', [{ path: 'querystring.from', message: 'after "to"' }]);
      if (to - from > MAX_SPAN)
        throw new HttpError('validation_failed', 'the period may span at most 31 days', [
          { path: 'querystring', message: 'period too long' },
        ]);
      if (from < now - deps.config.statsRetentionMs)
        throw new HttpError(
          'validation_failed',
          `stats reach back ${formatDuration(deps.config.statsRetentionMs)} (HERALD_STATS_RETENTION); older periods are in the decision log (herald export)`,
          [{ path: 'querystring.from', message: 'before the stats retention' }],
        );
      return noticeStats(deps.redis, deps.store.keys, deps.config.prices, from, to, [request.tenant]);
    },
  );
}
