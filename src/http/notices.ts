import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { iso } from '../clock.js';
import { accept, acceptBatch, acceptSettings, DEFAULT_TENANT, RejectedRequest, type AcceptDeps } from '../notice/accept.js';
import { storeUnreachable } from '../store/redis.js';
import { searchDeps, searchNotices } from '../notice/search.js';
import { noticeQueryOf } from './notices-list.js';
import { cancelNotice } from '../notice/cancel.js';
import { readNotice } from '../notice/notice.js';
import { noticeView } from '../notice/view.js';
import { shardOfNoticeId } from '../notice/ids.js';
import type { AppDeps } from './deps.js';
import { errorBody, HttpError } from './errors.js';
import { fromArchive } from './archive-reads.js';
import {
  AcceptedResponse,
  BatchNoticeItem,
  BatchNoticesBody,
  BatchNoticesResponse,
  CreateNoticeBody,
  ErrorResponse,
  EventsResponse,
  NoticeListQuery,
  NoticeListResponse,
  NoticeParams,
  NoticeViewSchema,
} from './schemas.js';

const errors = { 400: ErrorResponse, 401: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse, 429: ErrorResponse, 503: ErrorResponse };
const secured = { tags: ['notices'], security: [{ apiKey: [] }] };

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** `/v1/notices`: create, read, read the decision log, cancel. */
export async function noticeRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { store, policies, suppressions, scheduler, trails, clock, config } = deps;
  const accepting: AcceptDeps = { store, policies, suppressions, scheduler, clock, settings: acceptSettings(config) };

  /** The notice's view, from Redis or, once it is retired, from the archive; another tenant's is not found. */
  const load = async (id: string, log: FastifyBaseLogger, tenant: string) => {
    const view = await fromArchive(() => trails.view(id), log, 'This notice');
    // A view of before tenants names none: the default tenant's.
    if (!view || ((view as { tenant?: string }).tenant ?? DEFAULT_TENANT) !== tenant) throw new HttpError('not_found', `No notice ${id}.`);
    return view;
  };
  // The API rate limit (src/app.ts) of the two routes that accept notices is taken by the route
  // itself, with the acceptance's reads: one round trip for both, where the plugin's hook would
  // take it in a round trip of its own before them. A refusal (429) stores nothing. Only a body
  // that parses and passes its schema gets so far: a malformed one is refused (400) first.
  const limit = app.hasDecorator('rateLimit') ? app.rateLimit() : undefined;
  const admission = (request: FastifyRequest, reply: FastifyReply) => (limit ? () => limit.call(app, request, reply) : undefined);
  const notCancelable = (state: string) =>
    new HttpError('invalid_state', `The notice is ${state}; only a notice not yet handed to a provider can be canceled.`, { state });

  app.post<{ Body: CreateNoticeBody }>(
    '/v1/notices',
    {
      config: { rateLimit: false },
      schema: {
        ...secured,
        summary: 'Accept a notice',
        description:
          'Stores the notice and its first log entries, plans the status checks from the deadline backwards and queues the email. With an Idempotency-Key, the same body returns the original notice (200, Idempotent-Replayed: true) and a different body 409 idempotency_key_reused.',
        headers: { type: 'object', properties: { 'idempotency-key': { type: 'string', maxLength: 255 } } },
        body: CreateNoticeBody,
        response: { 202: AcceptedResponse, 200: NoticeViewSchema, 413: ErrorResponse, 415: ErrorResponse, ...errors },
      },
    },
    async (request, reply) => {
      const idempotencyKey = request.headers['idempotency-key'];
      if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY.test(idempotencyKey))) {
        throw new HttpError('validation_failed', 'Idempotency-Key must be 1 to 255 printable ASCII characters.');
      }
      let result;
      try {
        result = await accept(
          accepting,
          request.body,
          { apiKeyId: request.apiKeyId, tenant: request.tenant, idempotencyKey },
          request.log,
          admission(request, reply),
        );
      } catch (error) {
        if (error instanceof RejectedRequest) {
          throw new HttpError('validation_failed', error.message, [{ path: `body.${error.field}`, message: error.message }]);
        }
        throw error;
      }
      if (result.kind === 'conflict') {
        throw new HttpError('idempotency_key_reused', undefined, { noticeId: result.id });
      }
      if (result.kind === 'replayed') {
        return reply
          .status(200)
          .header('Idempotent-Replayed', 'true')
          .send(await load(result.id, request.log, request.tenant));
      }
      return reply.status(202).send({
        id: result.id,
        state: 'accepted',
        deadline: iso(result.deadline),
        plannedChecks: result.plannedChecks.map(iso),
      });
    },
  );

  app.post<{ Body: BatchNoticesBody }>(
    '/v1/notices/batch',
    {
      config: { rateLimit: false },
      bodyLimit: config.batch.bodyLimit,
      schema: {
        ...secured,
        summary: 'Accept many notices at once',
        description:
          'Each notice is accepted or refused on its own, exactly as POST /v1/notices would accept or refuse it alone (its idempotencyKey included), and its result comes in the order given: status 202 accepted, 200 an idempotent replay, or the error status with its error. At most HERALD_BATCH_MAX notices; the body at most HERALD_BATCH_BODY_LIMIT bytes.',
        body: BatchNoticesBody,
        response: { 200: BatchNoticesResponse, 413: ErrorResponse, 415: ErrorResponse, ...errors },
      },
    },
    async (request, reply) => {
      const items = request.body.notices;
      if (items.length > config.batch.max) {
        throw new HttpError(
          'validation_failed',
          `A batch holds at most ${config.batch.max} notices (HERALD_BATCH_MAX); this one has ${items.length}.`,
          [{ path: 'body.notices', message: `must have at most ${config.batch.max} items` }],
        );
      }
      const validate = request.compileValidationSchema(BatchNoticeItem, 'body');
      const results: Record<string, unknown>[] = new Array(items.length);
      const valid: { index: number; request: CreateNoticeBody; idempotencyKey?: string }[] = [];
      items.forEach((item, index) => {
        if (validate(item)) {
          const { idempotencyKey, ...body } = item as CreateNoticeBody & { idempotencyKey?: string };
          valid.push(idempotencyKey === undefined ? { index, request: body } : { index, request: body, idempotencyKey });
          return;
        }
        const details = (validate.errors ?? []).map((v) => ({
          path: `body.notices.${index}${v.instancePath.replace(/\//g, '.')}`,
          message: v.message,
          ...(v.params && Object.keys(v.params).length > 0 ? { params: v.params } : {}),
        }));
        results[index] = { index, status: 400, error: errorBody('validation_failed', 'The notice is not valid.', details).error };
      });
      const accepted = await acceptBatch(
        accepting,
        valid,
        { apiKeyId: request.apiKeyId, tenant: request.tenant },
        request.log,
        admission(request, reply),
      );
      const replayed: { index: number; id: string }[] = [];
      accepted.forEach((outcome, i) => {
        const index = valid[i]!.index;
        if ('rejected' in outcome) {
          const message = outcome.rejected.message;
          results[index] = {
            index,
            status: 400,
            error: errorBody('validation_failed', message, [{ path: `body.notices.${index}.${outcome.rejected.field}`, message }]).error,
          };
        } else if ('failed' in outcome) {
          if (!storeUnreachable(deps.redis, outcome.failed)) throw outcome.failed;
          results[index] = { index, status: 503, error: errorBody('unavailable').error };
        } else if (outcome.result.kind === 'conflict') {
          results[index] = {
            index,
            status: 409,
            id: outcome.result.id,
            error: errorBody('idempotency_key_reused', undefined, { noticeId: outcome.result.id }).error,
          };
        } else if (outcome.result.kind === 'replayed') {
          replayed.push({ index, id: outcome.result.id });
        } else {
          const r = outcome.result;
          results[index] = {
            index,
            status: 202,
            id: r.id,
            state: 'accepted',
            deadline: iso(r.deadline),
            plannedChecks: r.plannedChecks.map(iso),
          };
        }
      });
      if (replayed.length > 0) {
        // A replay answers with the notice as it is now, as a single replay does.
        const states = await store.statesOf(replayed.map((r) => r.id));
        await Promise.all(
          replayed.map(async ({ index, id }, i) => {
            const state = states[i] ?? (await trails.view(id).catch(() => null))?.state;
            results[index] = { index, status: 200, id, ...(state ? { state } : {}) };
          }),
        );
      }
      return { results };
    },
  );

  app.get<{ Querystring: NoticeListQuery }>(
    '/v1/notices',
    {
      schema: {
        ...secured,
        summary: 'Notices, newest first, filtered, a page at a time',
        description:
          'The query of /admin/notices: state, fallback reason, category, recipient, creation time [from, to), the late or in_doubt view. A page looks at up to 2000 notices; nextCursor (null at the end) continues below the last one looked at, whatever the filters dropped, so a page may hold fewer than limit notices while more follow.',
        querystring: NoticeListQuery,
        response: { 200: NoticeListResponse, ...errors },
      },
    },
    async (request) => {
      const query = noticeQueryOf(request.query);
      const page = await fromArchive(
        () =>
          searchNotices(
            searchDeps(config, { index: deps.noticeIndex, archive: deps.archive, now: clock.now() }),
            // A key lists its own tenant's notices only.
            { ...query.filters, tenant: request.tenant },
            { cursor: query.cursor, limit: query.limit },
          ),
        request.log,
        'Retired notices',
      );
      const views = await Promise.all(page.notices.map((row) => fromArchive(() => trails.view(row.id), request.log, 'This notice')));
      return { notices: views.filter((v) => v !== null), nextCursor: page.next };
    },
  );

  app.get<{ Params: NoticeParams }>(
    '/v1/notices/:id',
    {
      schema: { ...secured, summary: 'The current view of a notice', params: NoticeParams, response: { 200: NoticeViewSchema, ...errors } },
    },
    async (request) => load(request.params.id, request.log, request.tenant),
  );

  app.get<{ Params: NoticeParams }>(
    '/v1/notices/:id/events',
    {
      schema: {
        ...secured,
        summary: 'The decision log of a notice, in order',
        description:
          'The complete trail, whether its entries are still in Redis, only in the audit archive, or split between both; entries older than HERALD_AUDIT_RETENTION may be gone.',
        params: NoticeParams,
        response: { 200: EventsResponse, ...errors },
      },
    },
    async (request) => {
      await load(request.params.id, request.log, request.tenant);
      return { events: (await fromArchive(() => trails.read(request.params.id), request.log, 'Part of this trail')).entries };
    },
  );

  app.post<{ Params: NoticeParams }>(
    '/v1/notices/:id/cancel',
    {
      schema: {
        ...secured,
        summary: 'Cancel a notice not yet handed to any provider',
        params: NoticeParams,
        response: { 200: NoticeViewSchema, ...errors },
      },
    },
    async (request) => {
      const id = request.params.id;
      const notice = shardOfNoticeId(id) === undefined ? null : await readNotice(store, id);
      if (notice && notice.tenant !== request.tenant) throw new HttpError('not_found', `No notice ${id}.`);
      if (!notice) {
        // Only a finished notice leaves Redis: a retired one can no longer be canceled.
        throw notCancelable((await load(id, request.log, request.tenant)).state);
      }
      const result = await cancelNotice({ store, scheduler, clock, log: request.log }, notice.id);
      if (!result?.canceled) throw notCancelable(result?.state ?? notice.state);
      return noticeView((await readNotice(store, notice.id))!);
    },
  );
}
