/**
 * Turns whatever a provider SDK throws into a ProviderError (the `kind` of a `provider.error` entry).
 *
 * The line that matters: `rejected` means "this message will never be accepted as it is" and
 * may trigger a fallback; everything that says nothing about the message (timeouts, outages,
 * rate limits, Herald's own credentials or account being wrong) is retryable.
 */
import { Errors as PostmarkErrors } from 'postmark';
import twilio from 'twilio';
import { parseRetryAfter, type HttpTrace } from './http-trace.js';
import { ProviderError, type ProviderErrorKind } from './types.js';

/** Postmark API error codes that blame Herald's account or configuration, not the message. */
const POSTMARK_ACCOUNT_CODES = new Set([
  10, // bad or missing server token
  400, // sender signature not found
  401, // sender signature not confirmed
  405, // not allowed to send (out of credits, sending disabled)
  412, // account pending approval
]);
const POSTMARK_INACTIVE_RECIPIENT = 406;

const TWILIO_RATE_LIMITED = 20429;
const TWILIO_OPTED_OUT = 21610;

/** Error codes of Node, undici and axios that mean "gave up waiting", as opposed to "could not talk". */
const TIMEOUT_CODES = new Set([
  'ETIMEDOUT',
  'ECONNABORTED', // axios: its `timeout` option fired
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** Classifies anything thrown by a call through the `postmark` SDK. */
export function classifyPostmarkError(error: unknown, trace: HttpTrace = {}): ProviderError {
  if (error instanceof ProviderError) return error;
  if (error instanceof PostmarkErrors.PostmarkError && error.statusCode > 0) {
    const code = error.code;
    const accountProblem = POSTMARK_ACCOUNT_CODES.has(code);
    return fromHttpStatus('postmark', error.statusCode, {
      message: error.message,
      // ErrorCode 0 (or none) on 5xx and 429 answers says nothing.
      providerCode: code === 0 ? undefined : code,
      kindOverride: accountProblem ? 'server_error' : undefined,
      suppressed: error.statusCode === 422 && code === POSTMARK_INACTIVE_RECIPIENT,
      retryAfterMs: trace.retryAfterMs,
      cause: error,
    });
  }
  // The fetch client rethrows transport failures as a bare PostmarkError carrying only the
  // message; the trace still holds the original error with its name and code.
  return fromTransportError('postmark', trace.transportError ?? error, error);
}

/** Classifies anything thrown by a call through the `twilio` SDK. */
export function classifyTwilioError(error: unknown, trace: HttpTrace = {}): ProviderError {
  if (error instanceof ProviderError) return error;
  const rest = twilioRestFields(error);
  if (rest) {
    return fromHttpStatus('twilio', rest.status, {
      message: rest.message,
      providerCode: rest.code,
      kindOverride: rest.code === TWILIO_RATE_LIMITED ? 'rate_limited' : undefined,
      suppressed: rest.code === TWILIO_OPTED_OUT,
      retryAfterMs: trace.retryAfterMs,
      cause: error,
    });
  }
  return fromTransportError('twilio', trace.transportError ?? error, error);
}

/** Maps an HTTP error answer to a kind: 429 rate limited, 5xx and 401/403 server side, other 4xx rejected. */
export function fromHttpStatus(
  provider: string,
  status: number,
  opts: {
    message: string;
    providerCode: number | undefined;
    kindOverride: ProviderErrorKind | undefined;
    suppressed: boolean;
    retryAfterMs: number | undefined;
    cause: unknown;
  },
): ProviderError {
  const kind = opts.kindOverride ?? kindOfStatus(status);
  const code = opts.providerCode === undefined ? '' : ` code ${opts.providerCode}`;
  return new ProviderError(`${provider}: HTTP ${status}${code}: ${opts.message}`, {
    kind,
    httpStatus: status,
    providerCode: opts.providerCode,
    suppressed: kind === 'rejected' && opts.suppressed,
    retryAfterMs: kind === 'rate_limited' ? opts.retryAfterMs : undefined,
    cause: opts.cause,
  });
}

function kindOfStatus(status: number): ProviderErrorKind {
  if (status === 429) return 'rate_limited';
  if (status === 408) return 'timeout';
  // 401/403: Herald's credentials or account are wrong; retrying after the operator fixes it works.
  if (status === 401 || status === 403) return 'server_error';
  if (status >= 400 && status < 500) return 'rejected';
  return 'server_error';
}

export function fromTransportError(provider: string, transportError: unknown, cause: unknown): ProviderError {
  const kind: ProviderErrorKind = isTimeout(transportError) ? 'timeout' : 'server_error';
  const what = kind === 'timeout' ? 'timed out' : 'request failed';
  return new ProviderError(`${provider}: ${what}: ${describe(transportError)}`, { kind, cause });
}

/** True for aborts by a timeout signal and for the timeout codes of Node, undici and axios, anywhere in the cause chain. */
function isTimeout(error: unknown): boolean {
  for (const link of causeChain(error)) {
    const { name, code, message } = link as { name?: unknown; code?: unknown; message?: unknown };
    if (name === 'TimeoutError' || name === 'AbortError') return true;
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) return true;
    // A bare PostmarkError keeps only the message of the DOMException that AbortSignal.timeout threw.
    if (typeof message === 'string' && /aborted due to timeout/i.test(message)) return true;
  }
  return false;
}

function* causeChain(error: unknown): Generator<object> {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    yield current;
    current = (current as { cause?: unknown }).cause;
  }
}

function describe(error: unknown): string {
  const parts: string[] = [];
  for (const link of causeChain(error)) {
    const { code, message } = link as { code?: unknown; message?: unknown };
    const text = [typeof code === 'string' ? code : '', typeof message === 'string' ? message : ''].filter(Boolean).join(' ');
    if (text !== '' && !parts.includes(text)) parts.push(text);
  }
  return parts.length > 0 ? parts.join(' <- ') : String(error);
}

/** Status, code and message of a Twilio error answer (RestException, or an RFC 9457 TwilioServiceException). */
function twilioRestFields(error: unknown): { status: number; code: number | undefined; message: string } | undefined {
  if (!(error instanceof Error)) return undefined;
  const fields = error as Error & { status?: unknown; code?: unknown; title?: unknown };
  // TwilioServiceException (RFC 9457 answers of newer APIs) is not exported by the SDK: recognise its shape.
  const isRest = error instanceof twilio.RestException || typeof fields.title === 'string';
  if (!isRest || typeof fields.status !== 'number') return undefined;
  return {
    status: fields.status,
    code: typeof fields.code === 'number' && fields.code !== 0 ? fields.code : undefined,
    message: error.message,
  };
}

/** Classifies anything thrown by a call through `@sendgrid/client` / `@sendgrid/mail`. */
export function classifySendgridError(error: unknown, now: number = Date.now()): ProviderError {
  if (error instanceof ProviderError) return error;
  const answer = sendgridAnswer(error);
  if (answer) {
    return fromHttpStatus('sendgrid', answer.status, {
      message: answer.message,
      providerCode: undefined,
      kindOverride: undefined,
      // Mail Send accepts a suppressed address and drops it later (a `dropped` event): no refusal says so.
      suppressed: false,
      retryAfterMs: sendgridRetryAfterMs(answer.headers, now),
      cause: error,
    });
  }
  // Network failures and timeouts come as the raw axios error, with its string code.
  return fromTransportError('sendgrid', error, error);
}

/** Status, headers and the `errors[].message` texts of a SendGrid error answer (the SDK's ResponseError). */
function sendgridAnswer(error: unknown): { status: number; headers: Record<string, unknown>; message: string } | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, response } = error as Error & { code?: unknown; response?: { headers?: unknown; body?: unknown } };
  if (typeof code !== 'number' || typeof response !== 'object' || response === null) return undefined;
  const headers = typeof response.headers === 'object' && response.headers !== null ? (response.headers as Record<string, unknown>) : {};
  const errors = (response.body as { errors?: unknown } | undefined)?.errors;
  const texts = Array.isArray(errors)
    ? errors
        .map((e: { message?: unknown; field?: unknown }) =>
          typeof e?.message === 'string'
            ? typeof e.field === 'string' && e.field !== 'null'
              ? `${e.message} (${e.field})`
              : e.message
            : '',
        )
        .filter(Boolean)
    : [];
  return { status: code, headers, message: texts.length > 0 ? texts.join('; ') : error.message };
}

/**
 * When SendGrid asks Herald to come back: `Retry-After` when present, otherwise the
 * `X-RateLimit-Reset` its rate-limit answers carry (epoch seconds).
 */
function sendgridRetryAfterMs(headers: Record<string, unknown>, now: number): number | undefined {
  const header = (name: string): string | undefined => {
    const value = headers[name] ?? headers[name.toLowerCase()];
    return typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
  };
  const retryAfter = parseRetryAfter(header('retry-after'), now);
  if (retryAfter !== undefined) return retryAfter;
  const reset = Number(header('x-ratelimit-reset'));
  return Number.isFinite(reset) && reset > 0 ? Math.max(0, reset * 1000 - now) : undefined;
}

/** The fields of the `mailgun.js` SDK's APIError (`type: 'MailgunAPIError'`). */
interface MailgunApiError {
  status: number;
  message: string;
  details: string;
}

/**
 * An axios error code as the `mailgun.js` SDK reports a transport failure: it turns every
 * request that got no answer into `status: 400` with the code (`ECONNREFUSED`,
 * `ECONNABORTED`, `ERR_NETWORK`, ...) as the message, where a real answer carries its status
 * text or the body's `error`.
 */
const AXIOS_ERROR_CODE = /^(E[A-Z0-9_]+|ERR_[A-Z0-9_]+)$/;
/** Mailgun's 429 text: "... request limit exceeded, try again after Mon, 20 Dec 2021 20:33:21 UTC". */
const MAILGUN_TRY_AGAIN_AFTER = /try again after (.+?)\s*$/i;

/** Classifies anything thrown by a call through the `mailgun.js` SDK (which keeps no response headers). */
export function classifyMailgunError(error: unknown, _trace: HttpTrace = {}, now: number = Date.now()): ProviderError {
  if (error instanceof ProviderError) return error;
  const api = mailgunApiFields(error);
  if (!api) return fromTransportError('mailgun', error, error);
  const text = api.details !== '' && api.details !== api.message ? `${api.message}: ${api.details}` : api.message;
  if (api.status === 400 && AXIOS_ERROR_CODE.test(api.message)) {
    // No answer came back: a timeout or a failed connection, not a refusal of the message.
    const kind: ProviderErrorKind = TIMEOUT_CODES.has(api.message) ? 'timeout' : 'server_error';
    const what = kind === 'timeout' ? 'timed out' : 'request failed';
    return new ProviderError(`mailgun: ${what}: ${text}`, { kind, cause: error });
  }
  let kindOverride: ProviderErrorKind | undefined;
  // The root URL answered ("Mailgun Magnificent API"): MAILGUN_API_URL is wrong, the message is fine.
  if (api.status === 400 && api.message === 'Incorrect url') kindOverride = 'server_error';
  // "Domain X is not allowed to send: ..." (sandbox domain, unverified) and "Domain not found": the account, not the message.
  if (api.status === 400 && /^Domain .* is not allowed to send/i.test(api.details)) kindOverride = 'server_error';
  if (api.status === 404) kindOverride = 'server_error';
  const tryAgainAt = api.status === 429 ? Date.parse(MAILGUN_TRY_AGAIN_AFTER.exec(api.details)?.[1] ?? '') : NaN;
  return fromHttpStatus('mailgun', api.status, {
    message: text,
    providerCode: undefined,
    kindOverride,
    suppressed: false,
    retryAfterMs: Number.isNaN(tryAgainAt) ? undefined : Math.max(0, tryAgainAt - now),
    cause: error,
  });
}

function mailgunApiFields(error: unknown): MailgunApiError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const fields = error as { type?: unknown; status?: unknown; message?: unknown; details?: unknown };
  if (fields.type !== 'MailgunAPIError' || typeof fields.status !== 'number') return undefined;
  return {
    status: fields.status,
    message: typeof fields.message === 'string' ? fields.message : '',
    details: typeof fields.details === 'string' ? fields.details : JSON.stringify(fields.details ?? ''),
  };
}

/**
 * An Infrai error answer: the HTTP status and the envelope's `error.code` / `error.message`
 * (src/providers/infrai.ts throws it; Infrai has no SDK to throw its own).
 */
export class InfraiApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'InfraiApiError';
  }
}

/** Infrai codes that blame Herald's account, not the message: retry after the operator acts. */
const INFRAI_ACCOUNT_CODES = new Set(['INSUFFICIENT_CREDIT', 'UNAUTHORIZED']);
/** Infrai codes of a recipient on the suppression list (email) or opted out (SMS). Unconfirmed names: docs/PROVIDERS.md. */
const INFRAI_SUPPRESSED_CODES = new Set(['RECIPIENT_SUPPRESSED', 'RECIPIENT_OPTED_OUT']);

/** Classifies anything thrown by a call of the Infrai adapter (its own fetch). */
export function classifyInfraiError(error: unknown, trace: HttpTrace = {}): ProviderError {
  if (error instanceof ProviderError) return error;
  if (error instanceof InfraiApiError) {
    const code = error.code === undefined ? '' : ` ${error.code}`;
    return fromHttpStatus('infrai', error.status, {
      message: `${code.trim()}${code ? ': ' : ''}${error.message}`,
      // Infrai's codes are words, not numbers: the message carries them.
      providerCode: undefined,
      kindOverride: error.code !== undefined && INFRAI_ACCOUNT_CODES.has(error.code) ? 'server_error' : undefined,
      suppressed: error.code !== undefined && INFRAI_SUPPRESSED_CODES.has(error.code),
      retryAfterMs: trace.retryAfterMs,
      cause: error,
    });
  }
  return fromTransportError('infrai', trace.transportError ?? error, error);
}
