import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256 as digest } from '../digest.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RedisClient } from '../store/redis.js';
import { AdminSessionStore } from '../store/admin.js';
import type { Keys } from '../store/keys.js';
import { sendTooManyFailures, type AuthFailures } from './auth-failures.js';
import { errorBody } from './errors.js';

export const ADMIN_COOKIE = 'herald_admin';
/** A session ID as Herald issues it: 32 random bytes, base64url. Anything else is not one. */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

/** Compares in constant time (over digests, so lengths leak nothing either). */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * One cookie's value, as sent. Herald's cookie values are base64url and need no decoding, so a
 * malformed header (bad percent-encoding, no `=`, stray separators) only means "no such cookie".
 */
export function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * Browser logins: a random session ID per login in the cookie, and in Redis (by its SHA-256, so
 * a copy of Redis opens nothing) with the same TTL as the cookie's Max-Age. A session holds a MAC
 * of the admin token it was opened with, so changing HERALD_ADMIN_TOKEN ends every session.
 */
export class AdminSessions {
  private readonly tokenTag: string;
  private readonly store: AdminSessionStore;

  constructor(
    redis: RedisClient,
    keys: Keys,
    readonly ttlMs: number,
    token: string,
  ) {
    this.store = new AdminSessionStore(redis, keys);
    this.tokenTag = createHmac('sha256', token).update('herald-admin-session-v2').digest('base64url');
  }

  private key(id: string): string {
    return digest(id).toString('hex');
  }

  /** Opens a session and returns its ID (the cookie value). */
  async open(): Promise<string> {
    const id = randomBytes(32).toString('base64url');
    await this.store.put(this.key(id), this.tokenTag, this.ttlMs);
    return id;
  }

  async valid(id: string): Promise<boolean> {
    if (!SESSION_ID.test(id)) return false;
    const tag = await this.store.get(this.key(id));
    return tag !== null && sameSecret(tag, this.tokenTag);
  }

  async end(id: string): Promise<void> {
    if (SESSION_ID.test(id)) await this.store.delete(this.key(id));
  }

  /** The Set-Cookie of a new session: `Secure` when the browser reached Herald over TLS. */
  cookie(id: string, request: FastifyRequest): string {
    return `${ADMIN_COOKIE}=${id}; Path=/admin; Max-Age=${Math.floor(this.ttlMs / 1000)}; HttpOnly; SameSite=Strict${secure(request)}`;
  }

  /** The Set-Cookie that makes the browser drop the session cookie. */
  static clearCookie(request: FastifyRequest): string {
    return `${ADMIN_COOKIE}=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict${secure(request)}`;
  }
}

/** `request.protocol` is `https` only over TLS, or through a proxy HERALD_TRUST_PROXY trusts. */
const secure = (request: FastifyRequest) => (request.protocol === 'https' ? '; Secure' : '');

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
  const cookie = readCookie(request.headers.cookie, ADMIN_COOKIE);
  if (cookie) return { kind: 'session', value: cookie };
  return undefined;
}

/** Admin paths that handle their own credentials: the login form and the logout. */
const OPEN_PATHS = new Set(['/admin/login', '/admin/logout']);

/**
 * The admin gate for Bull Board, the timeline page and other admin routes: closed (403) when
 * no HERALD_ADMIN_TOKEN is set; 401 without credentials (browsers are sent to the login form;
 * no `WWW-Authenticate` challenge, so browsers never cache the token as basic-auth credentials);
 * 403 with a wrong token, counted as a failed authentication. An unknown or expired session
 * cookie counts as no credentials. Answers are sent here, never thrown: Bull Board's scope has
 * an error handler of its own.
 */
export function adminGate(opts: { token: string | undefined; sessions: AdminSessions | undefined; failures: AuthFailures }) {
  const { token, sessions, failures } = opts;
  return async (request: FastifyRequest, reply: FastifyReply) => {
    // By the route matched, not the raw URL, so no spelling of another path can pass as these.
    if (OPEN_PATHS.has(request.routeOptions.url ?? '')) return;
    if (token === undefined || sessions === undefined) {
      return reply.status(403).send(errorBody('forbidden', 'Admin routes are closed: set HERALD_ADMIN_TOKEN to open them.'));
    }
    const credential = presented(request);
    if (credential?.kind === 'token') {
      if (sameSecret(credential.value, token)) return;
      const blocked = await failures.fail(request.ip);
      if (blocked !== undefined) return sendTooManyFailures(reply, blocked);
      return reply.status(403).send(errorBody('forbidden', 'Wrong admin credentials.'));
    }
    if (credential?.kind === 'session') {
      let valid: boolean;
      try {
        valid = await sessions.valid(credential.value);
      } catch {
        return reply.status(503).send(errorBody('unavailable'));
      }
      if (valid) return;
      reply.header('set-cookie', AdminSessions.clearCookie(request));
    }
    if (request.method === 'GET' && (request.headers.accept ?? '').includes('text/html')) {
      return reply.redirect(`/admin/login?next=${encodeURIComponent(request.url)}`, 303);
    }
    return reply
      .status(401)
      .send(errorBody('unauthorized', 'Send the admin token as a bearer token, as the basic-auth password, or log in at /admin/login.'));
  };
}

/** `host[:port]` of a URL, lower-case and without the scheme's default port; undefined when none. */
function hostOf(url: string): string | undefined {
  try {
    return new URL(url).host || undefined;
  } catch {
    return undefined;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses a state-changing admin request that a browser sent from another site (the login, the
 * logout and Bull Board's API alike): `Sec-Fetch-Site` other than same-origin or none (typed by
 * the user), or an `Origin` whose host is not the one the request was sent to. Tools (curl, CI)
 * send neither header and pass.
 */
export async function crossSiteGuard(request: FastifyRequest, reply: FastifyReply) {
  if (SAFE_METHODS.has(request.method)) return;
  const site = request.headers['sec-fetch-site'];
  const origin = request.headers.origin;
  // Sec-Fetch-Site, where the browser sends it, is the browser's own verdict; Origin for older ones.
  const crossSite =
    site !== undefined
      ? site !== 'same-origin' && site !== 'none'
      : origin !== undefined && (hostOf(origin) === undefined || hostOf(origin) !== hostOf(`http://${request.host}`));
  if (crossSite) {
    return reply
      .status(403)
      .send(errorBody('cross_site_request', 'Admin changes must come from Herald’s own pages or from a tool, not from another site.'));
  }
}

/** Bull Board's pages: its own scripts and styles only (its bundle sets inline styles), never framed. */
const BOARD_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
  "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

/**
 * Headers of every admin answer: a strict CSP (pages Herald renders set a stricter one of their
 * own), no sniffing, no framing, no referrer to other sites, and no caching, except Bull Board's static assets.
 */
export async function adminHeaders(request: FastifyRequest, reply: FastifyReply, payload: unknown) {
  if (!reply.hasHeader('content-security-policy')) reply.header('content-security-policy', BOARD_POLICY);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('x-frame-options', 'DENY');
  reply.header('referrer-policy', 'same-origin');
  if (!request.url.startsWith('/admin/queues/static/')) reply.header('cache-control', 'no-store');
  return payload;
}
