/**
 * The Mailgun endpoints Herald uses, with Mailgun's shapes: `multipart/form-data` sends,
 * basic auth `api:<key>`, ids in angle brackets, errors as `{ message }`; the Logs API
 * (`POST /v1/analytics/logs`: a JSON search of the account's log, `@timestamp` times, page
 * tokens) and the Events API it replaces (epoch-second timestamps, absolute paging URLs).
 * Only `/v3/{domain}/messages`, `/v3/{domain}/events[/{page}]`, `/v1/analytics/logs` and
 * `/v4/domains/{domain}` are served: no catch-all, so other emulated APIs keep their routes.
 *
 * The messages are the shared sandbox model's (state.ts, email-behaviour.ts); this file only
 * says them the way Mailgun would: an `accepted` event at creation, `delivered`, `failed` with a
 * severity and a reason, `opened`, `clicked`. An `inactive` address (suppressed at the
 * provider) is accepted and then fails with `suppress-bounce`, as Mailgun does.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { emailAddress, planEmail, statusHangs, type EmailBehaviour } from './email-behaviour.js';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import { BAD_TOKEN } from './postmark-api.js';
import type { EmailEvent, EmailRecord } from './state.js';
import { signMailgunWebhook } from './webhook-keys.js';
import type { PlannedWebhook, RenderedWebhook, WebhookTarget } from './webhooks.js';

/** A sending domain the emulator does not know, to exercise Mailgun's 404 "Domain not found". */
export const UNKNOWN_MAILGUN_DOMAIN = 'unknown.mailgun.invalid';

const OPTIONS_LIMIT_BYTES = 16_000;
const EVENTS_MAX_LIMIT = 300;
const EVENTS_DEFAULT_LIMIT = 100;
const LOGS_MAX_LIMIT = 100;
const LOGS_DEFAULT_LIMIT = 100;
/** Without a `start`, the Logs API reads the day before `end`. */
const LOGS_DEFAULT_SPAN_MS = 24 * 60 * 60 * 1000;
/** The Logs API filter attributes the emulator knows, with how to read each from a log item. */
const LOGS_ATTRIBUTES: Record<string, (item: Json) => string[]> = {
  domain: (item) => [String((item['domain'] as Json | undefined)?.['name'] ?? '')],
  'message-id': (item) => [String((item['message'] as { headers?: Json } | undefined)?.headers?.['message-id'] ?? '')],
  recipient: (item) => [String(item['recipient'] ?? '')],
  event: (item) => [String(item['event'] ?? '')],
  tags: (item) => ((item['tags'] as string[] | undefined) ?? []).map(String),
};
const PAGE_TOKENS_KEPT = 10_000;
const ADDRESS = /^[^@\s<>,]+@[^@\s<>,]+\.[^@\s<>,]+$/;

type Json = Record<string, unknown>;

/** Mailgun's error answer: `{ message }`. */
export function mailgunError(status: number, message: string, headers?: Record<string, string>): Answer {
  return { status, body: { message }, ...(headers ? { headers } : {}) };
}

/** True for the paths this emulator serves (for the sandbox's not-found and error handlers). */
export function isMailgunPath(url: string): boolean {
  return (
    /^\/v3\/[^/?]+\/(messages|events)(\/|\?|$)/.test(url) || /^\/v4\/domains(\/|\?|$)/.test(url) || /^\/v1\/analytics\/logs(\?|$)/.test(url)
  );
}

/** Mailgun's date in its 429 text: `Mon, 20 Dec 2021 20:33:21 UTC`. */
function mailgunDate(ms: number): string {
  return new Date(ms).toUTCString().replace('GMT', 'UTC');
}

/**
 * Mailgun's 429 says when to come back in its message ("try again after <date>"); its date
 * has whole seconds, so it is rounded up to keep at least the asked delay.
 */
function limitExceeded(domain: string, retryAfterSeconds: number): Answer {
  const at = Math.ceil((Date.now() + retryAfterSeconds * 1000) / 1000) * 1000;
  return mailgunError(429, `Domain ${domain} is not allowed to send: request limit exceeded, try again after ${mailgunDate(at)}`, {
    'retry-after': String(retryAfterSeconds),
  });
}

const faultAnswerFor =
  (domain: string) =>
  (status: 429 | 500 | 503, retryAfterSeconds: number): Answer => {
    if (status === 429) return limitExceeded(domain, retryAfterSeconds);
    return mailgunError(status, status === 500 ? 'Internal Server Error' : 'Service Unavailable');
  };

/** Registers the Mailgun routes and the multipart body parser they need. */
export function registerMailgun(app: FastifyInstance, ctx: SandboxContext): void {
  const { state } = ctx;

  app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, async (request: FastifyRequest, body: Buffer) => {
    // The platform's own multipart reader: the form as Mailgun reads it, repeated fields kept.
    let form: FormData;
    try {
      form = await new Response(body, { headers: { 'content-type': String(request.headers['content-type']) } }).formData();
    } catch (error) {
      throw Object.assign(new Error(`Failed to parse the multipart form: ${(error as Error).message}`), { statusCode: 400 });
    }
    const fields: Record<string, string[]> = {};
    for (const [name, value] of form.entries()) {
      if (typeof value === 'string') (fields[name] ??= []).push(value);
    }
    return fields;
  });

  const authorize = (request: FastifyRequest, domain: string) => (): Answer | undefined => {
    const header = request.headers.authorization ?? '';
    const [scheme, encoded = ''] = header.split(' ');
    const decoded = scheme?.toLowerCase() === 'basic' ? Buffer.from(encoded, 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    const user = colon >= 0 ? decoded.slice(0, colon) : '';
    const key = colon >= 0 ? decoded.slice(colon + 1) : '';
    // Mailgun answers a bad key with a bare "Forbidden".
    if (user !== 'api' || key === '' || key === BAD_TOKEN)
      return { status: 401, body: 'Forbidden', headers: { 'content-type': 'text/plain' } };
    if (domain.toLowerCase() === UNKNOWN_MAILGUN_DOMAIN) return mailgunError(404, `Domain not found: ${domain}`);
    return undefined;
  };
  const slowDelay = (behaviour: EmailBehaviour): number => (behaviour === 'slow' ? ctx.slowMs : 0);
  const indexed = (record: EmailRecord, now: number): boolean => record.createdAt + ctx.indexLagMs <= now;
  const tokens = new PageTokens<EventSearch>();
  const logTokens = new PageTokens<LogsSearch>();

  app.post<{ Params: { domain: string }; Body: Record<string, string[]> | undefined }>('/v3/:domain/messages', async (request, reply) => {
    const form = request.body ?? {};
    const domain = request.params.domain;
    const to = (form['to'] ?? []).join(',');
    await exchange(ctx, request, reply, {
      provider: 'mailgun',
      operation: 'mailgun.send',
      recipient: to,
      authorize: authorize(request, domain),
      faultAnswer: faultAnswerFor(domain),
      run: () => send(domain, form, to),
    });
  });

  function send(domain: string, form: Record<string, string[]>, to: string): Answer {
    const one = (name: string): string | undefined => form[name]?.at(-1);
    const from = one('from')?.trim() ?? '';
    if (from === '') return mailgunError(400, 'from parameter is missing');
    const recipients = to
      .split(',')
      .map(emailAddress)
      .filter((r) => r !== '');
    if (recipients.length === 0) return mailgunError(400, 'to parameter is missing');
    if (recipients.some((r) => !ADDRESS.test(r)))
      return mailgunError(400, 'to parameter is not a valid address. please check documentation');
    const text = one('text');
    const html = one('html');
    if (!text && !html) return mailgunError(400, "Need at least one of 'text' or 'html' parameters specified");
    const optionBytes = Object.entries(form)
      .filter(([name]) => /^[ohv]:/.test(name))
      .reduce((sum, [name, values]) => sum + values.reduce((s, v) => s + Buffer.byteLength(name + v), 0), 0);
    if (optionBytes > OPTIONS_LIMIT_BYTES) {
      return mailgunError(400, 'Send options (parameters starting with o:, h:, or v:) are limited to 16 kB total');
    }

    const first = recipients[0] as string;
    const plan = planEmail(first);
    if (plan.behaviour === 'rejected') return mailgunError(400, 'to parameter is not a valid address. please check documentation');
    if (plan.behaviour === 'flaky') {
      const attempt = state.nextAttempt(`mailgun:${first.toLowerCase()}`);
      if (attempt === 1) return mailgunError(500, 'Internal Server Error');
      if (attempt === 2) return limitExceeded(domain, 1);
    }

    const createdAt = Date.now();
    const variables = Object.fromEntries(
      Object.entries(form)
        .filter(([name]) => name.startsWith('v:'))
        .map(([name, values]) => [name.slice(2), values.at(-1) ?? '']),
    );
    const fields: Omit<EmailRecord, 'events'> = {
      messageId: `${stamp(createdAt)}.${randomBytes(8).toString('hex')}@${domain}`,
      from,
      to,
      recipients,
      subject: one('subject') ?? '',
      messageStream: domain,
      metadata: variables,
      plan,
      createdAt,
    };
    if (text) fields.textBody = text;
    if (html) fields.htmlBody = html;
    const tag = one('o:tag');
    if (tag !== undefined) fields.tag = tag;
    const record = state.addEmail(fields);
    if (ctx.webhooks.configured) ctx.webhooks.plan(mailgunWebhooks(record));
    return { status: 200, body: { id: `<${record.messageId}>`, message: 'Queued. Thank you.' }, delayMs: slowDelay(plan.behaviour) };
  }

  type EventsRoute = { Params: { domain: string; page?: string }; Querystring: Record<string, string | undefined> };
  const listEvents = async (request: FastifyRequest<EventsRoute>, reply: FastifyReply): Promise<void> => {
    const domain = request.params.domain;
    const search = request.params.page === undefined ? parseSearch(request.query) : tokens.decode(request.params.page);
    const filter = typeof search === 'object' ? search.filter : {};
    const record = filter.messageId === undefined ? undefined : state.emails.get(filter.messageId);
    const recipient = filter.recipient ?? record?.recipients[0];
    await exchange(ctx, request, reply, {
      provider: 'mailgun',
      operation: 'mailgun.events',
      recipient,
      authorize: authorize(request, domain),
      faultAnswer: faultAnswerFor(domain),
      run: () => {
        if (search === undefined) return mailgunError(400, 'Invalid page token');
        if (typeof search === 'string') return mailgunError(400, search);
        if (record && statusHangs(record.plan.behaviour)) return { status: 0, hang: true };
        const base = `${request.protocol}://${request.host}/v3/${domain}/events`;
        const delayMs = recipient ? slowDelay(planEmail(recipient).behaviour) : 0;
        return { status: 200, body: eventsPage(domain, search, base), delayMs };
      },
    });
  };
  app.get<EventsRoute>('/v3/:domain/events', listEvents);
  app.get<EventsRoute>('/v3/:domain/events/:page', listEvents);

  /** The events a search selects, in its order, then cut to its page. */
  function eventsPage(domain: string, search: EventSearch, base: string): Json {
    const now = Date.now();
    const { filter } = search;
    const low = Math.min(search.begin, search.end ?? (search.ascending ? Infinity : -Infinity));
    const high = Math.max(search.begin, search.end ?? (search.ascending ? Infinity : -Infinity));
    const events: Json[] = [];
    for (const record of state.emails.values()) {
      if (!indexed(record, now) || !record.messageId.endsWith(`@${domain}`)) continue;
      if (filter.messageId !== undefined && record.messageId !== filter.messageId) continue;
      if (filter.recipient !== undefined && !record.recipients.some((r) => r.toLowerCase() === filter.recipient!.toLowerCase())) continue;
      for (const event of mailgunEvents(record, now)) {
        const seconds = event['timestamp'] as number;
        if (seconds < low || seconds > high) continue;
        if (filter.event !== undefined && event['event'] !== filter.event) continue;
        events.push(event);
      }
    }
    events.sort((a, b) => ((a['timestamp'] as number) - (b['timestamp'] as number)) * (search.ascending ? 1 : -1));
    const items = events.slice(search.offset, search.offset + search.limit);
    const link = (offset: number) => `${base}/${tokens.encode({ ...search, offset: Math.max(0, offset) })}`;
    return {
      items,
      paging: {
        first: link(0),
        last: link(Math.max(0, events.length - search.limit)),
        next: link(search.offset + search.limit),
        previous: link(search.offset - search.limit),
      },
    };
  }

  // The Logs API: one search of the account's log in a JSON body; the next page is the same
  // search with the answer's `pagination.next` token.
  app.post<{ Body: unknown }>('/v1/analytics/logs', async (request, reply) => {
    const body = request.body;
    const token = isJson(body) && isJson(body['pagination']) ? body['pagination']['token'] : undefined;
    const search =
      typeof token === 'string' && token !== '' ? (logTokens.decode(token) ?? 'Invalid pagination token') : parseLogsSearch(body);
    const wanted = typeof search === 'object' ? search.filter : [];
    const messageId = wanted.find((f) => f.attribute === 'message-id' && f.comparator === '=')?.values[0];
    const record = messageId === undefined ? undefined : state.emails.get(messageId.replace(/^<(.*)>$/, '$1'));
    const recipient = wanted.find((f) => f.attribute === 'recipient' && f.comparator === '=')?.values[0] ?? record?.recipients[0];
    await exchange(ctx, request, reply, {
      provider: 'mailgun',
      operation: 'mailgun.logs',
      recipient,
      search: body,
      // The Logs API is the account's: no domain in its path.
      authorize: authorize(request, ''),
      faultAnswer: faultAnswerFor(record?.messageStream ?? 'the account'),
      run: () => {
        if (typeof search === 'string') return mailgunError(400, search);
        if (record && statusHangs(record.plan.behaviour)) return { status: 0, hang: true };
        const delayMs = recipient ? slowDelay(planEmail(recipient).behaviour) : 0;
        return { status: 200, body: logsPage(search), delayMs };
      },
    });
  });

  /** The log items a Logs API search selects, in its order, then cut to its page. */
  function logsPage(search: LogsSearch): Json {
    const now = Date.now();
    const items: Json[] = [];
    for (const record of state.emails.values()) {
      if (!indexed(record, now)) continue;
      for (const event of mailgunEvents(record, now)) {
        const at = (event['timestamp'] as number) * 1000;
        if (at < search.start || at > search.end) continue;
        if (search.events !== undefined && !search.events.includes(String(event['event']))) continue;
        const item = logItem(record, event);
        if (search.filter.every((f) => matches(f, item))) items.push(item);
      }
    }
    const time = (item: Json) => Date.parse(String(item['@timestamp']));
    items.sort((a, b) => (time(a) - time(b)) * (search.ascending ? 1 : -1));
    const page = items.slice(search.offset, search.offset + search.limit);
    const token = (offset: number) => logTokens.encode({ ...search, offset: Math.max(0, offset) });
    const lastOffset = Math.max(0, Math.floor((items.length - 1) / search.limit) * search.limit);
    return {
      start: rfc2822(search.start),
      end: rfc2822(search.end),
      items: page,
      pagination: {
        first: token(0),
        last: token(lastOffset),
        ...(search.offset > 0 ? { previous: token(search.offset - search.limit) } : {}),
        ...(search.offset + search.limit < items.length ? { next: token(search.offset + search.limit) } : {}),
        ...(search.totals ? { total: items.length } : {}),
      },
      aggregates: {},
    };
  }

  // The domain itself (`herald doctor`'s authenticated call that sends nothing).
  app.get<{ Params: { domain: string } }>('/v4/domains/:domain', async (request, reply) => {
    const domain = request.params.domain;
    await exchange(ctx, request, reply, {
      provider: 'mailgun',
      operation: 'mailgun.domain',
      recipient: undefined,
      authorize: authorize(request, domain),
      faultAnswer: faultAnswerFor(domain),
      run: () => ({
        status: 200,
        body: {
          domain: {
            id: randomBytes(12).toString('hex'),
            name: domain,
            state: 'active',
            type: 'custom',
            created_at: new Date(0).toUTCString(),
            smtp_login: `postmaster@${domain}`,
            spam_action: 'disabled',
            wildcard: false,
            require_tls: false,
            skip_verification: false,
            is_disabled: false,
            web_prefix: 'email',
            web_scheme: 'https',
          },
          receiving_dns_records: [],
          sending_dns_records: [],
        },
      }),
    });
  });
}

/** What an events search asks for, kept in the page token of its paging links. */
interface EventSearch {
  filter: { event?: string; recipient?: string; messageId?: string };
  /** Epoch seconds. */
  begin: number;
  end?: number;
  ascending: boolean;
  limit: number;
  offset: number;
}

/** Reads the query of a first events request; a string says what is wrong with it. */
function parseSearch(query: Record<string, string | undefined>): EventSearch | string {
  const seconds = (name: string): number | undefined | string => {
    const raw = query[name];
    if (raw === undefined || raw === '') return undefined;
    const value = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : Date.parse(raw) / 1000;
    return Number.isFinite(value) ? value : `Invalid time in '${name}': ${raw}`;
  };
  const begin = seconds('begin');
  const end = seconds('end');
  if (typeof begin === 'string') return begin;
  if (typeof end === 'string') return end;
  const ascendingRaw = query['ascending'];
  if (ascendingRaw !== undefined && ascendingRaw !== 'yes' && ascendingRaw !== 'no') return "'ascending' must be 'yes' or 'no'";
  if (end === undefined && ascendingRaw === undefined && begin !== undefined) return "'ascending' must be provided when 'end' is not";
  const limit = query['limit'] === undefined ? EVENTS_DEFAULT_LIMIT : Number(query['limit']);
  if (!Number.isInteger(limit) || limit < 1 || limit > EVENTS_MAX_LIMIT) return `'limit' must be an integer from 1 to ${EVENTS_MAX_LIMIT}`;
  const now = Date.now() / 1000;
  // Without a range Mailgun reads newest first from now.
  const ascending = ascendingRaw === 'yes' || (ascendingRaw === undefined && end !== undefined && begin !== undefined && end > begin);
  const filter: EventSearch['filter'] = {};
  if (query['event']) filter.event = query['event'];
  if (query['recipient']) filter.recipient = emailAddress(query['recipient']);
  if (query['message-id']) filter.messageId = query['message-id'].replace(/^<(.*)>$/, '$1');
  const search: EventSearch = { filter, begin: begin ?? now, ascending, limit, offset: 0 };
  if (end !== undefined) search.end = end;
  return search;
}

/** One condition of a Logs API filter: the attribute compared with any of the values. */
interface LogsCondition {
  attribute: string;
  comparator: '=' | '!=';
  values: string[];
}

/** What a Logs API search asks for, kept behind the page tokens of its answer. */
interface LogsSearch {
  /** Epoch milliseconds, both ends included. */
  start: number;
  end: number;
  events?: string[];
  filter: LogsCondition[];
  ascending: boolean;
  limit: number;
  offset: number;
  totals: boolean;
}

function isJson(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads the body of a first Logs API request; a string says what is wrong with it. */
function parseLogsSearch(body: unknown): LogsSearch | string {
  if (!isJson(body)) return 'The request body must be a JSON object';
  const time = (name: string): number | undefined | string => {
    const raw = body[name];
    if (raw === undefined || raw === '') return undefined;
    const ms = typeof raw === 'string' ? Date.parse(raw) : NaN;
    return Number.isFinite(ms) ? ms : `Invalid '${name}': must be an RFC 2822 date, got ${JSON.stringify(raw)}`;
  };
  const startAt = time('start');
  const endAt = time('end');
  if (typeof startAt === 'string') return startAt;
  if (typeof endAt === 'string') return endAt;
  const end = endAt ?? Date.now();
  const start = startAt ?? end - LOGS_DEFAULT_SPAN_MS;
  if (start > end) return "'start' must not be after 'end'";
  const events = body['events'];
  if (events !== undefined && (!Array.isArray(events) || events.some((e) => typeof e !== 'string')))
    return "'events' must be an array of strings";
  const filter: LogsCondition[] = [];
  const given = body['filter'];
  if (given !== undefined) {
    if (!isJson(given) || !Array.isArray(given['AND'])) return "'filter' must have an AND array";
    for (const condition of given['AND'] as unknown[]) {
      if (!isJson(condition)) return 'Each filter condition must be an object';
      const { attribute, comparator, values } = condition;
      if (typeof attribute !== 'string' || !(attribute in LOGS_ATTRIBUTES)) return `Unknown filter attribute: ${JSON.stringify(attribute)}`;
      if (comparator !== '=' && comparator !== '!=') return `Unsupported comparator: ${JSON.stringify(comparator)}`;
      if (!Array.isArray(values) || values.length === 0) return 'Each filter condition needs values';
      const read = values.map((v) =>
        isJson(v) && typeof v['value'] === 'string' && typeof v['label'] === 'string' ? v['value'] : undefined,
      );
      if (read.some((v) => v === undefined)) return 'Each filter value needs a label and a value';
      filter.push({ attribute, comparator, values: read as string[] });
    }
  }
  const pagination = isJson(body['pagination']) ? body['pagination'] : {};
  const sort = pagination['sort'] ?? 'timestamp:desc';
  if (sort !== 'timestamp:asc' && sort !== 'timestamp:desc') return "'pagination.sort' must be timestamp:asc or timestamp:desc";
  const limit = pagination['limit'] ?? LOGS_DEFAULT_LIMIT;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > LOGS_MAX_LIMIT)
    return `'pagination.limit' must be an integer from 1 to ${LOGS_MAX_LIMIT}`;
  const search: LogsSearch = {
    start,
    end,
    filter,
    ascending: sort === 'timestamp:asc',
    limit,
    offset: 0,
    totals: body['include_totals'] === true,
  };
  if (events !== undefined) search.events = events as string[];
  return search;
}

/** Whether a log item meets one condition; addresses compare in any case. */
function matches(condition: LogsCondition, item: Json): boolean {
  const fold = (v: string) => (condition.attribute === 'recipient' ? emailAddress(v).toLowerCase() : v.replace(/^<(.*)>$/, '$1'));
  const have = LOGS_ATTRIBUTES[condition.attribute]!(item).map(fold);
  const hit = condition.values.some((v) => have.includes(fold(v)));
  return condition.comparator === '=' ? hit : !hit;
}

/** An event as the Logs API lists it: an ISO `@timestamp`, the domain and account, the user variables as JSON text. */
function logItem(record: EmailRecord, event: Json): Json {
  const { timestamp, 'user-variables': variables, ...rest } = event;
  return {
    ...rest,
    '@timestamp': new Date((timestamp as number) * 1000).toISOString(),
    account: { id: 'sandbox-account' },
    domain: { name: record.messageStream },
    'user-variables': JSON.stringify(variables ?? {}),
  };
}

/** A time as the Logs API writes `start` and `end`: `Mon, 08 Jul 2024 00:00:00 -0000`. */
function rfc2822(ms: number): string {
  return `${new Date(ms).toUTCString().slice(0, 25)} -0000`;
}

/**
 * Page tokens: a short id per page handed out, kept here (bounded; the oldest go first), since
 * a search does not fit in a path segment.
 */
class PageTokens<Search> {
  private readonly pages = new Map<string, Search>();

  encode(search: Search): string {
    const token = randomBytes(12).toString('base64url');
    this.pages.set(token, search);
    if (this.pages.size > PAGE_TOKENS_KEPT) this.pages.delete(this.pages.keys().next().value as string);
    return token;
  }

  decode(token: string): Search | undefined {
    return this.pages.get(token);
  }
}

/** `YYYYMMDDhhmmss` of a time, as Mailgun's message ids begin. */
function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

/**
 * The webhook posts of a message's events, each when it happens (Mailgun has no webhook for
 * `accepted`): JSON with the event as the events API lists it in `event-data`, and a `signature`
 * made with the target's signing key when the post leaves.
 */
function mailgunWebhooks(record: EmailRecord): PlannedWebhook[] {
  return mailgunEvents(record, Infinity)
    .filter((event) => event['event'] !== 'accepted')
    .map((event) => ({
      provider: 'mailgun',
      messageId: record.messageId,
      address: record.recipients[0] ?? '',
      at: (event['timestamp'] as number) * 1000,
      render: (target: WebhookTarget): RenderedWebhook | undefined => {
        if (!target.mailgunSigningKey) return undefined;
        const signature = signMailgunWebhook(target.mailgunSigningKey, String(Math.floor(Date.now() / 1000)));
        return {
          path: '/webhooks/mailgun',
          headers: { 'content-type': 'application/json', 'user-agent': 'mailgun/treq-16.12.0' },
          body: JSON.stringify({ signature, 'event-data': event }),
        };
      },
    }));
}

/** A message's events visible at `now`, as Mailgun lists them. */
export function mailgunEvents(record: EmailRecord, now: number): Json[] {
  const recipient = record.recipients[0] ?? '';
  const base = (event: string, at: number, n: number): Json => ({
    id: Buffer.from(`${record.messageId}/${n}`).toString('base64url').slice(-22),
    event,
    timestamp: at / 1000,
    'log-level': 'info',
    recipient,
    'recipient-domain': recipient.slice(recipient.lastIndexOf('@') + 1),
    tags: record.tag ? [record.tag] : [],
    'user-variables': { ...record.metadata },
    flags: { 'is-authenticated': true, 'is-test-mode': false, 'is-routed': false, 'is-system-test': false },
    envelope: { sender: emailAddress(record.from), targets: recipient, transport: 'smtp', 'sending-ip': '127.0.0.1' },
    message: {
      headers: { 'message-id': record.messageId, from: record.from, to: record.to, subject: record.subject },
      attachments: [],
      size: 1024,
    },
  });
  const events: Json[] = [{ ...base('accepted', record.createdAt, 0), method: 'HTTP' }];
  if (record.plan.behaviour === 'inactive') {
    // Already on the domain's bounce list: accepted, then dropped without a delivery attempt.
    events.push({
      ...base('failed', record.createdAt + 1, 1),
      'log-level': 'error',
      severity: 'permanent',
      reason: 'suppress-bounce',
      'delivery-status': {
        code: 605,
        message: '',
        description: 'Not delivering to previously bounced address',
        'attempt-no': 0,
        'retry-seconds': 0,
      },
    });
  }
  record.events.forEach((event, i) => {
    if (event.at <= now) events.push(deliveryEvent(event, base(eventName(event), event.at, i + 2)));
  });
  return events;
}

function eventName(event: EmailEvent): string {
  switch (event.type) {
    case 'Delivered':
      return 'delivered';
    case 'Bounced':
    case 'Transient':
      return 'failed';
    case 'Opened':
      return 'opened';
    case 'LinkClicked':
      return 'clicked';
  }
}

function deliveryEvent(event: EmailEvent, base: Json): Json {
  const status = (code: number, message: string, description = '') => ({
    'delivery-status': { code, message, description, 'attempt-no': 1, 'mx-host': 'mx.sandbox.invalid', tls: true, 'session-seconds': 0.1 },
  });
  switch (event.type) {
    case 'Delivered':
      return { ...base, ...status(250, 'OK (sandbox)') };
    case 'Bounced':
      return event.bounceType === 'SoftBounce'
        ? {
            ...base,
            'log-level': 'warn',
            severity: 'temporary',
            reason: 'generic',
            ...status(452, '4.2.2 The email account that you tried to reach is over quota (sandbox)'),
          }
        : {
            ...base,
            'log-level': 'error',
            severity: 'permanent',
            reason: 'bounce',
            ...status(550, '5.1.1 The email account that you tried to reach does not exist (sandbox)'),
          };
    case 'Transient':
      return { ...base, 'log-level': 'warn', severity: 'temporary', reason: 'generic', ...status(421, '4.7.0 Try again later (sandbox)') };
    case 'Opened':
    case 'LinkClicked':
      return { ...base, ip: '127.0.0.1', 'client-info': { 'client-name': 'Sandbox Mail', 'client-type': 'mobile browser' } };
  }
}
