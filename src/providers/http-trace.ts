/**
 * What the transport saw during one provider call. Both SDKs throw away facts Herald needs:
 * Postmark's fetch client reduces a network failure to its message and neither SDK keeps the
 * response headers of an error (so `Retry-After` is lost). The adapters' transport hooks write
 * those facts into the trace of the call in progress, found through AsyncLocalStorage, so that
 * one client can serve concurrent calls.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
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

const traces = new AsyncLocalStorage<HttpTrace>();

/** Runs one provider call with a fresh trace; whatever it throws is turned into a ProviderError by `classify`. */
export async function traced<T>(call: () => Promise<T>, classify: (error: unknown, trace: HttpTrace) => ProviderError): Promise<T> {
  const trace: HttpTrace = {};
  try {
    return await traces.run(trace, call);
  } catch (error) {
    throw classify(error, trace);
  }
}

/** Records a response on the trace of the call in progress (no-op outside `traced`). */
export function recordResponse(status: number, retryAfter: string | null | undefined): void {
  const trace = traces.getStore();
  if (!trace) return;
  trace.status = status;
  trace.retryAfterMs = parseRetryAfter(retryAfter);
}

/** Records a transport failure on the trace of the call in progress (no-op outside `traced`). */
export function recordTransportError(error: unknown): void {
  const trace = traces.getStore();
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
