/**
 * What the transport saw during one provider call. The SDKs throw away facts Herald needs:
 * Postmark's client reduces a network failure to its message and neither Postmark's nor Twilio's
 * keeps the response headers of an error (so `Retry-After` is lost). The adapters' transport hooks
 * write those facts into the trace of the call that issued the request, so that one client can
 * serve concurrent calls.
 *
 * The hook finds that trace at the moment the request is issued: the SDKs start their request
 * synchronously inside the method called (Postmark's `fetch`, Twilio's `RequestClient.request`),
 * and `traced` marks the trace as the one issuing for exactly that synchronous stretch (`issue`
 * for a later request of the same call, such as the next page of a listing). A hook reads it
 * first thing (`issuingTrace`), before anything asynchronous. Outside such a stretch there is no
 * trace and the facts are dropped, never given to another call. (AsyncLocalStorage would follow
 * the call through every await, but in Node 20 it hooks every promise of the process, and the
 * worker makes many per job.)
 */
import type { ProviderError } from './types.js';

/** Transport facts of one provider call (the last HTTP exchange wins when a call makes several). */
export interface HttpTrace {
  /** HTTP status of the last response received. */
  status?: number;
  /** The last response's `Retry-After`, in milliseconds. */
  retryAfterMs?: number;
  /** The error the transport threw (connection refused, reset, timeout abort), before any SDK wrapping. */
  transportError?: unknown;
}

/** Runs `request` (which starts SDK requests synchronously) with the call's trace as the issuing one. */
export type Issue = <R>(request: () => R) => R;

let issuing: HttpTrace | undefined;

/**
 * Runs one provider call with a fresh trace; whatever it throws is turned into a ProviderError by
 * `classify`. Requests the call starts synchronously are traced; a request it starts after an
 * await is traced when started through `issue`.
 */
export async function traced<T>(
  call: (issue: Issue) => Promise<T>,
  classify: (error: unknown, trace: HttpTrace) => ProviderError,
): Promise<T> {
  const trace: HttpTrace = {};
  const issue: Issue = (request) => {
    const outer = issuing;
    issuing = trace;
    try {
      return request();
    } finally {
      issuing = outer;
    }
  };
  try {
    return await issue(() => call(issue));
  } catch (error) {
    throw classify(error, trace);
  }
}

/** The trace of the call issuing a request right now; a transport hook reads it before its first await. */
export function issuingTrace(): HttpTrace | undefined {
  return issuing;
}

/** Records a response on a call's trace (no-op without one). */
export function recordResponse(trace: HttpTrace | undefined, status: number, retryAfter: string | null | undefined): void {
  if (!trace) return;
  trace.status = status;
  trace.retryAfterMs = parseRetryAfter(retryAfter);
}

/** Records a transport failure on a call's trace (no-op without one). */
export function recordTransportError(trace: HttpTrace | undefined, error: unknown): void {
  if (trace) trace.transportError = error;
}

/** Parses `Retry-After` (delay in seconds, or an HTTP date) into milliseconds from `now`. */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
