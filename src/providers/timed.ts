/**
 * Times every call the engine makes to a provider adapter, once, around the adapter itself: each
 * call is handed to `record` with its operation, its outcome and its duration, whichever step
 * made it. The worker's `/metrics` turns these into `herald_provider_call_duration_seconds`.
 */
import { ProviderError, type EmailProvider, type SmsProvider } from './types.js';

/** What one provider call was: `send`, `status`, `search` (a send in doubt looked for) or `cancel`. */
export type ProviderOperation = 'send' | 'status' | 'search' | 'cancel';

/** `ok`, or how the call failed: a `ProviderError`'s kind, else `error`. */
export type CallOutcome = 'ok' | ProviderError['kind'] | 'error';

/** Receives each call of one adapter, its duration in seconds. */
export type CallRecorder = (call: { provider: string; operation: ProviderOperation; outcome: CallOutcome; seconds: number }) => void;

/** The methods timed, by the operation each is. `verify` is the doctor's, never a worker's call. */
const OPERATIONS: Readonly<Record<string, ProviderOperation>> = {
  send: 'send',
  status: 'status',
  findByIdempotencyKey: 'search',
  findSince: 'search',
  cancel: 'cancel',
};

/** The outcome label of a call that threw. */
export function outcomeOf(error: unknown): CallOutcome {
  return error instanceof ProviderError ? error.kind : 'error';
}

/**
 * The adapter with its calls timed. Everything else (its name, `close`, `feedAbsenceMs`) is the
 * adapter's own, read through, so an adapter renamed afterwards (`<provider>-sandbox`) is timed
 * under the name it was given here.
 */
export function timeProviderCalls<P extends EmailProvider | SmsProvider>(adapter: P, record: CallRecorder): P {
  const provider = adapter.name;
  return new Proxy(adapter, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      const operation = typeof property === 'string' ? OPERATIONS[property] : undefined;
      if (operation === undefined) return (value as (...args: unknown[]) => unknown).bind(target);
      return async (...args: unknown[]) => {
        const started = performance.now();
        const done = (outcome: CallOutcome) => record({ provider, operation, outcome, seconds: (performance.now() - started) / 1000 });
        try {
          const answer: unknown = await (value as (...args: unknown[]) => Promise<unknown>).apply(target, args);
          done('ok');
          return answer;
        } catch (error) {
          done(outcomeOf(error));
          throw error;
        }
      };
    },
  });
}
