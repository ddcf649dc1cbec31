/**
 * SMS through Twilio, with the official `twilio` SDK (axios based).
 *
 * Transport choices, checked against the v6 sources:
 * - the base URL is the `api` domain's `baseUrl` (lib/base/Domain.js builds every URL from it,
 *   including `next_page_uri` when paging);
 * - BaseTwilio rewrites host names when `edge` or `region` is set (`localhost` would become
 *   `localhost.dublin.ie1.localhost`), and reads both from TWILIO_EDGE / TWILIO_REGION when
 *   not passed, so they are cleared after construction: `apiUrl` alone decides the host;
 * - the SDK's 429 auto-retry is off (Herald schedules its own retries), and `timeout` bounds
 *   each HTTP request (axios: a wall-clock timer until the answer starts, then socket idle);
 * - RestException keeps the body but not the headers, so a RequestClient subclass records
 *   each answer's status and `Retry-After` on the call's trace (see http-trace.ts);
 * - its axios instance is given the adapter's own keep-alive agents (transport.ts), for `http:`
 *   (emulators, proxies) as for `https:`: the SDK's own agent serves `https:` only.
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
   * HERALD_PUBLIC_URL, when Herald takes Twilio's status callbacks (SPEC §11): each send then
   * carries `StatusCallback: <publicUrl>/webhooks/twilio?notice=<noticeId>`.
   */
  publicUrl?: string;
}

/** The suffix of Herald's idempotency key of an SMS (`<noticeId>-sms`). */
const SMS_KEY_SUFFIX = '-sms';

const DEFAULT_PAGE_SIZE = 100;

/** The SDK's RequestClient, recording each answer's status and Retry-After on the current trace. */
class TracingRequestClient extends twilio.RequestClient {
  constructor(opts: RequestClient.RequestClientOptions, transport: ProviderTransport) {
    super(opts);
    this.axios.defaults.httpAgent = transport.httpAgent;
    this.axios.defaults.httpsAgent = transport.httpsAgent;
  }

  override async request<TData>(opts: RequestClient.RequestOptions<TData>): Promise<TwilioHttp.default<TData>> {
    // The SDK calls this synchronously within each method (and within `nextPage`): the issuing call's trace.
    const trace = issuingTrace();
    const response = await super.request<TData>(opts);
    const retryAfter: unknown = response.headers?.['retry-after'];
    recordResponse(trace, response.statusCode, typeof retryAfter === 'string' ? retryAfter : undefined);
    return response;
  }
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
    httpClient: new TracingRequestClient({ timeout, autoRetry: false }, transport),
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
