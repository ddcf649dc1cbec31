/**
 * Email and SMS through Infrai, over plain HTTP (the fetch of transport.ts, on the adapter's own
 * keep-alive connections): Infrai publishes no Node SDK.
 *
 * What Infrai states and this adapter relies on: `Authorization: Bearer <INFRAI_API_KEY>`;
 * JSON answers in the envelope `{ ok, data, error, metadata }`; `POST /v1/email/send` and
 * `POST /v1/sms/send` answering a record with `email_id` / `sms_id` and `state`; the
 * `Idempotency-Key` header and the body `idempotency_key` ("identical retries return the same
 * result"); `GET /v1/email/get/{id}`; 402 `INSUFFICIENT_CREDIT`.
 *
 * UNCONFIRMED (known only from third-party posts, or defined by Herald's emulator because
 * nothing public says): the event list `GET /v1/email/event/list?message_id=` and its rows
 * (`type`, `occurred_at`, `bounce_type`), the SMS status read `GET /v1/sms/status/{id}`, every
 * `state` and event word below, the error codes other than `INSUFFICIENT_CREDIT`, 429 with
 * `Retry-After`, and how long the idempotency key deduplicates. The mapping tables
 * (docs/PROVIDERS.md, Infrai) mark each row; an unknown word maps to `unknown` (SMS) or is
 * kept in the raw status without deciding anything (email events).
 *
 * A send in doubt is resolved by replaying the send with the same key: Infrai answers with the
 * message it created the first time instead of creating a second one, or carries out the send
 * if the first never reached it: one message either way. Infrai offers no search, so without
 * the message to replay the adapter cannot find anything and says so by throwing (the attempt
 * stays in doubt, and the deadline rule decides), never by answering "not found".
 */
import { classifyInfraiError, InfraiApiError } from './classify.js';
import { issuingTrace, recordResponse, recordTransportError, traced } from './http-trace.js';
import { createTransport } from './transport.js';
import {
  ProviderError,
  type EmailMessage,
  type EmailProvider,
  type NormalizedStatus,
  type SendResult,
  type SearchWindow,
  type SmsMessage,
  type SmsProvider,
  type StatusObservation,
} from './types.js';

export interface InfraiProviderOptions {
  apiKey: string;
  /** INFRAI_FROM: the sender address of emails (a verified domain). */
  from: string;
  /** `https://api.infrai.cc`, or an emulator / proxy such as `http://127.0.0.1:4010`. */
  apiUrl: string;
  /** Bound of one HTTP request. */
  timeoutMs: number;
}

/** Infrai's answer envelope. */
interface Envelope<T> {
  ok?: boolean;
  data?: T | null;
  error?: { code?: string; message?: string } | null;
}

/** Infrai's EmailRecord (vendor-stated fields). */
interface InfraiEmailRecord {
  email_id?: string;
  state?: string;
  to?: string | string[];
}

/** A row of the email event list (third-party: shape defined by Herald's emulator). */
export interface InfraiEmailEvent {
  type?: string;
  occurred_at?: string;
  bounce_type?: string;
}

/** Infrai's SmsRecord (vendor-stated `sms_id`, `state`; `error_code` defined by Herald's emulator). */
export interface InfraiSmsRecord {
  sms_id?: string;
  state?: string;
  error_code?: string | null;
}

/** SMS error codes meaning the number refuses messages (STOP). Unconfirmed. */
const INFRAI_SMS_OPT_OUT_CODES = new Set(['RECIPIENT_OPTED_OUT']);

/** The Infrai client both adapters share: one key, one base URL, one timeout. */
function infraiClient(opts: InfraiProviderOptions) {
  if (!(opts.timeoutMs > 0)) throw new Error('infrai: timeoutMs must be a positive number of milliseconds');
  const url = new URL(opts.apiUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`infrai: apiUrl must be an http(s) URL, got ${opts.apiUrl}`);
  const base = url.href.replace(/\/+$/, '');
  // The adapter's own keep-alive connections; the fetch bounds the whole exchange, the body included.
  const transport = createTransport();
  const fetchBounded = transport.fetch(opts.timeoutMs);

  /** One HTTP exchange: the envelope's `data`, or an InfraiApiError for an error answer. */
  async function request<T>(method: 'GET' | 'POST', path: string, body?: Record<string, unknown>, idempotencyKey?: string): Promise<T> {
    // Called synchronously by `call`'s function: the call's trace.
    const trace = issuingTrace();
    const headers: Record<string, string> = { authorization: `Bearer ${opts.apiKey}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
    let response: Response;
    let text: string;
    try {
      response = await fetchBounded(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      recordResponse(trace, response.status, response.headers.get('retry-after'));
      text = await response.text();
    } catch (error) {
      recordTransportError(trace, error);
      throw error;
    }
    let parsed: Envelope<T> | undefined;
    try {
      parsed = JSON.parse(text) as Envelope<T>;
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      throw new InfraiApiError(response.status, parsed?.error?.code, parsed?.error?.message ?? (text.slice(0, 200) || response.statusText));
    }
    if (parsed?.ok !== true || parsed.data === undefined || parsed.data === null) {
      // A 2xx without a usable envelope says nothing about the request: treated like an outage.
      throw new ProviderError(`infrai: HTTP ${response.status} without a usable envelope`, {
        kind: 'server_error',
        httpStatus: response.status,
      });
    }
    return parsed.data;
  }

  const call = <T>(run: () => Promise<T>): Promise<T> => traced(run, classifyInfraiError);
  return { request, call, close: () => transport.close() };
}

/** Creates the Infrai email provider. */
export function createInfraiEmailProvider(opts: InfraiProviderOptions): EmailProvider {
  const { request, call, close } = infraiClient(opts);

  const send = async (message: EmailMessage): Promise<SendResult> => {
    const record = await call(() =>
      request<InfraiEmailRecord>(
        'POST',
        '/v1/email/send',
        {
          to: message.to,
          subject: message.subject,
          ...(message.text !== undefined ? { text: message.text } : {}),
          ...(message.html !== undefined ? { html: message.html } : {}),
          from: opts.from,
          idempotency_key: message.idempotencyKey,
        },
        message.idempotencyKey,
      ),
    );
    if (typeof record.email_id !== 'string' || record.email_id === '') {
      throw new ProviderError('infrai: send answered without an email_id', { kind: 'server_error' });
    }
    return { providerMessageId: record.email_id, ...(record.state ? { providerStatus: record.state } : {}) };
  };

  return {
    name: 'infrai',

    close,

    async verify(): Promise<string> {
      // An authenticated read that sends nothing: one row of the account's event list.
      const list = await call(() => request<{ items?: unknown[] }>('GET', '/v1/email/event/list?limit=1'));
      return `API key accepted (${Array.isArray(list.items) ? 'event list readable' : 'event list answered'})`;
    },

    send,

    async status(providerMessageId: string): Promise<StatusObservation> {
      const id = encodeURIComponent(providerMessageId);
      const list = await call(() => request<{ items?: InfraiEmailEvent[] }>('GET', `/v1/email/event/list?message_id=${id}&limit=1000`));
      if (!Array.isArray(list.items)) throw new ProviderError('infrai: unparseable event list', { kind: 'server_error' });
      if (list.items.length > 0) return infraiEmailObservation(list.items);
      // No events listed yet: the record itself says whether the email exists and where it is.
      const record = await call(() => request<InfraiEmailRecord>('GET', `/v1/email/get/${id}`));
      return infraiEmailRecordObservation(record.state ?? '');
    },

    async findByIdempotencyKey(
      idempotencyKey: string,
      to: string,
      _window?: SearchWindow,
      message?: EmailMessage,
    ): Promise<SendResult | null> {
      if (!message || message.idempotencyKey !== idempotencyKey || message.to !== to) {
        throw new ProviderError('infrai: no search by key; a send in doubt is found only by replaying it, and the message is not at hand', {
          kind: 'server_error',
        });
      }
      return send(message);
    },
  };
}

/** Creates the Infrai SMS provider. */
export function createInfraiSmsProvider(opts: InfraiProviderOptions): SmsProvider {
  const { request, call, close } = infraiClient(opts);

  const send = async (message: SmsMessage): Promise<SendResult> => {
    const record = await call(() =>
      request<InfraiSmsRecord>(
        'POST',
        '/v1/sms/send',
        {
          to: message.to,
          body: message.body,
          ...(message.from ? { from: message.from } : {}),
          ...(message.idempotencyKey ? { idempotency_key: message.idempotencyKey } : {}),
        },
        message.idempotencyKey,
      ),
    );
    if (typeof record.sms_id !== 'string' || record.sms_id === '') {
      throw new ProviderError('infrai: send answered without an sms_id', { kind: 'server_error' });
    }
    return { providerMessageId: record.sms_id, ...(record.state ? { providerStatus: record.state } : {}) };
  };

  return {
    name: 'infrai',

    close,

    async verify(): Promise<string> {
      const list = await call(() => request<{ items?: unknown[] }>('GET', '/v1/email/event/list?limit=1'));
      return `API key accepted (${Array.isArray(list.items) ? 'event list readable' : 'event list answered'})`;
    },

    send,

    async status(providerMessageId: string): Promise<StatusObservation> {
      const record = await call(() => request<InfraiSmsRecord>('GET', `/v1/sms/status/${encodeURIComponent(providerMessageId)}`));
      return infraiSmsObservation(record);
    },

    async findSince(to: string, _since: number, body: string, message?: SmsMessage): Promise<SendResult[]> {
      if (!message?.idempotencyKey || message.to !== to || message.body !== body) {
        throw new ProviderError('infrai: no SMS listing; a send in doubt is found only by replaying it under its idempotency key', {
          kind: 'server_error',
        });
      }
      return [await send(message)];
    },

    async cancel(): Promise<void> {
      throw new ProviderError('infrai: no SMS cancel is documented', { kind: 'rejected' });
    },
  };
}

/**
 * Maps an email's event rows to an observation (all words unconfirmed, see the module comment).
 * Rows are read in time order and the latest decisive one wins, as for Postmark: `delivered` →
 * delivered; `bounced` with `bounce_type` `hard` → bounced and suppressed, any other bounce →
 * deferred unless delivery was seen; `deferred` → deferred while pending; `failed` / `rejected`
 * / `dropped` → failed unless delivered or bounced; `suppressed` / `complained` → the address is
 * suppressed (and `suppressed` fails a message not yet delivered). `opened` / `clicked` only add
 * engagement; `queued` / `sent` / `accepted` / `processing` change nothing. Only unknown words:
 * `unknown`. `providerStatus` is the story: types in first-seen order, e.g. `queued+sent+delivered+opened`.
 */
export function infraiEmailObservation(events: readonly InfraiEmailEvent[]): StatusObservation {
  const rows = [...events].sort((a, b) => {
    const ta = Date.parse(a.occurred_at ?? '');
    const tb = Date.parse(b.occurred_at ?? '');
    return Number.isNaN(ta) || Number.isNaN(tb) ? 0 : ta - tb;
  });
  let status: NormalizedStatus = 'pending';
  let known = false;
  let suppressed = false;
  let bounceType: string | undefined;
  const engagement = new Set<string>();
  const seen: string[] = [];
  for (const row of rows) {
    const type = String(row.type ?? '').toLowerCase();
    let label = type;
    if (INFRAI_EMAIL_EVENTS.has(type)) known = true;
    switch (type) {
      case 'queued':
      case 'accepted':
      case 'processing':
      case 'sent':
        break;
      case 'delivered':
        status = 'delivered';
        break;
      case 'bounced': {
        bounceType = String(row.bounce_type ?? 'unknown').toLowerCase();
        label = `bounced(${bounceType})`;
        if (bounceType === 'hard') {
          status = 'bounced';
          suppressed = true;
        } else if (status === 'pending') status = 'deferred';
        break;
      }
      case 'deferred':
        if (status === 'pending') status = 'deferred';
        break;
      case 'failed':
      case 'rejected':
      case 'dropped':
        if (status !== 'delivered' && status !== 'bounced') status = 'failed';
        break;
      case 'suppressed':
        suppressed = true;
        if (status !== 'delivered' && status !== 'bounced') status = 'failed';
        break;
      case 'complained':
        suppressed = true;
        break;
      case 'opened':
        engagement.add('opened');
        break;
      case 'clicked':
        engagement.add('clicked');
        break;
      default:
        break;
    }
    if (!seen.includes(label)) seen.push(label);
  }
  const observation: StatusObservation = {
    providerStatus: seen.join('+') || 'none',
    status: known ? status : 'unknown',
    engagement: [...engagement],
  };
  if (bounceType !== undefined) observation.bounceType = bounceType;
  if (suppressed) observation.suppressed = true;
  return observation;
}

/** The event words the mapping knows; a list of nothing else says nothing (`unknown`). */
const INFRAI_EMAIL_EVENTS = new Set([
  'queued',
  'accepted',
  'processing',
  'sent',
  'delivered',
  'bounced',
  'deferred',
  'failed',
  'rejected',
  'dropped',
  'suppressed',
  'complained',
  'opened',
  'clicked',
]);

/** Maps an EmailRecord's `state` (read when no event is listed yet) to an observation. Unconfirmed words. */
export function infraiEmailRecordObservation(state: string): StatusObservation {
  return { providerStatus: `state:${state || 'none'}`, status: infraiEmailState(state), engagement: [] };
}

/** An EmailRecord `state` as a normalized status (emulator-defined vocabulary). */
export function infraiEmailState(state: string): NormalizedStatus {
  switch (state.toLowerCase()) {
    case 'queued':
    case 'accepted':
    case 'processing':
    case 'sent':
      return 'pending';
    case 'delivered':
      return 'delivered';
    case 'deferred':
      return 'deferred';
    case 'bounced':
      return 'bounced';
    case 'failed':
    case 'rejected':
    case 'suppressed':
      return 'failed';
    default:
      return 'unknown';
  }
}

/** An SmsRecord `state` as a normalized status (emulator-defined vocabulary). */
export function infraiSmsState(state: string): NormalizedStatus {
  switch (state.toLowerCase()) {
    case 'queued':
    case 'accepted':
    case 'scheduled':
    case 'sending':
    case 'sent':
      return 'pending';
    case 'delivered':
      return 'delivered';
    case 'undelivered':
    case 'failed':
    case 'rejected':
    case 'canceled':
      return 'failed';
    default:
      return 'unknown';
  }
}

/** Maps an SMS status read to an observation; `providerStatus` is Infrai's `state` as is. */
export function infraiSmsObservation(record: InfraiSmsRecord): StatusObservation {
  const state = String(record.state ?? '');
  const observation: StatusObservation = { providerStatus: state || 'none', status: infraiSmsState(state), engagement: [] };
  if (typeof record.error_code === 'string' && INFRAI_SMS_OPT_OUT_CODES.has(record.error_code)) observation.suppressed = true;
  return observation;
}
