import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Every error the API answers with: a stable snake_case code, its HTTP status and what it
 * means. Answers are `{ "error": { "code", "message", "details"? } }`. test/pure/errors.test.ts
 * fails when a code is missing from the table of docs/API.md.
 */
export const ERROR_CATALOGUE = {
  unauthorized: { status: 401, message: 'Missing or unknown API key.' },
  forbidden: { status: 403, message: 'Not allowed.' },
  cross_site_request: { status: 403, message: 'A state-changing admin request came from another site.' },
  validation_failed: { status: 400, message: 'The request is not valid.' },
  not_found: { status: 404, message: 'No such resource.' },
  payload_too_large: { status: 413, message: 'The request body is larger than the limit.' },
  request_timeout: { status: 408, message: 'The request did not arrive in time.' },
  uri_too_long: { status: 414, message: 'The request URL is longer than Herald accepts.' },
  unsupported_media_type: { status: 415, message: 'Send the body as application/json.' },
  idempotency_key_reused: { status: 409, message: 'This Idempotency-Key was used with a different body.' },
  invalid_state: { status: 409, message: 'The notice is not in a state that allows this.' },
  rate_limited: { status: 429, message: 'Too many requests; retry later.' },
  headers_too_large: { status: 431, message: 'The request headers are larger than Herald accepts.' },
  suppression_list_full: { status: 507, message: 'The suppression list of that channel is full (HERALD_SUPPRESSIONS_MAX).' },
  unavailable: { status: 503, message: 'Herald cannot reach its store; retry later.' },
  internal_error: { status: 500, message: 'Something went wrong inside Herald.' },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** An error that becomes a catalogued JSON answer. */
export class HttpError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly details?: unknown,
  ) {
    super(message ?? ERROR_CATALOGUE[code].message);
    this.name = 'HttpError';
    this.status = ERROR_CATALOGUE[code].status;
  }
}

export function errorBody(code: ErrorCode, message?: string, details?: unknown) {
  return { error: { code, message: message ?? ERROR_CATALOGUE[code].message, ...(details === undefined ? {} : { details }) } };
}

/** Maps Fastify's own errors (body limit, bad JSON, schema validation) into the catalogue. */
function classify(error: FastifyError | HttpError, storeReady: (error: unknown) => boolean): HttpError {
  if (error instanceof HttpError) return error;
  if (error.validation) {
    const details = error.validation.map((v) => ({
      path: `${error.validationContext ?? 'body'}${v.instancePath.replace(/\//g, '.')}`,
      message: v.message,
      ...(v.params && Object.keys(v.params).length > 0 ? { params: v.params } : {}),
    }));
    return new HttpError('validation_failed', `The ${error.validationContext ?? 'request'} is not valid.`, details);
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new HttpError('payload_too_large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new HttpError('unsupported_media_type');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new HttpError('validation_failed', 'The body is not valid JSON.');
  }
  if (error instanceof SyntaxError) return new HttpError('validation_failed', 'The body is not valid JSON.');
  if (typeof error.statusCode === 'number' && error.statusCode === 429) return new HttpError('rate_limited', error.message);
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return new HttpError('validation_failed', error.message);
  }
  if (!storeReady(error)) return new HttpError('unavailable');
  return new HttpError('internal_error');
}

/** Fastify error handler: catalogued JSON for everything, 5xx logged with their cause. */
export function errorHandler(storeReady: (error: unknown) => boolean) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const mapped = classify(error, storeReady);
    if (mapped.status >= 500) request.log.error({ err: error }, mapped.message);
    return reply.status(mapped.status).send(errorBody(mapped.code, mapped.message, mapped.details));
  };
}

/** Longest request URL (path and query) Herald reads; the longest real one is a suppressed address, ~800. */
export const MAX_URL_LENGTH = 2048;

/** A path for an error message: never the whole of an over-long one. */
export const quotedPath = (url: string): string => {
  const path = url.split('?')[0]!;
  return path.length > 100 ? `${path.slice(0, 100)}…` : path;
};

/**
 * Errors Fastify raises while routing, before any hook or handler runs (Fastify's
 * `frameworkErrors`): a path that is not valid percent-encoding, a parameter over the router's
 * length limit.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const mapped =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new HttpError('uri_too_long')
      : error.code === 'FST_ERR_BAD_URL'
        ? new HttpError('validation_failed', 'The URL is not valid percent-encoded UTF-8.')
        : new HttpError('validation_failed', 'The request cannot be routed.');
  request.log.debug({ code: error.code }, 'request refused before routing');
  void reply.status(mapped.status).send(errorBody(mapped.code, mapped.message));
}

/** Refuses an over-long URL before anything reads it (a root `onRequest` hook: it answers, never throws). */
export async function urlGuard(request: FastifyRequest, reply: FastifyReply) {
  if (request.url.length > MAX_URL_LENGTH) {
    return reply.status(414).send(errorBody('uri_too_long', `The URL is longer than ${MAX_URL_LENGTH} characters.`));
  }
}

/**
 * Requests Node's HTTP parser rejects before Fastify sees them (headers over Node's limit, a
 * malformed request line): Herald's JSON error on the raw socket, then the connection closes.
 */
export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, body] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', errorBody('headers_too_large')]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', errorBody('request_timeout')]
        : [400, 'Bad Request', errorBody('validation_failed', 'The request is not valid HTTP.')];
  const text = JSON.stringify(body);
  if (!socket.writable) {
    socket.destroy(error);
    return;
  }
  // The answer, then a half-close; what the client still sends is read and dropped. Destroying
  // the socket with unread bytes in it makes the kernel reset the connection, and a reset may
  // reach the client before the answer does (Node 24's parser stops earlier in a bad body).
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Length: ${Buffer.byteLength(text)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${text}`,
  );
  socket.on('data', () => undefined);
  socket.resume();
  setTimeout(() => socket.destroy(), 2000).unref();
}
