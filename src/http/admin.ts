import formbody from '@fastify/formbody';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { AppDeps } from './deps.js';
import { ADMIN_COOKIE, AdminSessions, adminGate, adminHeaders, crossSiteGuard, readCookie, sameSecret } from './admin-auth.js';
import { sendTooManyFailures, type AuthFailures } from './auth-failures.js';
import { HttpError } from './errors.js';
import { markup, sendPage, styleBlock, type Html } from './html.js';
import { overviewRoutes } from './overview.js';
import { renderTimeline, TIMELINE_CSS } from './timeline.js';
import { fromArchive } from './archive-reads.js';
import { noticesListRoute } from './notices-list.js';
import { listQueues } from '../../queues/index.js';

const FORM_CSS =
  'body{font:14px system-ui,sans-serif;margin:15vh auto;max-width:320px}input,button{font:inherit;padding:6px;width:100%;margin-top:8px;box-sizing:border-box}.error{color:#cf222e}';

const formPage = (title: string, body: Html) => markup`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title>
${styleBlock(FORM_CSS)}</head>
<body><h1>Herald admin</h1>${body}</body></html>`;

const loginPage = (next: string, failed: boolean) =>
  formPage(
    'Herald admin — log in',
    markup`${failed ? markup`<p class="error">Wrong token.</p>` : ''}
<form method="post" action="/admin/login"><label>Admin token<input type="password" name="token" autocomplete="current-password" autofocus required></label>
<input type="hidden" name="next" value="${next}"><button type="submit">Log in</button></form>`,
  );

const logoutPage = () =>
  formPage('Herald admin — log out', markup`<form method="post" action="/admin/logout"><button type="submit">Log out</button></form>`);

/** Where a login lands when it was not sent from another admin page: the overview. */
export const ADMIN_HOME = '/admin';

/**
 * Only a local admin path may be redirected to after logging in: `/admin` itself or a path under
 * it, printable ASCII of a URL path and query only (no control characters, spaces or backslashes
 * that could split a header or turn into another host), no `//`. Anything else lands on the overview.
 */
export const safeNext = (next: unknown): string =>
  typeof next === 'string' && next.length <= 512 && /^\/admin(?:[/?][A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*)?$/.test(next) && !next.includes('//')
    ? next
    : ADMIN_HOME;

/**
 * `/admin/*`: the overview at /admin, Bull Board at /admin/queues, the notices list at /admin/notices, the audit timeline at /admin/notices/:id, the login
 * form and the logout, all behind HERALD_ADMIN_TOKEN (bearer, basic auth, or a login session),
 * refusing cross-site changes, with the security headers of `adminHeaders`.
 */
export async function adminRoutes(app: FastifyInstance, deps: AppDeps, failures: AuthFailures): Promise<void> {
  await app.register(formbody);
  const token = deps.config.adminToken;
  const sessions = token === undefined ? undefined : new AdminSessions(deps.redis, deps.store.keys, deps.config.adminSessionTtlMs, token);
  app.addHook('onRequest', crossSiteGuard);
  app.addHook('onRequest', adminGate({ token, sessions, failures }));
  app.addHook('onSend', adminHeaders);

  app.get<{ Querystring: { next?: string } }>('/admin/login', { schema: { hide: true } }, async (request, reply) =>
    sendPage(reply, loginPage(safeNext(request.query.next), false), FORM_CSS),
  );
  app.post<{ Body: { token?: unknown; next?: unknown } | undefined }>(
    '/admin/login',
    { schema: { hide: true } },
    async (request, reply) => {
      const next = safeNext(request.body?.next);
      const given = request.body?.token;
      if (!token || !sessions || typeof given !== 'string' || !sameSecret(given, token)) {
        const blocked = token && typeof given === 'string' ? await failures.fail(request.ip) : undefined;
        if (blocked !== undefined) return sendTooManyFailures(reply, blocked);
        return sendPage(reply, loginPage(next, true), FORM_CSS, 403);
      }
      const id = await sessions.open();
      reply.header('set-cookie', sessions.cookie(id, request));
      return reply.redirect(next, 303);
    },
  );
  app.get('/admin/logout', { schema: { hide: true } }, async (_request, reply) => sendPage(reply, logoutPage(), FORM_CSS));
  app.post('/admin/logout', { schema: { hide: true } }, async (request, reply) => {
    const id = readCookie(request.headers.cookie, ADMIN_COOKIE);
    if (id && sessions) await sessions.end(id);
    reply.header('set-cookie', AdminSessions.clearCookie(request));
    return (request.headers.accept ?? '').includes('text/html') ? reply.redirect('/admin/login', 303) : reply.status(204).send();
  });

  await overviewRoutes(app, deps);
  noticesListRoute(app, deps);

  // The timeline reads the whole trail, from the archive where the log mirror trimmed Redis.
  app.get<{ Params: { id: string } }>('/admin/notices/:id', { schema: { hide: true } }, async (request, reply) => {
    const id = request.params.id;
    const view = await fromArchive(() => deps.trails.view(id), request.log, 'This notice');
    if (!view) throw new HttpError('not_found', `No notice ${id}.`);
    const trail = await fromArchive(() => deps.trails.read(id), request.log, 'Part of this trail');
    return sendPage(reply, renderTimeline(view, trail.entries), TIMELINE_CSS);
  });

  const board = new FastifyAdapter();
  board.setBasePath('/admin/queues');
  createBullBoard({
    // Each partition of a notice queue is a queue of its own here, named `p<i>.<queue>`.
    queues: listQueues(deps.queues).map(
      ({ label, queue, description }) =>
        new BullMQAdapter(queue, {
          readOnlyMode: deps.config.adminReadOnly,
          ...(label === queue.name ? {} : { prefix: label.slice(0, label.length - queue.name.length) }),
          description,
        }),
    ),
    serverAdapter: board,
    // The board's menu links back to the overview (its logo and title lead to the board's own root).
    options: { uiConfig: { boardTitle: 'Herald queues', miscLinks: [{ text: 'Herald overview', url: ADMIN_HOME }] } },
  });
  await app.register(board.registerPlugin(), { prefix: '/admin/queues' });
}
