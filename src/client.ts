/**
 * A typed client for Herald's API (`herald/client`): one method per route, request and answer
 * types from the same schemas the API validates with, and errors as `HeraldApiError` carrying the
 * API's stable error code (`HeraldResponseError` when the answer is not Herald's: a proxy's HTML
 * page, a redirect). Uses the runtime's `fetch`; nothing else. The API key goes only to `baseUrl`:
 * redirects are not followed, and a plain `http:` URL is refused unless it is the machine's own
 * (loopback) or `allowInsecureHttp` says so.
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
  constructor(status: number, body: string, redirect?: { location: string | undefined }) {
    const folded = body.replace(/\s+/g, ' ').trim();
    const snippet = folded.length > SNIPPET_CHARS ? `${folded.slice(0, SNIPPET_CHARS)}…` : folded;
    const what = redirect
      ? `a redirect${redirect.location ? ` to ${redirect.location}` : ''}, which the client does not follow: set baseUrl to where Herald answers`
      : `a body that is not JSON: ${snippet || '(empty)'}`;
    super(status, `http_${status}`, `Herald's address answered ${status} with ${what}`);
    this.name = 'HeraldResponseError';
    this.snippet = snippet;
    this.location = redirect?.location;
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
  /**
   * Send the key over plain `http:` to a host other than this machine's loopback (a private
   * network the caller trusts). Off: such a `baseUrl` is refused.
   */
  allowInsecureHttp?: boolean;
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

/** `localhost`, `*.localhost`, 127.0.0.0/8 and ::1: plain HTTP to them never leaves the machine. */
function isLoopback(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || /^127(?:\.\d{1,3}){3}$/.test(host) || host === '[::1]';
}

/** The base URL without trailing slashes, refused when the key would travel in clear text off the machine. */
function checkedBase(options: HeraldClientOptions): string {
  let url: URL;
  try {
    url = new URL(options.baseUrl);
  } catch {
    throw new TypeError(`baseUrl "${options.baseUrl}" is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError(`baseUrl must be https: (or http:), not ${url.protocol}`);
  if (url.protocol === 'http:' && !isLoopback(url.hostname) && options.allowInsecureHttp !== true) {
    throw new TypeError(
      `baseUrl ${url.origin} is plain http: the API key would cross the network unencrypted; use https:, or set allowInsecureHttp on a network you trust`,
    );
  }
  return options.baseUrl.replace(/\/+$/, '');
}

export function createHeraldClient(options: HeraldClientOptions): HeraldClient {
  const base = checkedBase(options);
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
      // A redirect would carry the key on (fetch drops it only across origins): it is reported instead.
      redirect: 'manual',
    });
    // In a browser a manual redirect is opaque: status 0, no Location.
    if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
      throw new HeraldResponseError(response.status, '', { location: response.headers.get('location') ?? undefined });
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      throw new HeraldResponseError(response.status, text);
    }
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
