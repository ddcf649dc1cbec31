import { sha256 } from '../digest.js';
import type { FastifyReply } from 'fastify';

/** Markup that is already safe: the result of `markup` or `styleBlock`. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes a value for HTML text and quoted attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

function interpolate(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(interpolate).join('');
  if (value === undefined || value === null) return '';
  return escapeHtml(value);
}

/**
 * The one way admin pages write HTML: every interpolated value is escaped unless it is itself
 * `Html` (a nested `markup` template), so a value from the log or the archive cannot become markup.
 */
export function markup(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += interpolate(value) + strings[i + 1]!;
  });
  return new Html(out);
}

/**
 * A page's `<style>` block, written whole from a constant so that its text is exactly what
 * `pagePolicy` hashed.
 */
export const styleBlock = (css: string): Html => new Html(`<style>${css}</style>`);

/** The CSP source of an inline `<style>` block, so pages need no `'unsafe-inline'`. */
export const styleHash = (css: string): string => `'sha256-${sha256(css).toString('base64')}'`;

/**
 * The Content-Security-Policy of a page Herald renders itself: no scripts at all, only its own
 * hashed style block, forms posting to Herald only, never in a frame.
 */
export function pagePolicy(css: string): string {
  return `default-src 'none'; style-src ${styleHash(css)}; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`;
}

/** Sends a page Herald renders, with its own strict CSP (the admin scope adds the other headers). */
export function sendPage(reply: FastifyReply, page: Html, css: string, status = 200): FastifyReply {
  return reply.status(status).header('content-security-policy', pagePolicy(css)).type('text/html; charset=utf-8').send(page.value);
}
