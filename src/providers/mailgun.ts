/**
 * Email through Mailgun, with the official `mailgun.js` SDK (axios inside, bundled).
 *
 * - Send: `POST /v3/{domain}/messages`, Herald's key in the user variable `v:herald_key`,
 *   which comes back on every event as `user-variables.herald_key`.
 * - Status: the message's log (Logs API, `POST /v1/analytics/logs` filtered on the domain and the
 *   `message-id`, the id without the angle brackets the send answer puts around it), newest
 *   first. The Events API it replaces is deprecated, and the SDK warns at every read of it.
 * - A send in doubt: the `accepted` log items to the recipient, newest first, matched on the
 *   user variable (Mailgun has no filter on user variables).
 *
 * Two SDK traps are handled in `classifyMailgunError`: a request that got no answer (timeout,
 * refused connection) becomes an `APIError` with status 400 and the axios code as its message,
 * and response headers are dropped, so a 429's retry time is read from Mailgun's message text.
 *
 * The SDK takes no HTTP agent: its request provider's `makeRequest` spreads the data it is given
 * into the axios request, so the adapter's keep-alive agents (transport.ts) are added there.
 */
import FormData from 'form-data';
import Mailgun from 'mailgun.js';
import { sha256Hex } from '../digest.js';
import { classifyMailgunError } from './classify.js';
import { traced } from './http-trace.js';
import { createTransport, type ProviderTransport } from './transport.js';
import { mailgunObservation, type MailgunEvent } from './normalize.js';
import { ProviderError, type EmailMessage, type EmailProvider, type SendResult, type StatusObservation } from './types.js';

export interface MailgunProviderOptions {
  apiKey: string;
  /** The sending domain (MAILGUN_DOMAIN), part of every API path. */
  domain: string;
  from: string;
  /** `https://api.mailgun.net` (`https://api.eu.mailgun.net` in the EU), or an emulator / proxy. */
  apiUrl: string;
  /** Bound of one HTTP attempt. */
  timeoutMs: number;
}

/** The user variable that carries Herald's idempotency key (`v:herald_key`). */
export const MAILGUN_KEY_VARIABLE = 'herald_key';

/** Mailgun limits all `o:`, `h:` and `v:` options of one message to 16 kB together. */
const OPTIONS_LIMIT_BYTES = 16_000;
/** Longest user-variable value Herald sends; a longer key is sent as its SHA-256. */
const KEY_VALUE_LIMIT = 200;
/** Log items per page (the Logs API's maximum). */
const LOGS_PAGE_SIZE = 100;
/** Pages of `accepted` items read while looking for a send in doubt; past them the search fails rather than guess. */
const SEARCH_PAGES = 60;
/** Pages of one message's items read by a status read. */
const STATUS_PAGES = 15;
/** Mailgun's clock may run ahead of Herald's: the windows end a little in the future. */
const CLOCK_SKEW_MS = 60 * 1000;
/**
 * How far back the windows reach: the Logs API wants a start, and Mailgun keeps a message's log
 * for days to weeks by plan (30 days at most), so older items are gone anyway.
 */
const LOGS_LOOKBACK_MS = 30 * 24 * 60 * 60 * 1000;

/** Creates the Mailgun email provider. */
export function createMailgunProvider(opts: MailgunProviderOptions): EmailProvider {
  if (!(opts.timeoutMs > 0)) throw new Error('mailgun: timeoutMs must be a positive number of milliseconds');
  if (opts.domain.trim() === '' || opts.domain.includes('/'))
    throw new Error(`mailgun: domain must be a domain name, got "${opts.domain}"`);
  const url = new URL(opts.apiUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`mailgun: apiUrl must be an http(s) URL, got ${opts.apiUrl}`);
  const client = new Mailgun(FormData).client({
    username: 'api',
    key: opts.apiKey,
    url: opts.apiUrl.replace(/\/+$/, ''),
    timeout: Math.ceil(opts.timeoutMs),
  });
  const transport = createTransport();
  useAgents(client, transport);
  const domain = opts.domain;
  const call = <T>(request: () => Promise<T>): Promise<T> => traced(request, classifyMailgunError);

  /**
   * Reads the domain's log items that meet `filter` page by page, newest first, until `stop` is
   * satisfied, the pages run out, or `maxPages`. Every page asks the same window and filter,
   * with the token of the page before.
   */
  async function readLogs(
    filter: Record<string, string>,
    events: string[] | undefined,
    maxPages: number,
    stop: (items: MailgunEventItem[]) => boolean,
  ): Promise<{ items: MailgunEventItem[]; complete: boolean }> {
    const now = Date.now();
    const query: LogsQuery = {
      start: new Date(now - LOGS_LOOKBACK_MS),
      end: new Date(now + CLOCK_SKEW_MS),
      ...(events ? { events } : {}),
      filter: {
        AND: Object.entries({ domain, ...filter }).map(([attribute, value]) => ({
          attribute,
          comparator: '=',
          values: [{ label: value, value }],
        })),
      },
      pagination: { sort: 'timestamp:desc', limit: LOGS_PAGE_SIZE },
    };
    const items: MailgunEventItem[] = [];
    let token: string | undefined;
    for (let n = 0; n < maxPages; n++) {
      const page: LogsQuery = token === undefined ? query : { ...query, pagination: { ...query.pagination, token } };
      const answer = await call(() => client.logs.list(page));
      if (!Array.isArray(answer?.items)) throw new ProviderError('mailgun: unparseable logs answer', { kind: 'server_error' });
      const got = answer.items.map(asEvent);
      items.push(...got);
      if (stop(got)) return { items, complete: true };
      // A page short of the limit, or one without a next token, is the last one.
      const next = answer.pagination?.next;
      if (got.length < LOGS_PAGE_SIZE || typeof next !== 'string' || next === '') return { items, complete: true };
      token = next;
    }
    return { items, complete: false };
  }

  return {
    name: 'mailgun',

    close: () => transport.close(),

    async verify(): Promise<string> {
      const found = await call(() => client.domains.get(domain));
      return `domain "${found.name}" (${found.state ?? 'state unknown'})`;
    },

    async send(message: EmailMessage): Promise<SendResult> {
      const answer = await call(() =>
        client.messages.create(domain, {
          from: opts.from,
          to: message.to,
          subject: message.subject,
          ...mailgunContent(message),
          ...mailgunVariables(message.idempotencyKey, message.metadata),
        }),
      );
      const id = typeof answer?.id === 'string' ? bareMessageId(answer.id) : '';
      if (id === '') {
        // The request was accepted (2xx) but the answer is unusable: the send is in doubt.
        throw new ProviderError('mailgun: send answered without an id', { kind: 'server_error' });
      }
      return { providerMessageId: id };
    },

    async status(providerMessageId: string): Promise<StatusObservation> {
      const id = bareMessageId(providerMessageId);
      const { items, complete } = await readLogs({ 'message-id': id }, undefined, STATUS_PAGES, () => false);
      if (!complete)
        throw new ProviderError(`mailgun: more than ${STATUS_PAGES * LOGS_PAGE_SIZE} log items for one message`, { kind: 'server_error' });
      return mailgunObservation(items.filter((e) => eventMessageId(e) === undefined || eventMessageId(e) === id));
    },

    async findByIdempotencyKey(idempotencyKey: string, to: string): Promise<SendResult | null> {
      const wanted = keyVariableValue(idempotencyKey);
      const recipient = to.trim().toLowerCase();
      const matches = (e: MailgunEventItem): boolean =>
        e.event === 'accepted' &&
        userVariables(e)[MAILGUN_KEY_VARIABLE] === wanted &&
        (e.recipient ?? '').trim().toLowerCase() === recipient &&
        eventMessageId(e) !== undefined;
      const { items, complete } = await readLogs({ recipient: to }, ['accepted'], SEARCH_PAGES, (page) => page.some(matches));
      const found = items.find(matches);
      if (found) return { providerMessageId: eventMessageId(found)!, providerStatus: 'accepted' };
      // Not having read every accepted event to this address says nothing: the search failed.
      if (!complete) {
        throw new ProviderError(
          `mailgun: more than ${SEARCH_PAGES * LOGS_PAGE_SIZE} accepted log items to one address; the send stays in doubt`,
          {
            kind: 'server_error',
          },
        );
      }
      return null;
    },
  };
}

type MailgunClient = ReturnType<Mailgun['client']>;
type LogsQuery = Parameters<MailgunClient['logs']['list']>[0];
type LogsItem = Awaited<ReturnType<MailgunClient['logs']['list']>>['items'][number];

/** Every request of `client` goes through the transport's agents (added to what makeRequest hands axios). */
function useAgents(client: MailgunClient, transport: ProviderTransport): void {
  const provider = client.request.requestProvider as { makeRequest: (...args: unknown[]) => Promise<unknown> };
  if (typeof provider?.makeRequest !== 'function')
    throw new Error('mailgun: this mailgun.js has no request provider to give HTTP agents to');
  const makeRequest = provider.makeRequest.bind(provider);
  provider.makeRequest = (url, method, data, config) =>
    makeRequest(url, method, { ...(data as object), httpAgent: transport.httpAgent, httpsAgent: transport.httpsAgent }, config);
}

/** The body parts of a send; without either, Mailgun refuses the send (400) and says why. */
function mailgunContent(message: EmailMessage): { html: string; text?: string } | { text: string } {
  if (message.html === undefined) return { text: message.text ?? '' };
  return message.text === undefined ? { html: message.html } : { html: message.html, text: message.text };
}

/** The parts of a log item the adapter reads besides the status mapping's. */
interface MailgunEventItem extends MailgunEvent {
  recipient?: string;
  /** JSON text in the Logs API (an object in the Events API and the webhooks). */
  'user-variables'?: string | Record<string, unknown>;
  message?: { headers?: { 'message-id'?: string } };
}

/** A log item as the status mapping reads events: its time in epoch seconds. */
function asEvent(item: LogsItem): MailgunEventItem {
  const at = item['@timestamp'] instanceof Date ? item['@timestamp'].getTime() : NaN;
  return { ...(item as unknown as MailgunEventItem), ...(Number.isFinite(at) ? { timestamp: at / 1000 } : {}) };
}

/** An item's user variables, whether Mailgun wrote them as JSON text or as an object. */
function userVariables(event: MailgunEventItem): Record<string, unknown> {
  const variables = event['user-variables'];
  if (typeof variables !== 'string') return variables ?? {};
  try {
    const parsed: unknown = JSON.parse(variables);
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function eventMessageId(event: MailgunEventItem): string | undefined {
  const id = event.message?.headers?.['message-id'];
  return typeof id === 'string' && id !== '' ? bareMessageId(id) : undefined;
}

/** A Message-Id without the angle brackets of the send answer (`<id@domain>`): the form the log's filter wants. */
export function bareMessageId(id: string): string {
  return id.trim().replace(/^<(.*)>$/, '$1');
}

/** Herald's key as sent in `v:herald_key`: itself when short, otherwise `sha256:<hex>` of it. */
export function keyVariableValue(idempotencyKey: string): string {
  return idempotencyKey.length <= KEY_VALUE_LIMIT ? idempotencyKey : `sha256:${sha256Hex(idempotencyKey)}`;
}

/**
 * The `v:` user variables of one send: Herald's key first, then the extra metadata in order
 * while all of them stay within Mailgun's 16 kB options limit (Mailgun would refuse the whole
 * send). Extra fields named like Herald's key, or with characters a form field name cannot
 * carry, are dropped. The recipient can read these (the `X-Mailgun-Variables` header).
 */
export function mailgunVariables(idempotencyKey: string, extra: Record<string, string> = {}): Record<string, string> {
  const variables: Record<string, string> = { [`v:${MAILGUN_KEY_VARIABLE}`]: keyVariableValue(idempotencyKey) };
  let bytes = Buffer.byteLength(`v:${MAILGUN_KEY_VARIABLE}${variables[`v:${MAILGUN_KEY_VARIABLE}`]}`);
  for (const [name, raw] of Object.entries(extra)) {
    if (name === MAILGUN_KEY_VARIABLE || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) continue;
    const value = String(raw);
    const size = Buffer.byteLength(`v:${name}${value}`);
    if (bytes + size > OPTIONS_LIMIT_BYTES) continue;
    variables[`v:${name}`] = value;
    bytes += size;
  }
  return variables;
}
