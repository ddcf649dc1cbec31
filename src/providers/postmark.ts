/**
 * Email through Postmark, with the official `postmark` SDK (fetch based).
 *
 * The SDK is handed a `fetch` over the adapter's own keep-alive connections (transport.ts),
 * which also covers two details the SDK does not:
 * - it converts `timeout` (seconds) to `AbortSignal.timeout(timeout * 1000)`, which throws a
 *   RangeError in Node when the product is not an integer (1001 ms → 1.001 s → 1000.9999999999999);
 *   so the SDK is given whole seconds, its per-request signal is left out
 *   (`withoutSdkTimeoutSignal`), and the fetch enforces `timeoutMs` exactly;
 * - it drops response headers and reduces network failures to a message; the fetch records the
 *   `Retry-After` header and the original error on the trace of the call (see http-trace.ts).
 */
import { ServerClient } from 'postmark';
import { sha256Hex } from '../digest.js';
import { classifyPostmarkError } from './classify.js';
import { issuingTrace, recordResponse, recordTransportError, traced } from './http-trace.js';
import { createTransport } from './transport.js';
import {
  postmarkBounceIds,
  postmarkNotIndexedObservation,
  postmarkObservation,
  type PostmarkBounce,
  type PostmarkDetails,
} from './normalize.js';
import { ProviderError, type EmailMessage, type EmailProvider, type SendResult, type StatusObservation } from './types.js';

export interface PostmarkProviderOptions {
  serverToken: string;
  from: string;
  messageStream: string;
  /** `https://api.postmarkapp.com`, or an emulator / proxy such as `http://127.0.0.1:4010`. */
  apiUrl: string;
  /** Bound of one HTTP attempt. */
  timeoutMs: number;
}

/** Postmark's Metadata limits: fields per message, characters per field name and per value. */
export const POSTMARK_METADATA_LIMITS = { fields: 10, nameLength: 20, valueLength: 80 } as const;

/** The Metadata field that carries Herald's idempotency key (searchable as `metadata_herald_key`). */
export const IDEMPOTENCY_METADATA_FIELD = 'herald_key';

const NOT_INDEXED_ERROR_CODE = 701;
const SEARCH_PAGE_SIZE = 100;
/** Postmark refuses searches where count + offset exceeds 10,000. */
const SEARCH_WINDOW = 10_000;

/** Creates the Postmark email provider. */
export function createPostmarkProvider(opts: PostmarkProviderOptions): EmailProvider {
  if (!(opts.timeoutMs > 0)) throw new Error('postmark: timeoutMs must be a positive number of milliseconds');
  const transport = createTransport();
  const client = new ServerClient(opts.serverToken, {
    ...postmarkEndpoint(opts.apiUrl),
    timeout: Math.ceil(opts.timeoutMs / 1000),
    fetch: tracedFetch(transport.fetch(opts.timeoutMs)),
  });
  withoutSdkTimeoutSignal(client);
  const call = <T>(request: () => Promise<T>): Promise<T> => traced(request, classifyPostmarkError);

  async function lookUpBounces(details: PostmarkDetails): Promise<Map<string, PostmarkBounce>> {
    const bounces = new Map<string, PostmarkBounce>();
    await Promise.all(
      postmarkBounceIds(details).map(async (id) => {
        try {
          const bounce = await call(() => client.getBounce(Number(id)));
          if (typeof bounce?.Type === 'string') bounces.set(id, bounce);
        } catch (error) {
          // A bounce Postmark cannot show (gone, or not visible yet) counts as soft; anything
          // else (timeout, outage) fails the status read so that it is retried.
          if (!(error instanceof ProviderError && error.kind === 'rejected')) throw error;
        }
      }),
    );
    return bounces;
  }

  return {
    name: 'postmark',

    close: () => transport.close(),

    async verify(): Promise<string> {
      const server = await call(() => client.getServer());
      return `server "${server.Name}"`;
    },

    async send(message: EmailMessage): Promise<SendResult> {
      const answer = await call(() =>
        client.sendEmail({
          From: opts.from,
          To: message.to,
          Subject: message.subject,
          TextBody: message.text,
          HtmlBody: message.html,
          MessageStream: opts.messageStream,
          Metadata: postmarkMetadata(message.idempotencyKey, message.metadata),
        }),
      );
      if (typeof answer?.MessageID !== 'string' || answer.MessageID === '') {
        // The request was accepted (2xx) but the answer is unusable: the send is in doubt.
        throw new ProviderError('postmark: send answered without a MessageID', { kind: 'server_error' });
      }
      return { providerMessageId: answer.MessageID };
    },

    async status(providerMessageId: string): Promise<StatusObservation> {
      let details: PostmarkDetails;
      try {
        details = (await call(() => client.getOutboundMessageDetails(providerMessageId))) as PostmarkDetails;
      } catch (error) {
        // Right after sending, Postmark has not indexed the message yet: accepted, so pending.
        if (error instanceof ProviderError && error.httpStatus === 422 && error.providerCode === NOT_INDEXED_ERROR_CODE) {
          return postmarkNotIndexedObservation();
        }
        throw error;
      }
      if (typeof details !== 'object' || details === null || !Array.isArray(details.MessageEvents)) {
        throw new ProviderError('postmark: unparseable message details', { kind: 'server_error' });
      }
      return postmarkObservation(details, await lookUpBounces(details));
    },

    async findByIdempotencyKey(idempotencyKey: string, to: string): Promise<SendResult | null> {
      const wanted = idempotencyMetadataValue(idempotencyKey);
      const recipient = to.trim().toLowerCase();
      for (let offset = 0; offset + SEARCH_PAGE_SIZE <= SEARCH_WINDOW; offset += SEARCH_PAGE_SIZE) {
        const page = await call(() =>
          client.getOutboundMessages({
            count: SEARCH_PAGE_SIZE,
            offset,
            recipient: to,
            [`metadata_${IDEMPOTENCY_METADATA_FIELD}`]: wanted,
          }),
        );
        if (!Array.isArray(page?.Messages)) {
          throw new ProviderError('postmark: unparseable message search answer', { kind: 'server_error' });
        }
        // The filters are Postmark's; check both again so a looser server-side match cannot mislead.
        const match = page.Messages.find(
          (m) =>
            m.Metadata?.[IDEMPOTENCY_METADATA_FIELD] === wanted && (m.Recipients ?? []).some((r) => r.trim().toLowerCase() === recipient),
        );
        if (match) return { providerMessageId: match.MessageID, providerStatus: match.Status };
        if (page.Messages.length < SEARCH_PAGE_SIZE || offset + SEARCH_PAGE_SIZE >= Number(page.TotalCount)) break;
      }
      return null;
    },
  };
}

/**
 * Herald's key as stored in Metadata: itself when it fits the 80-character value limit,
 * otherwise `sha256:<hex>` of it, so that any key can still be stored and searched.
 */
export function idempotencyMetadataValue(idempotencyKey: string): string {
  if (idempotencyKey.length <= POSTMARK_METADATA_LIMITS.valueLength) return idempotencyKey;
  return `sha256:${sha256Hex(idempotencyKey)}`;
}

/**
 * Postmark Metadata for one send: Herald's key first, then at most 9 extra fields in their
 * order; extra fields with an empty or over-long (> 20) name, or named like Herald's key, are
 * dropped, values are cut to 80 characters. Postmark would refuse the whole send otherwise.
 */
export function postmarkMetadata(idempotencyKey: string, extra: Record<string, string> = {}): Record<string, string> {
  const metadata: Record<string, string> = { [IDEMPOTENCY_METADATA_FIELD]: idempotencyMetadataValue(idempotencyKey) };
  let fields = 1;
  for (const [name, value] of Object.entries(extra)) {
    if (fields >= POSTMARK_METADATA_LIMITS.fields) break;
    if (name === '' || name.length > POSTMARK_METADATA_LIMITS.nameLength || name === IDEMPOTENCY_METADATA_FIELD) continue;
    metadata[name] = String(value).slice(0, POSTMARK_METADATA_LIMITS.valueLength);
    fields++;
  }
  return metadata;
}

/** The SDK builds its base URL as `${useHttps ? 'https' : 'http'}://${requestHost}`. */
function postmarkEndpoint(apiUrl: string): { useHttps: boolean; requestHost: string } {
  const url = new URL(apiUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`postmark: apiUrl must be an http(s) URL, got ${apiUrl}`);
  }
  return { useHttps: url.protocol === 'https:', requestHost: url.host + url.pathname.replace(/\/+$/, '') };
}

/**
 * The SDK hands each request an `AbortSignal.timeout` of its whole-second `timeout`; the
 * transport's fetch already bounds each exchange to `timeoutMs`, so the SDK's signal (a timer and
 * an abort signal per request, for a bound that never comes first) is left out. Should an SDK
 * version build its signal elsewhere, it is simply kept: the bound stays the transport's.
 */
function withoutSdkTimeoutSignal(client: ServerClient): void {
  const http = (client as unknown as { httpClient?: { buildTimeoutSignal?: unknown } }).httpClient;
  if (http && typeof http.buildTimeoutSignal === 'function') http.buildTimeoutSignal = () => undefined;
}

/**
 * A fetch that records each answer's status and Retry-After, and transport failures, on the trace
 * of the call that issued it (the SDK calls its fetch synchronously within each method).
 */
function tracedFetch(bounded: typeof fetch): typeof fetch {
  return async (input, init) => {
    const trace = issuingTrace();
    try {
      const response = await bounded(input, init);
      recordResponse(trace, response.status, response.headers.get('retry-after'));
      return response;
    } catch (error) {
      recordTransportError(trace, error);
      throw error;
    }
  };
}
