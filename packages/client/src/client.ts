/**
 * `createHeraldClient`: one method per route of Herald's API, each taking `{ signal }`. Uses the
 * runtime's `fetch` and nothing else. The API key goes only to `baseUrl`: redirects are not
 * followed, and a plain `http:` URL is refused unless it is the machine's own (loopback) or
 * `allowInsecureHttp` says so.
 */
import { HeraldApiError, HeraldTimeoutError } from './errors.js';
import type { NoticeEvent } from './log.js';
import { DEFAULT_RETRY, send, sleep, type CallSpec, type RetryEvent, type RetryOptions, type TransportOptions } from './transport.js';
import type {
  Accepted,
  BatchItemResult,
  BatchNotice,
  Channel,
  CreatedEventEndpoint,
  CreateNoticeBody,
  CreateNoticeResult,
  EventDelivery,
  EventEndpoint,
  NewEventEndpoint,
  NewSuppression,
  NoticeFilters,
  NoticePage,
  NoticeState,
  NoticeView,
  RecipientPolicy,
  RecipientPolicyBody,
  Stats,
  Suppression,
} from './types.js';

/** The states a notice ends in. */
export const TERMINAL_STATES: readonly NoticeState[] = ['email_delivered', 'sms_delivered', 'sms_failed', 'blocked', 'canceled', 'failed'];

/** Where Herald is, the key to use, and how patient to be. */
export interface HeraldClientOptions {
  /** Where Herald's web process listens, e.g. `https://herald.example` (no trailing path). */
  baseUrl: string;
  apiKey: string;
  /** A fetch to use instead of the global one (a proxy agent, tests). */
  fetch?: typeof fetch;
  /** How long one request may take before it counts as no answer; default 10 s. */
  timeoutMs?: number;
  /** How 429, 503 and no answer are retried; `false`: never. */
  retry?: RetryOptions | false;
  /** Told of each retry before its wait (to log it, or to count). */
  onRetry?: (event: RetryEvent) => void;
  /**
   * Send the key over plain `http:` to a host other than this machine's loopback (a private
   * network the caller trusts). Off: such a `baseUrl` is refused.
   */
  allowInsecureHttp?: boolean;
}

/** What every call takes: a signal that stops it, and its retries, at once (the call rejects with code `aborted`). */
export interface CallOptions {
  signal?: AbortSignal;
}

/** What `waitFor` waits for, and how. */
export type WaitCondition = ({ state: NoticeState | readonly NoticeState[] } | { terminal: true }) & {
  /** How long to keep polling; default 60 s. */
  timeoutMs?: number;
  /** Between two reads; default 1 s. */
  intervalMs?: number;
  signal?: AbortSignal;
};

/** One method per route of Herald's API. */
export interface HeraldClient {
  /** Creates a notice, under `idempotencyKey` or one generated for it, so that a retried create never makes a second notice. */
  createNotice(body: CreateNoticeBody, opts?: CallOptions & { idempotencyKey?: string }): Promise<CreateNoticeResult>;
  /**
   * Creates many notices in one request (`POST /v1/notices/batch`), each given an idempotency key
   * if it has none; one result per notice, in the order given. At most the server's
   * HERALD_BATCH_MAX (default 1000) per call: more is refused as a whole (400).
   */
  createNotices(notices: readonly BatchNotice[], opts?: CallOptions): Promise<BatchItemResult[]>;
  getNotice(id: string, opts?: CallOptions): Promise<NoticeView>;
  /** The notice's whole decision log, in order. */
  getEvents(id: string, opts?: CallOptions): Promise<NoticeEvent[]>;
  /** Cancels a notice not yet handed to a provider (409 `invalid_state` otherwise); the notice as it is now. */
  cancelNotice(id: string, opts?: CallOptions): Promise<NoticeView>;
  /** One page of notices, newest first, filtered. */
  listNotices(filters?: NoticeFilters, page?: CallOptions & { cursor?: string; limit?: number }): Promise<NoticePage>;
  /** Every notice the filters match, newest first, page after page. */
  notices(filters?: NoticeFilters, opts?: CallOptions & { limit?: number }): AsyncIterable<NoticeView>;
  /** Polls the notice until it is in `state` (or in a terminal state, with `terminal: true`); `HeraldTimeoutError` when the time is up. */
  waitFor(id: string, until: WaitCondition): Promise<NoticeView>;
  suppressions: {
    add(suppression: NewSuppression, opts?: CallOptions): Promise<Suppression>;
    get(channel: Channel, address: string, opts?: CallOptions): Promise<Suppression>;
    remove(channel: Channel, address: string, opts?: CallOptions): Promise<void>;
  };
  putRecipientPolicy(recipientId: string, policy: RecipientPolicyBody, opts?: CallOptions): Promise<{ version: number }>;
  getRecipientPolicy(recipientId: string, opts?: CallOptions): Promise<RecipientPolicy>;
  stats(period?: { from?: Date | string; to?: Date | string }, opts?: CallOptions): Promise<Stats>;
  eventEndpoints: {
    /** Subscribes an endpoint; its secret is in this answer and never again. Not retried after no answer: that could make two. */
    create(endpoint: NewEventEndpoint, opts?: CallOptions): Promise<CreatedEventEndpoint>;
    list(opts?: CallOptions): Promise<EventEndpoint[]>;
    delete(id: string, opts?: CallOptions): Promise<void>;
    /** The endpoint's recent delivery attempts, newest first. */
    deliveries(id: string, opts?: CallOptions): Promise<EventDelivery[]>;
  };
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

/** A fresh idempotency key: 36 printable characters, as the API takes them. */
const newKey = (): string => globalThis.crypto.randomUUID();

/** Wire form of one batch result. */
interface BatchAnswer {
  results: {
    index: number;
    status: number;
    id?: string;
    state?: string;
    deadline?: string;
    plannedChecks?: string[];
    error?: { code: string; message: string; details?: unknown };
  }[];
}

/** Makes a client of one Herald and one API key. */
export function createHeraldClient(options: HeraldClientOptions): HeraldClient {
  const transport: TransportOptions = {
    base: checkedBase(options),
    apiKey: options.apiKey,
    // The global fetch as it is at each call, not at creation.
    fetch: options.fetch ?? ((input, init) => fetch(input, init)),
    timeoutMs: options.timeoutMs ?? 10_000,
    retry: options.retry === false ? { ...DEFAULT_RETRY, maxAttempts: 1 } : { ...DEFAULT_RETRY, ...options.retry },
    onRetry: options.onRetry,
  };
  const call = <T>(spec: CallSpec) => send<T>(transport, spec);
  const get = async <T>(path: string, opts: CallOptions = {}) =>
    (await call<T>({ method: 'GET', path, idempotent: true, signal: opts.signal })).value;
  /**
   * A DELETE whose earlier attempt got no answer may have done its work: the retry's 404 then
   * means it is gone, as asked.
   */
  const remove = async (path: string, opts: CallOptions = {}) => {
    try {
      await call({ method: 'DELETE', path, idempotent: true, signal: opts.signal });
    } catch (error) {
      if (!(error instanceof HeraldApiError && error.status === 404 && error.attempts > 1)) throw error;
    }
  };
  const segment = encodeURIComponent;
  const time = (t: Date | string) => (typeof t === 'string' ? t : t.toISOString());

  const listNotices: HeraldClient['listNotices'] = (filters = {}, page = {}) => {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(filters) as [keyof NoticeFilters, NoticeFilters[keyof NoticeFilters]][]) {
      if (value !== undefined) query.set(name, value instanceof Date ? value.toISOString() : value);
    }
    if (page.limit !== undefined) query.set('limit', String(page.limit));
    if (page.cursor !== undefined) query.set('cursor', page.cursor);
    const q = query.toString();
    return get<NoticePage>(`/v1/notices${q ? `?${q}` : ''}`, page);
  };

  const client: HeraldClient = {
    async createNotice(body, opts = {}) {
      const idempotencyKey = opts.idempotencyKey ?? newKey();
      const answer = await call<Accepted | NoticeView>({
        method: 'POST',
        path: '/v1/notices',
        body,
        headers: { 'idempotency-key': idempotencyKey },
        // The key makes a second request harmless: it answers the notice the first one made.
        idempotent: true,
        signal: opts.signal,
      });
      if (answer.status === 200 || answer.headers.get('idempotent-replayed') === 'true') {
        const notice = answer.value as NoticeView;
        return { replayed: true, id: notice.id, idempotencyKey, notice };
      }
      return { ...(answer.value as Accepted), replayed: false, idempotencyKey };
    },

    async createNotices(notices, opts = {}) {
      if (notices.length === 0) return [];
      const keyed = notices.map((notice) => (notice.idempotencyKey === undefined ? { ...notice, idempotencyKey: newKey() } : notice));
      const { value } = await call<BatchAnswer>({
        method: 'POST',
        path: '/v1/notices/batch',
        body: { notices: keyed },
        idempotent: true,
        signal: opts.signal,
      });
      const results: BatchItemResult[] = new Array(keyed.length);
      for (const r of value.results) {
        const idempotencyKey = keyed[r.index]!.idempotencyKey!;
        if (r.status === 202) {
          results[r.index] = {
            index: r.index,
            outcome: 'accepted',
            status: 202,
            id: r.id!,
            state: 'accepted',
            deadline: r.deadline!,
            plannedChecks: r.plannedChecks ?? [],
            idempotencyKey,
          };
        } else if (r.status === 200) {
          results[r.index] = {
            index: r.index,
            outcome: 'replayed',
            status: 200,
            id: r.id!,
            state: r.state as NoticeState | undefined,
            idempotencyKey,
          };
        } else {
          results[r.index] = {
            index: r.index,
            outcome: 'refused',
            status: r.status,
            error: r.error ?? { code: `http_${r.status}`, message: `refused with ${r.status}` },
            idempotencyKey,
          };
        }
      }
      return results;
    },

    getNotice: (id, opts) => get<NoticeView>(`/v1/notices/${segment(id)}`, opts),

    getEvents: async (id, opts) => (await get<{ events: NoticeEvent[] }>(`/v1/notices/${segment(id)}/events`, opts)).events,

    async cancelNotice(id, opts = {}) {
      try {
        return (
          await call<NoticeView>({ method: 'POST', path: `/v1/notices/${segment(id)}/cancel`, idempotent: true, signal: opts.signal })
        ).value;
      } catch (error) {
        // An earlier attempt that got no answer may have canceled it: then the notice is as asked.
        const state = (error as { details?: { state?: unknown } }).details?.state;
        if (error instanceof HeraldApiError && error.code === 'invalid_state' && error.attempts > 1 && state === 'canceled')
          return client.getNotice(id, opts);
        throw error;
      }
    },

    listNotices,

    async *notices(filters = {}, opts = {}) {
      let cursor: string | undefined;
      do {
        const page = await listNotices(filters, { ...opts, cursor });
        yield* page.notices;
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
    },

    async waitFor(id, until) {
      const wanted: readonly string[] =
        'terminal' in until ? TERMINAL_STATES : typeof until.state === 'string' ? [until.state] : until.state;
      const deadline = Date.now() + (until.timeoutMs ?? 60_000);
      const opts = { signal: until.signal };
      for (;;) {
        const view = await client.getNotice(id, opts);
        if (wanted.includes(view.state)) return view;
        if (Date.now() >= deadline) throw new HeraldTimeoutError(view);
        await sleep(
          until.intervalMs ?? 1_000,
          until.signal,
          () =>
            new HeraldApiError({
              status: 0,
              code: 'aborted',
              message: `waiting for notice ${id}: aborted by the caller's signal`,
              cause: until.signal?.reason,
            }),
        );
      }
    },

    suppressions: {
      // Sent twice, the same suppression is left (its createdAt a moment later): safe to repeat.
      add: async (suppression, opts = {}) =>
        (await call<Suppression>({ method: 'POST', path: '/v1/suppressions', body: suppression, idempotent: true, signal: opts.signal }))
          .value,
      get: (channel, address, opts) => get<Suppression>(`/v1/suppressions/${channel}/${segment(address)}`, opts),
      remove: (channel, address, opts) => remove(`/v1/suppressions/${channel}/${segment(address)}`, opts),
    },

    // Each PUT makes a new policy version: not sent again after no answer.
    putRecipientPolicy: async (recipientId, policy, opts = {}) =>
      (
        await call<{ version: number }>({
          method: 'PUT',
          path: `/v1/recipients/${segment(recipientId)}/policy`,
          body: policy,
          idempotent: false,
          signal: opts.signal,
        })
      ).value,

    getRecipientPolicy: (recipientId, opts) => get<RecipientPolicy>(`/v1/recipients/${segment(recipientId)}/policy`, opts),

    stats: (period = {}, opts) => {
      const query = new URLSearchParams();
      if (period.from !== undefined) query.set('from', time(period.from));
      if (period.to !== undefined) query.set('to', time(period.to));
      const q = query.toString();
      return get<Stats>(`/v1/stats${q ? `?${q}` : ''}`, opts);
    },

    eventEndpoints: {
      create: async (endpoint, opts = {}) =>
        (
          await call<CreatedEventEndpoint>({
            method: 'POST',
            path: '/v1/event-endpoints',
            body: endpoint,
            idempotent: false,
            signal: opts.signal,
          })
        ).value,
      list: async (opts) => (await get<{ endpoints: EventEndpoint[] }>('/v1/event-endpoints', opts)).endpoints,
      delete: (id, opts) => remove(`/v1/event-endpoints/${segment(id)}`, opts),
      deliveries: async (id, opts) =>
        (await get<{ deliveries: EventDelivery[] }>(`/v1/event-endpoints/${segment(id)}/deliveries`, opts)).deliveries,
    },
  };
  return client;
}
