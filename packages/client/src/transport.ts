/**
 * One call to Herald: the request, its per-attempt timeout, the caller's AbortSignal, the retries
 * that are safe, and every failure turned into a `HeraldApiError`.
 */
import { HeraldApiError, HeraldResponseError } from './errors.js';

/** How the client retries. */
export interface RetryOptions {
  /** Requests one call may send in all, the first included (default 3; 1: never retry). */
  maxAttempts?: number;
  /** The wait before the first retry when the answer names none; doubled for each next one, with jitter (default 250 ms). */
  baseDelayMs?: number;
  /** The longest wait before a retry (default 30 s): an answer asking for longer (Retry-After) is not waited for, but thrown. */
  maxDelayMs?: number;
}

/** A retry about to be waited for: the attempt that failed (1 is the first request), its error, and the wait. */
export interface RetryEvent {
  method: string;
  path: string;
  attempt: number;
  delayMs: number;
  error: HeraldApiError;
}

/** What the transport needs of the client's options. */
export interface TransportOptions {
  base: string;
  apiKey: string;
  fetch: typeof fetch;
  timeoutMs: number;
  retry: Required<RetryOptions>;
  onRetry: ((event: RetryEvent) => void) | undefined;
}

/** One request: `idempotent` says whether sending it twice is harmless, so that it may be retried after no answer. */
export interface CallSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  idempotent: boolean;
  signal?: AbortSignal | undefined;
}

/** A successful answer: its parsed body and status. */
export interface Answer<T> {
  value: T;
  status: number;
  headers: Headers;
}

/** Three requests at most, backoff from 250 ms, no wait over 30 s. */
export const DEFAULT_RETRY: Required<RetryOptions> = { maxAttempts: 3, baseDelayMs: 250, maxDelayMs: 30_000 };

/** Sends `spec`, retrying 429 and 503 always and no answer (refused, reset, timed out) when the call is idempotent. */
export async function send<T>(options: TransportOptions, spec: CallSpec): Promise<Answer<T>> {
  const { maxAttempts } = options.retry;
  for (let attempt = 1; ; attempt += 1) {
    if (spec.signal?.aborted) throw aborted(spec, attempt - 1, spec.signal.reason);
    let error: HeraldApiError;
    try {
      return await attemptOnce<T>(options, spec, attempt);
    } catch (thrown) {
      if (!(thrown instanceof HeraldApiError)) throw thrown;
      error = thrown;
    }
    if (attempt >= maxAttempts || !retryable(error, spec)) throw error;
    const delayMs = retryDelay(options.retry, attempt, error);
    // A wait longer than allowed would only delay the same answer: the caller decides, with retryAfterSeconds.
    if (delayMs === undefined) throw error;
    options.onRetry?.({ method: spec.method, path: spec.path, attempt, delayMs, error });
    await sleep(delayMs, spec.signal, () => aborted(spec, attempt, spec.signal?.reason));
  }
}

/** 429 and 503 say "not done, come back" whatever the call; no answer is retried only where a second request is harmless. */
function retryable(error: HeraldApiError, spec: CallSpec): boolean {
  if (error.status === 429 || error.status === 503) return true;
  return spec.idempotent && error.status === 0 && (error.code === 'network_error' || error.code === 'timeout');
}

/**
 * The wait before retry `attempt + 1`: what the answer asked for, plus up to a tenth more (at most
 * a second) so that callers told the same do not all come back at once; else exponential
 * backoff with equal jitter. Undefined when it would exceed `maxDelayMs`.
 */
export function retryDelay(
  retry: Required<RetryOptions>,
  attempt: number,
  error: HeraldApiError,
  random: () => number = Math.random,
): number | undefined {
  if (error.retryAfterSeconds !== undefined) {
    const asked = error.retryAfterSeconds * 1000;
    if (asked > retry.maxDelayMs) return undefined;
    return Math.min(retry.maxDelayMs, Math.round(asked + random() * Math.min(asked / 10, 1000)));
  }
  const ceiling = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

async function attemptOnce<T>(options: TransportOptions, spec: CallSpec, attempt: number): Promise<Answer<T>> {
  // One controller per attempt: the caller's signal and this attempt's timeout both end it, and
  // which of them did decides the error.
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.timeoutMs);
  const onAbort = () => controller.abort();
  spec.signal?.addEventListener('abort', onAbort, { once: true });
  const failure = (cause: unknown): HeraldApiError => {
    if (cause instanceof HeraldApiError) return cause;
    if (spec.signal?.aborted) return aborted(spec, attempt, spec.signal.reason);
    if (timedOut)
      return new HeraldApiError({
        status: 0,
        code: 'timeout',
        message: `${spec.method} ${spec.path}: no answer within ${options.timeoutMs} ms`,
        attempts: attempt,
        cause,
      });
    return new HeraldApiError({
      status: 0,
      code: 'network_error',
      message: `${spec.method} ${spec.path}: no answer (${describe(cause)})`,
      attempts: attempt,
      cause,
    });
  };
  // Called unbound: a browser's fetch refuses to run as a method of another object.
  const doFetch = options.fetch;
  try {
    const response = await untilAborted(
      doFetch(`${options.base}${spec.path}`, {
        method: spec.method,
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          accept: 'application/json',
          ...(spec.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...spec.headers,
        },
        body: spec.body === undefined ? undefined : JSON.stringify(spec.body),
        signal: controller.signal,
        // A redirect would carry the key on (fetch drops it only across origins): it is reported instead.
        redirect: 'manual',
      }),
      controller.signal,
    ).catch((cause: unknown) => {
      throw failure(cause);
    });
    const retryAfterSeconds = retryAfter(response.headers.get('retry-after'));
    // In a browser a manual redirect is opaque: status 0, no Location.
    if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
      throw new HeraldResponseError(response.status, '', {
        redirect: true,
        location: response.headers.get('location') ?? undefined,
        attempts: attempt,
      });
    }
    const text = await untilAborted(response.text(), controller.signal).catch((cause: unknown) => {
      throw failure(cause);
    });
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new HeraldResponseError(response.status, text, { retryAfterSeconds, attempts: attempt });
    }
    if (!response.ok) {
      const error = (parsed as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
      throw new HeraldApiError({
        status: response.status,
        code: typeof error?.code === 'string' ? error.code : `http_${response.status}`,
        message: typeof error?.message === 'string' ? error.message : `Herald answered ${response.status}`,
        details: error?.details,
        retryAfterSeconds,
        attempts: attempt,
      });
    }
    return { value: parsed as T, status: response.status, headers: response.headers };
  } finally {
    clearTimeout(timer);
    spec.signal?.removeEventListener('abort', onAbort);
  }
}

function aborted(spec: CallSpec, attempts: number, reason: unknown): HeraldApiError {
  return new HeraldApiError({
    status: 0,
    code: 'aborted',
    message: `${spec.method} ${spec.path}: aborted by the caller's signal`,
    attempts,
    cause: reason,
  });
}

/** `Retry-After` as seconds: a number of seconds, or an HTTP date. */
function retryAfter(header: string | null): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds : undefined;
  const at = Date.parse(header);
  return Number.isFinite(at) ? Math.max(0, (at - Date.now()) / 1000) : undefined;
}

/** The cause of no answer in a few words: fetch's own error hides the system error (ECONNREFUSED) in its `cause`. */
function describe(cause: unknown): string {
  const inner = (cause as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  const code = typeof inner?.code === 'string' ? inner.code : (cause as { code?: unknown } | undefined)?.code;
  const message = cause instanceof Error ? cause.message : String(cause);
  return typeof code === 'string' ? `${message}: ${code}` : message;
}

/** Settles with `work`, or rejects as soon as `signal` aborts (a `fetch` of the caller's might not listen to it). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Waits `ms`, or rejects with `onAbort()` as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined, onAbort: () => Error): Promise<void> {
  if (signal?.aborted) return Promise.reject(onAbort());
  return new Promise<void>((resolve, reject) => {
    const abort = () => {
      clearTimeout(timer);
      reject(onAbort());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', abort, { once: true });
  });
}
