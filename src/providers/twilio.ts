/**
 * SMS through Twilio, with the official `twilio` SDK.
 *
 * Transport choices, checked against the v6 sources:
 * - the base URL is the `api` domain's `baseUrl` (lib/base/Domain.js builds every URL from it,
 *   including `next_page_uri` when paging);
 * - BaseTwilio rewrites host names when `edge` or `region` is set (`localhost` would become
 *   `localhost.dublin.ie1.localhost`), and reads both from TWILIO_EDGE / TWILIO_REGION when
 *   not passed, so they are cleared after construction: `apiUrl` alone decides the host;
 * - the SDK's HTTP client is replaced (its `httpClient` option) by `TransportRequestClient`,
 *   which makes the requests RequestClient would, over the adapter's own keep-alive connections
 *   (transport.ts) instead of axios, whose per-request work cost more CPU than the rest of a
 *   Twilio call; no 429 auto-retry (Herald schedules its own retries), no redirects, and
 *   `timeout` bounds each HTTP request from its start to the answer's last byte;
 * - RestException keeps the body but not the headers, so that client records each answer's
 *   status and `Retry-After` on the call's trace (see http-trace.ts).
 */
import twilio from 'twilio';
import type RequestClient from 'twilio/lib/base/RequestClient.js';
import type TwilioHttp from 'twilio/lib/http/response.js';
import type { MessageInstance } from 'twilio/lib/rest/api/v2010/account/message.js';
import { classifyTwilioError } from './classify.js';
import { issuingTrace, recordResponse, traced, type Issue } from './http-trace.js';
import { createTransport, type ProviderTransport } from './transport.js';
import { twilioStatusCallbackUrl } from '../webhooks/twilio.js';
import { twilioObservation } from './normalize.js';
import type { SendResult, SmsMessage, SmsProvider, StatusObservation } from './types.js';

export interface TwilioProviderOptions {
  accountSid: string;
  authToken: string;
  /** Default sender number; at least one of `from` and `messagingServiceSid` is required. */
  from?: string;
  messagingServiceSid?: string;
  /** `https://api.twilio.com`, or an emulator / proxy such as `http://127.0.0.1:4010`. */
  apiUrl: string;
  /** Bound of one HTTP request (each page of a listing is one request). */
  timeoutMs: number;
  /** Page size when listing messages in `findSince` (Twilio allows up to 1000). */
  pageSize?: number;
  /**
   * HERALD_PUBLIC_URL, when Herald takes Twilio's status callbacks: each send then
   * carries `StatusCallback: <publicUrl>/webhooks/twilio?notice=<noticeId>`.
   */
  publicUrl?: string;
}

/** The suffix of Herald's idempotency key of an SMS (`<noticeId>-sms`). */
const SMS_KEY_SUFFIX = '-sms';

const DEFAULT_PAGE_SIZE = 100;

/**
 * The SDK's HTTP client over the adapter's transport. It does what the SDK's RequestClient does
 * with a request (v6 `lib/base/RequestClient.js`): basic auth from the username and password (or
 * the auth strategy), the body form-encoded or JSON as its Content-Type says, the query string
 * with repeated keys for lists, the SDK's headers as they are; and answers `{ statusCode, body,
 * headers }` with the body as text, which the SDK parses (Version, Page and the exceptions all
 * take text). It records each answer's status and Retry-After on the issuing call's trace.
 */
class TransportRequestClient extends twilio.RequestClient {
  constructor(
    private readonly transport: ProviderTransport,
    private readonly timeoutMs: number,
  ) {
    super({ timeout: timeoutMs, autoRetry: false });
  }

  override async request<TData>(opts: RequestClient.RequestOptions<TData>): Promise<TwilioHttp.default<TData>> {
    // The SDK calls this synchronously within each method (and within `nextPage`): the issuing call's trace.
    const trace = issuingTrace();
    if (!opts.method) throw new Error('http method is required');
    if (!opts.uri) throw new Error('uri is required');
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(opts.headers ?? {})) if (value !== undefined) headers[name] = String(value);
    if (opts.username && opts.password) {
      headers.Authorization = `Basic ${Buffer.from(`${opts.username}:${opts.password}`).toString('base64')}`;
    } else if (opts.authStrategy) {
      headers.Authorization = await opts.authStrategy.getAuthString();
    }
    const url = new URL(opts.uri);
    if (opts.params) for (const [name, value] of formEntries(opts.params)) url.searchParams.append(name, value);
    let body: Buffer | undefined;
    const contentType = headers['Content-Type'];
    if (opts.data !== undefined && opts.data !== null) {
      if (contentType === 'application/x-www-form-urlencoded') body = Buffer.from(new URLSearchParams(formEntries(opts.data)).toString());
      else if (contentType === 'application/json') body = Buffer.from(JSON.stringify(opts.data));
    }
    const answer = await this.transport.exchange(url, { method: opts.method.toUpperCase(), headers, body }, opts.timeout ?? this.timeoutMs);
    const retryAfter = answer.headers['retry-after'];
    recordResponse(trace, answer.status, typeof retryAfter === 'string' ? retryAfter : undefined);
    return {
      statusCode: answer.status,
      body: answer.body.toString('utf8'),
      headers: answer.headers,
    } as unknown as TwilioHttp.default<TData>;
  }
}

/**
 * Request parameters as form fields, as the SDK's `qs.stringify(data, { arrayFormat: 'repeat' })`
 * writes them: an array repeats its key, a date is written in ISO form, null as an empty value. The SDK hands over flat
 * parameters (it serializes dates, booleans and lists itself); a nested object is refused rather
 * than written in a form Twilio would not read.
 */
function formEntries(params: object): [string, string][] {
  const entries: [string, string][] = [];
  const add = (name: string, value: unknown) => {
    if (value === undefined) return;
    if (value === null) entries.push([name, '']);
    else if (value instanceof Date) entries.push([name, value.toISOString()]);
    else if (typeof value === 'object') throw new TypeError(`twilio: the request parameter ${name} is not flat`);
    else entries.push([name, String(value)]);
  };
  for (const [name, value] of Object.entries(params)) {
    if (Array.isArray(value)) for (const item of value) add(name, item);
    else add(name, value);
  }
  return entries;
}

/** One page of a message listing, as the SDK's MessagePage and its base Page both are. */
interface MessagesPage {
  instances: MessageInstance[];
  nextPage(): Promise<MessagesPage> | undefined;
}

/** Creates the Twilio SMS provider. */
export function createTwilioProvider(opts: TwilioProviderOptions): SmsProvider {
  if (!opts.from && !opts.messagingServiceSid) {
    throw new Error('twilio: a sender is required (from or messagingServiceSid)');
  }
  if (!(opts.timeoutMs > 0)) throw new Error('twilio: timeoutMs must be a positive number of milliseconds');
  const timeout = Math.ceil(opts.timeoutMs);
  const transport = createTransport();
  const client = twilio(opts.accountSid, opts.authToken, {
    httpClient: new TransportRequestClient(transport, timeout),
    autoRetry: false,
    timeout,
  });
  client.api.baseUrl = new URL(opts.apiUrl).href.replace(/\/+$/, '');
  client.edge = undefined;
  client.region = undefined;
  const pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
  const call = <T>(request: (issue: Issue) => Promise<T>): Promise<T> => traced(request, classifyTwilioError);

  return {
    name: 'twilio',

    close: () => transport.close(),

    async verify(): Promise<string> {
      const account = await call(() => client.api.v2010.accounts(opts.accountSid).fetch());
      return `account "${account.friendlyName}" (${account.status})`;
    },

    async send(message: SmsMessage): Promise<SendResult> {
      const from = message.from ?? opts.from;
      const statusCallback = statusCallbackUrl(opts.publicUrl, message.idempotencyKey);
      const created = await call(() =>
        client.messages.create({
          to: message.to,
          body: message.body,
          ...(from ? { from } : {}),
          ...(opts.messagingServiceSid ? { messagingServiceSid: opts.messagingServiceSid } : {}),
          ...(statusCallback ? { statusCallback } : {}),
        }),
      );
      return { providerMessageId: created.sid, providerStatus: created.status };
    },

    async status(providerMessageId: string): Promise<StatusObservation> {
      const message = await call(() => client.messages(providerMessageId).fetch());
      return twilioObservation({ status: message.status, errorCode: message.errorCode });
    },

    async findSince(to: string, since: number, body: string): Promise<SendResult[]> {
      // date_created has second precision: a message created in the same second as `since`
      // shows an earlier time than `since` itself.
      const sinceSecond = Math.floor(since / 1000) * 1000;
      return call(async (issue) => {
        const found: SendResult[] = [];
        // Every page is read: a listing is ordered by date sent, which a queued message does not
        // have yet, so creation order cannot be relied on to stop early.
        let page: MessagesPage | undefined = await client.messages.page({ to, pageSize });
        while (page) {
          for (const message of page.instances) {
            if (message.to === to && message.body === body && createdAt(message.dateCreated) >= sinceSecond) {
              found.push({ providerMessageId: message.sid, providerStatus: message.status });
            }
          }
          const current: MessagesPage = page;
          page = await issue(() => current.nextPage());
        }
        return found;
      });
    },

    async cancel(providerMessageId: string): Promise<void> {
      await call(() => client.messages(providerMessageId).update({ status: 'canceled' }));
    },
  };
}

/** The StatusCallback URL of an SMS whose key names its notice, when Herald takes the callbacks. */
function statusCallbackUrl(publicUrl: string | undefined, idempotencyKey: string | undefined): string | undefined {
  if (publicUrl === undefined || idempotencyKey === undefined || !idempotencyKey.endsWith(SMS_KEY_SUFFIX)) return undefined;
  return twilioStatusCallbackUrl(publicUrl, idempotencyKey.slice(0, -SMS_KEY_SUFFIX.length));
}

/** The SDK parses `date_created` into a Date, or leaves the string when it cannot. */
function createdAt(value: Date | string | null | undefined): number {
  if (value instanceof Date) return value.getTime();
  const parsed = Date.parse(value ?? '');
  return Number.isNaN(parsed) ? Number.NEGATIVE_INFINITY : parsed;
}
