import formbody from '@fastify/formbody';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../app.js';
import { ADMIN_COOKIE, adminGate, sameSecret, sessionValue } from './admin-auth.js';
import { HttpError } from './errors.js';
import { renderTimeline } from './timeline.js';
import { trailReader } from '../archive/trail.js';

const loginPage = (next: string, failed: boolean) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Herald admin — log in</title>
<style>body{font:14px system-ui,sans-serif;margin:15vh auto;max-width:320px}input,button{font:inherit;padding:6px;width:100%;margin-top:8px;box-sizing:border-box}.error{color:#cf222e}</style></head>
<body><h1>Herald admin</h1>${failed ? '<p class="error">Wrong token.</p>' : ''}
<form method="post" action="/admin/login"><label>Admin token<input type="password" name="token" autofocus required></label>
<input type="hidden" name="next" value="${next.replace(/[&<>"']/g, '')}"><button type="submit">Log in</button></form></body></html>`;

/** Only local admin paths may be redirected to after logging in. */
const safeNext = (next: unknown) =>
  typeof next === 'string' && /^\/admin\/[^/\\]/.test(next) && !next.includes('//') ? next : '/admin/queues';

/**
 * `/admin/*`: Bull Board at /admin/queues, the audit timeline at /admin/notices/:id and the
 * login form, all behind HERALD_ADMIN_TOKEN (bearer, basic auth, or the login cookie).
 */
export async function adminRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await app.register(formbody);
  app.addHook('onRequest', adminGate(deps.config.adminToken));

  app.get<{ Querystring: { next?: string } }>('/admin/login', { schema: { hide: true } }, async (request, reply) =>
    reply.type('text/html').send(loginPage(safeNext(request.query.next), false)),
  );
  app.post<{ Body: { token?: string; next?: string } }>('/admin/login', { schema: { hide: true } }, async (request, reply) => {
    const token = deps.config.adminToken;
    const next = safeNext(request.body?.next);
    if (!token || typeof request.body?.token !== 'string' || !sameSecret(request.body.token, token)) {
      return reply.status(403).type('text/html').send(loginPage(next, true));
    }
    const secure = request.protocol === 'https' ? '; Secure' : '';
    reply.header('set-cookie', `${ADMIN_COOKIE}=${sessionValue(token)}; Path=/admin; HttpOnly; SameSite=Strict${secure}`);
    return reply.redirect(next, 303);
  });

  // The timeline reads the whole trail, from the archive where the log mirror trimmed Redis.
  const trails = trailReader({ store: deps.store, redis: deps.redis, config: deps.config, clock: deps.clock });
  app.addHook('onClose', async () => trails.close());
  app.get<{ Params: { id: string } }>('/admin/notices/:id', { schema: { hide: true } }, async (request, reply) => {
    const id = request.params.id;
    const view = await trails.view(id);
    if (!view) throw new HttpError('not_found', `No notice ${id}.`);
    const trail = await trails.read(id);
    return reply.type('text/html').send(renderTimeline(view, trail.entries));
  });

  const board = new FastifyAdapter();
  board.setBasePath('/admin/queues');
  createBullBoard({
    queues: Object.values(deps.queues).map((queue) => new BullMQAdapter(queue, { readOnlyMode: deps.config.adminReadOnly })),
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'Herald queues' } },
  });
  await app.register(board.registerPlugin(), { prefix: '/admin/queues' });
}
