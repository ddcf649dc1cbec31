/**
 * Every failure of a call is a `HeraldApiError`: an answer of Herald's that is not a success, an
 * answer that is not Herald's (`HeraldResponseError`), no answer at all, an aborted call, and a
 * `waitFor` that ran out of time (`HeraldTimeoutError`).
 */
import type { NoticeView } from './types.js';

/**
 * Codes the client gives failures that carry no code of the API's: no answer (`network_error`),
 * no answer in time (`timeout`), the caller's signal (`aborted`); a body that is not Herald's
 * JSON is `http_<status>`.
 */
export type ClientErrorCode = 'network_error' | 'timeout' | 'aborted' | `http_${number}`;

/** What a `HeraldApiError` is made of. */
export interface HeraldApiErrorInit {
  status: number;
  code: string;
  message: string;
  details?: unknown;
  retryAfterSeconds?: number;
  attempts?: number;
  cause?: unknown;
}

/**
 * A call that failed. `status` is the HTTP status, 0 when no answer came; `code` is the API's
 * stable error code (`validation_failed`, `not_found`, `rate_limited`, …) or a `ClientErrorCode`.
 */
export class HeraldApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: unknown;
  /** Seconds the answer asked to wait before another try (429, 503), when it said. */
  readonly retryAfterSeconds: number | undefined;
  /** Requests sent for the call, retries included. */
  readonly attempts: number;

  constructor(init: HeraldApiErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'HeraldApiError';
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.attempts = init.attempts ?? 1;
  }
}

/** Longest part of an unexpected body a `HeraldResponseError` carries. */
const SNIPPET_CHARS = 200;

/**
 * An answer that is not Herald's JSON: a body that does not parse (a proxy's HTML 502, a captive
 * portal), or a redirect, which the client does not follow so that the key stays with `baseUrl`.
 * Its `code` is `http_<status>`; `snippet` is the start of the body, whitespace folded; `location`
 * is where a redirect pointed.
 */
export class HeraldResponseError extends HeraldApiError {
  readonly snippet: string;
  readonly location: string | undefined;

  constructor(
    status: number,
    body: string,
    opts: { location?: string | undefined; redirect?: boolean; retryAfterSeconds?: number; attempts?: number } = {},
  ) {
    const folded = body.replace(/\s+/g, ' ').trim();
    const snippet = folded.length > SNIPPET_CHARS ? `${folded.slice(0, SNIPPET_CHARS)}…` : folded;
    const what = opts.redirect
      ? `a redirect${opts.location ? ` to ${opts.location}` : ''}, which the client does not follow: set baseUrl to where Herald answers`
      : `a body that is not JSON: ${snippet || '(empty)'}`;
    super({
      status,
      code: `http_${status}`,
      message: `Herald's address answered ${status} with ${what}`,
      retryAfterSeconds: opts.retryAfterSeconds,
      attempts: opts.attempts,
    });
    this.name = 'HeraldResponseError';
    this.snippet = snippet;
    this.location = opts.location;
  }
}

/** `waitFor` ran out of time (code `timeout`, status 0); `last` is the notice as last read. */
export class HeraldTimeoutError extends HeraldApiError {
  readonly last: NoticeView;

  constructor(last: NoticeView) {
    super({ status: 0, code: 'timeout', message: `notice ${last.id} is still ${last.state}` });
    this.name = 'HeraldTimeoutError';
    this.last = last;
  }
}
