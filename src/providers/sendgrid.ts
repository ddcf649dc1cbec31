/**
 * Email through Twilio SendGrid, with the official `@sendgrid/mail` and `@sendgrid/client` SDKs.
 *
 * - Send: `POST /v3/mail/send`, Herald's key in `custom_args`; SendGrid answers 202 with the
 *   message's ID in the `X-Message-Id` header.
 * - Status: the Email Logs API (30 days of events, no add-on), not the Email Activity API
 *   (a paid add-on limited to 6 requests a minute). The logs know a message by its
 *   `sg_message_id`, which is the X-Message-Id followed by `.` and a suffix, and can be searched
 *   by recipient and time but not by that prefix: the first read of a message searches
 *   `to_email` + `sg_message_id_created_at` for it, then reads its events.
 * - A send in doubt: the same search, then each hit's `custom_args.herald_key` is compared;
 *   not found is "no such message" only once the attempt is older than the logs may lag.
 *
 * `setApiKey` resets the SDK's base URL to SendGrid's, so the configured URL is set after it. The
 * client's requests go through the adapter's own keep-alive agents (transport.ts), set as default
 * request options, which the SDK hands to axios.
 */
import sendgridClient from '@sendgrid/client';
import sendgridMail from '@sendgrid/mail';
import { classifySendgridError } from './classify.js';
import { createTransport } from './transport.js';
import { sendgridNotIndexedObservation, sendgridObservation, type SendgridLogMessage } from './normalize.js';
import {
  ProviderError,
  type EmailMessage,
  type EmailProvider,
  type MessageScope,
  type SearchWindow,
  type SendResult,
  type StatusObservation,
} from './types.js';

export interface SendgridProviderOptions {
  apiKey: string;
  from: string;
  /** `https://api.sendgrid.com`, or an emulator / proxy such as `http://127.0.0.1:4010`. */
  apiUrl: string;
  /** Bound of one HTTP attempt. */
  timeoutMs: number;
  /**
   * How long after a send the Email Logs may still not list it. A send in doubt not found
   * before its attempt is this old stays in doubt (the search throws) rather than being sent again.
   */
  logsLagMs: number;
}

/** The `custom_args` field that carries Herald's idempotency key. */
export const SENDGRID_IDEMPOTENCY_ARG = 'herald_key';
/** SendGrid's limit on a message's `custom_args`, in bytes of JSON. */
export const SENDGRID_CUSTOM_ARGS_BYTES = 10_000;
/** The most messages one Email Logs search returns (there are no pages). */
export const SENDGRID_LOGS_LIMIT = 1000;
/** How much earlier than Herald's `since` the logs are searched: clocks differ. */
const CLOCK_SKEW_MS = 5 * 60_000;
/**
 * The Email Logs lag assumed for the live service: SendGrid says "near real time" and publishes no
 * bound, so a send in doubt is sent again only once its attempt is this old and still not listed.
 */
export const SENDGRID_LOGS_LAG_MS = 30_000;
/** X-Message-Id → sg_message_id resolutions kept by one adapter. */
const RESOLVED_MAX = 10_000;

interface LogsSummary {
  sg_message_id?: unknown;
  status?: unknown;
}

interface LogsMessage extends SendgridLogMessage {
  sg_message_id?: string;
  custom_args?: Record<string, unknown> | null;
}

type Client = typeof sendgridClient;
type MailService = typeof sendgridMail;
/**
 * The SDKs' classes, for a client of Herald's own rather than their shared default instances
 * (their type declarations name the classes only as instance types of those defaults).
 */
const { Client } = sendgridClient as unknown as { Client: new () => Client };
const { MailService } = sendgridMail as unknown as { MailService: new () => MailService };

/** Creates the SendGrid email provider. */
export function createSendgridProvider(opts: SendgridProviderOptions): EmailProvider {
  if (!(opts.timeoutMs > 0)) throw new Error('sendgrid: timeoutMs must be a positive number of milliseconds');
  const url = new URL(opts.apiUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`sendgrid: apiUrl must be an http(s) URL, got ${opts.apiUrl}`);
  const client = new Client();
  client.setApiKey(opts.apiKey);
  client.setDefaultRequest('baseUrl', opts.apiUrl.replace(/\/+$/, ''));
  const transport = createTransport();
  // Axios options the SDK passes through; its type declares `httpsAgent` only.
  client.setDefaultRequest({ httpsAgent: transport.httpsAgent, httpAgent: transport.httpAgent } as unknown as Parameters<
    Client['setDefaultRequest']
  >[0]);
  const mail = new MailService();
  mail.setClient(client);
  mail.setTimeout(Math.ceil(opts.timeoutMs));
  const resolved = new Map<string, string>();

  const call = async <T>(request: () => Promise<T>): Promise<T> => {
    try {
      return await request();
    } catch (error) {
      throw classifySendgridError(error);
    }
  };

  /** The messages the Email Logs list for `to` created at or after `since` (newest first, at most the limit). */
  async function search(to: string, since: number | undefined): Promise<LogsSummary[]> {
    const conditions = [`to_email = ${quoted(to)}`];
    if (since !== undefined) {
      conditions.push(`sg_message_id_created_at >= TIMESTAMP "${new Date(Math.max(0, since - CLOCK_SKEW_MS)).toISOString()}"`);
    }
    const [, body] = await call(() =>
      client.request({ method: 'POST', url: '/v3/logs', body: { query: conditions.join(' AND '), limit: SENDGRID_LOGS_LIMIT } }),
    );
    const messages = (body as { messages?: unknown } | null)?.messages;
    if (!Array.isArray(messages)) throw new ProviderError('sendgrid: unparseable Email Logs search answer', { kind: 'server_error' });
    return messages as LogsSummary[];
  }

  /** One message of the Email Logs with its events; null when the logs do not show it (404). */
  async function logsMessage(sgMessageId: string): Promise<LogsMessage | null> {
    try {
      const [, body] = await call(() => client.request({ method: 'GET', url: `/v3/logs/${encodeURIComponent(sgMessageId)}` }));
      if (typeof body !== 'object' || body === null || !Array.isArray((body as LogsMessage).events)) {
        throw new ProviderError('sendgrid: unparseable Email Logs message', { kind: 'server_error' });
      }
      return body as LogsMessage;
    } catch (error) {
      if (error instanceof ProviderError && error.httpStatus === 404) return null;
      throw error;
    }
  }

  /** The sg_message_id of the message the send answered with `xMessageId`, once the logs list it. */
  async function resolve(xMessageId: string, scope: MessageScope | undefined): Promise<string | undefined> {
    if (isLogsId(xMessageId)) return xMessageId;
    const known = resolved.get(xMessageId);
    if (known !== undefined) return known;
    if (!scope) throw new Error('sendgrid: reading a status by X-Message-Id needs the recipient and the send time');
    const hit = (await search(scope.to, scope.since)).find(
      (m) => typeof m.sg_message_id === 'string' && m.sg_message_id.startsWith(`${xMessageId}.`),
    );
    if (hit === undefined) return undefined;
    const id = hit.sg_message_id as string;
    resolved.set(xMessageId, id);
    if (resolved.size > RESOLVED_MAX) resolved.delete(resolved.keys().next().value as string);
    return id;
  }

  return {
    name: 'sendgrid',

    close: () => transport.close(),

    async verify(): Promise<string> {
      const [, body] = await call(() => client.request({ method: 'GET', url: '/v3/scopes' }));
      const scopes = (body as { scopes?: unknown } | null)?.scopes;
      if (!Array.isArray(scopes)) throw new ProviderError('sendgrid: unparseable scopes answer', { kind: 'server_error' });
      if (!scopes.includes('mail.send')) {
        throw new ProviderError('sendgrid: the API key lacks the mail.send scope', { kind: 'server_error', httpStatus: 403 });
      }
      return `API key with ${scopes.length} scopes, mail.send included`;
    },

    async send(message: EmailMessage): Promise<SendResult> {
      const content = [message.text, message.html].some((c) => c !== undefined && c !== '');
      if (!content) throw new ProviderError('sendgrid: an email needs a text or an HTML body', { kind: 'rejected' });
      const [response] = await call(() =>
        mail.send({
          to: message.to,
          from: opts.from,
          subject: message.subject,
          ...(message.text ? { text: message.text } : {}),
          ...(message.html ? { html: message.html } : {}),
          customArgs: sendgridCustomArgs(message.idempotencyKey, message.metadata),
        } as Parameters<MailService['send']>[0]),
      );
      const header = response?.headers?.['x-message-id'];
      const id = Array.isArray(header) ? header[0] : header;
      if (typeof id !== 'string' || id === '') {
        // Accepted (2xx) but the answer is unusable: the send is in doubt.
        throw new ProviderError('sendgrid: send answered without an X-Message-Id', { kind: 'server_error' });
      }
      return { providerMessageId: id, providerStatus: String(response.statusCode) };
    },

    async status(providerMessageId: string, scope?: MessageScope): Promise<StatusObservation> {
      const id = await resolve(providerMessageId, scope);
      // Right after sending, the Email Logs do not list the message yet: accepted, so pending.
      if (id === undefined) return sendgridNotIndexedObservation();
      const message = await logsMessage(id);
      return message === null ? sendgridNotIndexedObservation() : sendgridObservation(message);
    },

    async findByIdempotencyKey(idempotencyKey: string, to: string, window?: SearchWindow): Promise<SendResult | null> {
      const hits = await search(to, window?.since);
      for (const hit of hits) {
        if (typeof hit.sg_message_id !== 'string') continue;
        const message = await logsMessage(hit.sg_message_id);
        if (message === null) {
          // Listed but not readable yet: it may be the one, so the send stays in doubt.
          throw new ProviderError(`sendgrid: ${hit.sg_message_id} is listed by the Email Logs but not readable yet`, {
            kind: 'server_error',
          });
        }
        if (message.custom_args?.[SENDGRID_IDEMPOTENCY_ARG] === idempotencyKey) {
          return { providerMessageId: hit.sg_message_id, providerStatus: String(message.status ?? hit.status ?? '') };
        }
      }
      if (hits.length >= SENDGRID_LOGS_LIMIT) {
        // The search was cut at its limit: the message may be beyond it.
        throw new ProviderError(`sendgrid: more than ${SENDGRID_LOGS_LIMIT} messages to this address; cannot rule the send out`, {
          kind: 'server_error',
        });
      }
      if (window !== undefined && window.lastAttemptAgeMs < opts.logsLagMs) {
        throw new ProviderError(
          `sendgrid: not in the Email Logs yet, which may lag ${opts.logsLagMs} ms behind a send; the send stays in doubt`,
          { kind: 'server_error' },
        );
      }
      return null;
    },
  };
}

/**
 * SendGrid `custom_args` for one send: Herald's key first, then the extra fields in their order
 * while the whole stays within SendGrid's 10,000 bytes; values are strings.
 */
export function sendgridCustomArgs(idempotencyKey: string, extra: Record<string, string> = {}): Record<string, string> {
  const args: Record<string, string> = { [SENDGRID_IDEMPOTENCY_ARG]: idempotencyKey };
  for (const [name, value] of Object.entries(extra)) {
    if (name === '' || name === SENDGRID_IDEMPOTENCY_ARG) continue;
    const next = { ...args, [name]: String(value) };
    if (Buffer.byteLength(JSON.stringify(next)) > SENDGRID_CUSTOM_ARGS_BYTES) continue;
    args[name] = String(value);
  }
  return args;
}

/** True for an Email Logs ID (`<X-Message-Id>.<suffix>`); an X-Message-Id has no dot. */
function isLogsId(id: string): boolean {
  return id.includes('.');
}

/** A string literal of the Email Logs query language. */
function quoted(value: string): string {
  if (!value.includes("'")) return `'${value}'`;
  if (!value.includes('"')) return `"${value}"`;
  throw new ProviderError(`sendgrid: cannot search the Email Logs for an address holding both quote marks`, { kind: 'rejected' });
}
