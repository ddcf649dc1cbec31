/**
 * `@herald/client`: a typed client for Herald's HTTP API, with no dependency but the runtime's
 * `fetch`.
 *
 * ```ts
 * const herald = createHeraldClient({ baseUrl: 'https://herald.example', apiKey: process.env.HERALD_KEY! });
 * const created = await herald.createNotice(body, { idempotencyKey: 'terms-2026-11/player-42' });
 * const done = await herald.waitFor(created.id, { terminal: true, timeoutMs: 15 * 60_000 });
 * ```
 */
export {
  createHeraldClient,
  TERMINAL_STATES,
  type CallOptions,
  type HeraldClient,
  type HeraldClientOptions,
  type WaitCondition,
} from './client.js';
export { HeraldApiError, HeraldResponseError, HeraldTimeoutError, type ClientErrorCode, type HeraldApiErrorInit } from './errors.js';
export type { RetryEvent, RetryOptions } from './transport.js';
export type * from './types.js';
export type * from './log.js';
