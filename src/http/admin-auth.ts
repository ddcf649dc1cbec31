import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorBody } from './errors.js';

export const ADMIN_COOKIE = 'herald_admin';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** The cookie value a browser gets after logging in: a MAC of the token, never the token itself. */
export function sessionValue(token: string): string {
  return createHmac('sha256', token).update('herald-admin-session-v1').digest('base64url');
}

function parseCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = {};
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0) cookies[part.slice(0, at).trim()] = decodeURIComponent(part.slice(at + 1).trim());
  }
  return cookies;
}

/** What the request presented: a bearer token, basic-auth password or the session cookie. */
function presented(request: FastifyRequest): { kind: 'token' | 'session'; value: string } | undefined {
  const header = request.headers.authorization ?? '';
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) return { kind: 'token', value: bearer[1]! };
  const basic = /^Basic\s+(\S+)\s*$/i.exec(header);
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return { kind: 'token', value: colon >= 0 ? decoded.slice(colon + 1) : decoded };
  }
  const cookie = parseCookies(request.headers.cookie)[ADMIN_COOKIE];
  if (cookie) return { kind: 'session', value: cookie };
  return undefined;
}

/** Compares in constant time (over digests, so lengths leak nothing either). */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * The admin gate for Bull Board, the timeline page and other admin routes: closed (403) when
 * no HERALD_ADMIN_TOKEN is set; 401 without credentials (browsers are sent to the login form);
 * 403 with wrong ones.
 */
export function adminGate(token: string | undefined) {
  const session = token === undefined ? undefined : sessionValue(token);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0]!;
    if (path === '/admin/login') return;
    if (token === undefined || session === undefined) {
      return reply.status(403).send(errorBody('forbidden', 'Admin routes are closed: set HERALD_ADMIN_TOKEN to open them.'));
    }
    const credential = presented(request);
    if (!credential) {
      if ((request.headers.accept ?? '').includes('text/html')) {
        return reply.redirect(`/admin/login?next=${encodeURIComponent(request.url)}`, 303);
      }
      return reply
        .status(401)
        .header('www-authenticate', 'Basic realm="Herald admin", charset="UTF-8"')
        .send(errorBody('unauthorized', 'Send the admin token as a bearer token, as the basic-auth password, or log in at /admin/login.'));
    }
    const ok = credential.kind === 'token' ? sameSecret(credential.value, token) : sameSecret(credential.value, session);
    if (!ok) return reply.status(403).send(errorBody('forbidden', 'Wrong admin credentials.'));
  };
}
