/**
 * A typed client for Herald's API (`herald/client`): one method per route, request and answer
 * types from the same schemas the API validates with, and errors as `HeraldApiError` carrying the
 * API's stable error code. Uses the runtime's `fetch`; nothing else.
 *
 * ```ts
 * const herald = createHeraldClient({ baseUrl: 'https://herald.example', apiKey: process.env.HERALD_KEY! });
 * const { id } = await herald.createNotice(body, { idempotencyKey: 'terms-2026-11/player-42' });
 * const done = await herald.waitFor(id, { terminal: true, timeoutMs: 15 * 60_000 });
 * ```
 */
import type { Static } from '@sinclair/typebox';
import type { StoredEntry } from './notice/entries.js';
import { TERMINAL_STATES, type NoticeState } from './notice/states.js';
import type {
  AcceptedResponse,
  CreateNoticeBody,
  NoticeViewSchema,
  PolicyVersionResponse,
  RecipientPolicyBody,
  RecipientPolicyResponse,
} from './http/schemas.js';
import type { StatsResponse } from './http/stats.js';
import type { SuppressionBody, SuppressionResponse } from './http/suppressions.js';

export type { CreateNoticeBody, RecipientPolicyBody, StoredEntry as NoticeEvent, NoticeState };
export type Accepted = Static<typeof AcceptedResponse>;
export type NoticeView = Static<typeof NoticeViewSchema> & { state: NoticeState };
export type Stats = Static<typeof StatsResponse>;
export type Suppression = Static<typeof SuppressionResponse>;
export type NewSuppression = Static<typeof SuppressionBody>;
export type RecipientPolicy = Static<typeof RecipientPolicyResponse>;

/** An answer of the API that is not a success: its stable error code, HTTP status, message and details. */
export class HeraldApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    /** Seconds the API asked to wait (429, 503), when it said. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'HeraldApiError';
  }
}

/** `waitFor` ran out of time; `last` is the notice as last read. */
export class HeraldTimeoutError extends Error {
  constructor(readonly last: NoticeView) {
    super(`notice ${last.id} is still ${last.state}`);
    this.name = 'HeraldTimeoutError';
  }
}

export interface HeraldClientOptions {
  /** Where Herald's web process listens, e.g. `https://herald.example` (no trailing path). */
  baseUrl: string;
  apiKey: string;
  /** A fetch to use instead of the global one (a proxy agent, tests). */
  fetch?: typeof fetch;
  /** Per request; default 10 s. */
  timeoutMs?: number;
}

export interface HeraldClient {
  createNotice(body: CreateNoticeBody, opts?: { idempotencyKey?: string }): Promise<Accepted & { replayed: boolean }>;
  getNotice(id: string): Promise<NoticeView>;
  getEvents(id: string): Promise<StoredEntry[]>;
  cancelNotice(id: string): Promise<NoticeView>;
  /** Polls the notice until it is in `state` (or in a terminal state, with `terminal: true`). */
  waitFor(
    id: string,
    until: ({ state: NoticeState | readonly NoticeState[] } | { terminal: true }) & { timeoutMs?: number; intervalMs?: number },
  ): Promise<NoticeView>;
  suppressions: {
    add(suppression: NewSuppression): Promise<Suppression>;
    get(channel: 'email' | 'sms', address: string): Promise<Suppression>;
    remove(channel: 'email' | 'sms', address: string): Promise<void>;
  };
  putRecipientPolicy(recipientId: string, policy: RecipientPolicyBody): Promise<{ version: number }>;
  getRecipientPolicy(recipientId: string): Promise<RecipientPolicy>;
  stats(period?: { from?: Date | string; to?: Date | string }): Promise<Stats>;
}

export function createHeraldClient(options: HeraldClientOptions): HeraldClient {
  const base = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;

  async function call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ value: T; response: Response }> {
    const response = await doFetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${options.apiKey}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    const parsed: unknown = text === '' ? undefined : JSON.parse(text);
    if (!response.ok) {
      const error = (parsed as { error?: { code?: string; message?: string; details?: unknown } } | undefined)?.error;
      const retryAfter = Number(response.headers.get('retry-after'));
      throw new HeraldApiError(
        response.status,
        error?.code ?? `http_${response.status}`,
        error?.message ?? `Herald answered ${response.status}`,
        error?.details,
        Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
      );
    }
    return { value: parsed as T, response };
  }
  const get = async <T>(path: string) => (await call<T>('GET', path)).value;
  const segment = encodeURIComponent;
  const time = (t: Date | string) => (typeof t === 'string' ? t : t.toISOString());

  const client: HeraldClient = {
    async createNotice(body, opts = {}) {
      const headers: Record<string, string> = opts.idempotencyKey === undefined ? {} : { 'idempotency-key': opts.idempotencyKey };
      const { value, response } = await call<Accepted>('POST', '/v1/notices', body, headers);
      return { ...value, replayed: response.headers.get('idempotent-replayed') === 'true' };
    },
    getNotice: (id) => get<NoticeView>(`/v1/notices/${segment(id)}`),
    getEvents: async (id) => (await get<{ events: StoredEntry[] }>(`/v1/notices/${segment(id)}/events`)).events,
    cancelNotice: async (id) => (await call<NoticeView>('POST', `/v1/notices/${segment(id)}/cancel`)).value,
    async waitFor(id, until) {
      const wanted: readonly string[] = 'terminal' in until ? TERMINAL_STATES : typeof until.state === 'string' ? [until.state] : until.state;
      const deadline = Date.now() + (until.timeoutMs ?? 60_000);
      for (;;) {
        const view = await client.getNotice(id);
        if (wanted.includes(view.state)) return view;
        if (Date.now() >= deadline) throw new HeraldTimeoutError(view);
        await new Promise((resolve) => setTimeout(resolve, until.intervalMs ?? 1_000));
      }
    },
    suppressions: {
      add: async (suppression) => (await call<Suppression>('POST', '/v1/suppressions', suppression)).value,
      get: (channel, address) => get<Suppression>(`/v1/suppressions/${channel}/${segment(address)}`),
      remove: async (channel, address) => {
        await call('DELETE', `/v1/suppressions/${channel}/${segment(address)}`);
      },
    },
    putRecipientPolicy: async (recipientId, policy) =>
      (await call<Static<typeof PolicyVersionResponse>>('PUT', `/v1/recipients/${segment(recipientId)}/policy`, policy)).value,
    getRecipientPolicy: (recipientId) => get<RecipientPolicy>(`/v1/recipients/${segment(recipientId)}/policy`),
    stats: (period = {}) => {
      const query = new URLSearchParams();
      if (period.from !== undefined) query.set('from', time(period.from));
      if (period.to !== undefined) query.set('to', time(period.to));
      const q = query.toString();
      return get<Stats>(`/v1/stats${q ? `?${q}` : ''}`);
    },
  };
  return client;
}
