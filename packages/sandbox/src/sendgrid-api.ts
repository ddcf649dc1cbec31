/**
 * The SendGrid endpoints Herald uses, with SendGrid's shapes: Mail Send (202, the ID in
 * `X-Message-Id`), the Email Logs (`POST /v3/logs` search, `GET /v3/logs/{sg_message_id}`) and
 * `GET /v3/scopes`; errors as `{ errors: [{ message, field }] }`, auth by `Authorization: Bearer`.
 *
 * The shared sandbox model decides what happens to a message (email-behaviour.ts); this file
 * only speaks SendGrid. Two of SendGrid's habits are kept on purpose: a suppressed address is
 * accepted and then `dropped`, and the logs' summary `status` says `delivered` for an open alone.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { emailAddress, planEmail, statusHangs, type EmailBehaviour } from './email-behaviour.js';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import type { EmailEvent, EmailRecord } from './state.js';
import { signSendgridWebhook } from './webhook-keys.js';
import type { PlannedWebhook, RenderedWebhook, WebhookTarget } from './webhooks.js';

/** The API key that the emulator refuses, to exercise 401 handling. */
export const BAD_SENDGRID_KEY = 'SG.bad-key';

const CUSTOM_ARGS_BYTES = 10_000;
const LOGS_LIMIT_MAX = 1000;
const LOGS_LIMIT_DEFAULT = 10;
const HELP = 'https://www.twilio.com/docs/sendgrid/api-reference/mail-send/errors';
/** The drop reason of a suppressed recipient. */
const SUPPRESSED_REASON = 'Bounced Address';

type Json = Record<string, unknown>;

/** True for the paths this emulator answers (the sandbox's not-found and error handlers use it). */
export function isSendgridPath(url: string): boolean {
  return url.startsWith('/v3/');
}

/** SendGrid's error answer. */
export function sendgridError(status: number, message: string, field: string | null = null, headers?: Record<string, string>): Answer {
  const error: Json = { message, field };
  if (field !== null) error['help'] = HELP;
  return { status, body: { errors: [error] }, ...(headers ? { headers } : {}) };
}

function faultAnswer(status: 429 | 500 | 503, retryAfterSeconds: number): Answer {
  if (status === 429) {
    // SendGrid documents only the X-RateLimit-* headers on a 429; Reset is in epoch seconds.
    const reset = Math.ceil(Date.now() / 1000) + retryAfterSeconds;
    return sendgridError(429, 'too many requests', null, {
      'x-ratelimit-limit': '600',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String(reset),
    });
  }
  return sendgridError(status, status === 500 ? 'internal server error' : 'service unavailable');
}

/** Registers the SendGrid routes. */
export function registerSendgrid(app: FastifyInstance, ctx: SandboxContext): void {
  const { state } = ctx;

  const authorize = (header: unknown) => (): Answer | undefined => {
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header.trim()) : null;
    if (!match) return sendgridError(401, 'authorization required');
    if (match[1] === BAD_SENDGRID_KEY) return sendgridError(401, 'The provided authorization grant is invalid, expired, or revoked');
    return undefined;
  };
  const slowDelay = (behaviour: EmailBehaviour): number => (behaviour === 'slow' ? ctx.slowMs : 0);
  const indexed = (record: EmailRecord, now: number): boolean => record.createdAt + ctx.indexLagMs <= now;
  const sendgridRecord = (record: EmailRecord): boolean => record.messageStream === STREAM;

  app.post('/v3/mail/send', async (request, reply) => {
    const body: Json = isObject(request.body) ? request.body : {};
    const to = firstRecipient(body);
    await exchange(ctx, request, reply, {
      provider: 'sendgrid',
      operation: 'sendgrid.send',
      recipient: to,
      authorize: authorize(request.headers.authorization),
      faultAnswer,
      run: () => send(body),
    });
  });

  function send(body: Json): Answer {
    const from = isObject(body['from']) && typeof body['from']['email'] === 'string' ? body['from']['email'].trim() : '';
    if (from === '') {
      return sendgridError(
        400,
        'The from object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.',
        'from.email',
      );
    }
    const personalizations = Array.isArray(body['personalizations']) ? body['personalizations'] : [];
    const recipients = (isObject(personalizations[0]) && Array.isArray(personalizations[0]['to']) ? personalizations[0]['to'] : [])
      .map((r: unknown) => (isObject(r) && typeof r['email'] === 'string' ? emailAddress(r['email']) : ''))
      .filter((r: string) => r !== '');
    if (recipients.length === 0) {
      return sendgridError(
        400,
        'The to array is required for all personalization objects, and must have at least one email object with a valid email address.',
        'personalizations.0.to',
      );
    }
    const invalid = recipients.findIndex((r: string) => !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(r));
    if (invalid >= 0) return sendgridError(400, 'Does not contain a valid address.', `personalizations.0.to.${invalid}.email`);
    const subject = typeof body['subject'] === 'string' ? body['subject'] : '';
    if (subject === '') {
      return sendgridError(
        400,
        'The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.',
        'subject',
      );
    }
    const content = (Array.isArray(body['content']) ? body['content'] : []).filter(
      (c: unknown) => isObject(c) && typeof c['type'] === 'string' && typeof c['value'] === 'string' && c['value'] !== '',
    ) as Array<{ type: string; value: string }>;
    if (content.length === 0) {
      return sendgridError(
        400,
        'Unless a valid template_id is provided, the content parameter is required. There must be at least one defined content block. We typically suggest both text/plain and text/html blocks are included, but only one block is required.',
        'content',
      );
    }
    const customArgs = checkCustomArgs(body['custom_args']);
    if (typeof customArgs === 'string') return sendgridError(400, customArgs, 'custom_args');

    const first = recipients[0] as string;
    const plan = planEmail(first);
    if (plan.behaviour === 'rejected') return sendgridError(400, 'Does not contain a valid address.', 'personalizations.0.to.0.email');
    if (plan.behaviour === 'flaky') {
      const attempt = state.nextAttempt(`sendgrid:${first.toLowerCase()}`);
      if (attempt === 1) return faultAnswer(500, 0);
      if (attempt === 2) return faultAnswer(429, 1);
    }

    const createdAt = Date.now();
    const xMessageId = randomBytes(16).toString('base64url').slice(0, 22);
    const fields: Omit<EmailRecord, 'events'> = {
      messageId: `${xMessageId}.sandbox0001p1mdw1-${process.pid}-${createdAt.toString(16).toUpperCase()}-0.0`,
      from,
      to: recipients.join(', '),
      recipients,
      subject,
      messageStream: STREAM,
      metadata: customArgs,
      plan,
      createdAt,
    };
    const text = content.find((c) => c.type === 'text/plain')?.value;
    const html = content.find((c) => c.type === 'text/html')?.value;
    if (text !== undefined) fields.textBody = text;
    if (html !== undefined) fields.htmlBody = html;
    const categories = Array.isArray(body['categories']) ? body['categories'].filter((c): c is string => typeof c === 'string') : [];
    if (categories[0] !== undefined) fields.tag = categories[0];
    const record = state.addEmail(fields);
    if (ctx.webhooks.configured) ctx.webhooks.plan(sendgridWebhooks(record));
    return { status: 202, headers: { 'x-message-id': xMessageId }, delayMs: slowDelay(plan.behaviour) };
  }

  app.post('/v3/logs', async (request, reply) => {
    const body: Json = isObject(request.body) ? request.body : {};
    const query = typeof body['query'] === 'string' ? body['query'] : '';
    const parsed = parseQuery(query);
    const toEmail = typeof parsed !== 'string' ? parsed.find((c) => c.field === 'to_email')?.values[0] : undefined;
    await exchange(ctx, request, reply, {
      provider: 'sendgrid',
      operation: 'sendgrid.logs_search',
      recipient: toEmail,
      authorize: authorize(request.headers.authorization),
      faultAnswer,
      run: () => {
        if (typeof parsed === 'string') return sendgridError(400, parsed, 'query');
        const limit = body['limit'] === undefined ? LOGS_LIMIT_DEFAULT : Number(body['limit']);
        if (!Number.isInteger(limit) || limit < 1 || limit > LOGS_LIMIT_MAX) {
          return sendgridError(400, `limit must be an integer from 1 to ${LOGS_LIMIT_MAX}`, 'limit');
        }
        const now = Date.now();
        const messages = [...state.emails.values()]
          .filter((r) => sendgridRecord(r) && indexed(r, now))
          .map((r) => summary(r, now))
          .filter((m) => parsed.every((condition) => matches(condition, m)))
          .reverse()
          .slice(0, limit);
        return { status: 200, body: { messages }, delayMs: toEmail ? slowDelay(planEmail(toEmail).behaviour) : 0 };
      },
    });
  });

  app.get<{ Params: { id: string } }>('/v3/logs/:id', async (request, reply) => {
    const record = state.emails.get(request.params.id);
    await exchange(ctx, request, reply, {
      provider: 'sendgrid',
      operation: 'sendgrid.logs_message',
      recipient: record?.recipients[0],
      authorize: authorize(request.headers.authorization),
      faultAnswer,
      run: () => {
        const now = Date.now();
        if (!record || !sendgridRecord(record) || !indexed(record, now)) return sendgridError(404, 'not found', 'sg_message_id');
        if (statusHangs(record.plan.behaviour)) return { status: 0, hang: true };
        return { status: 200, body: message(record, now), delayMs: slowDelay(record.plan.behaviour) };
      },
    });
  });

  // The key's scopes (`herald doctor`'s authenticated call that sends nothing).
  app.get('/v3/scopes', async (request, reply) => {
    await exchange(ctx, request, reply, {
      provider: 'sendgrid',
      operation: 'sendgrid.scopes',
      recipient: undefined,
      authorize: authorize(request.headers.authorization),
      faultAnswer,
      run: () => ({ status: 200, body: { scopes: ['mail.send', 'messages.read', 'scopes.read'] } }),
    });
  });
}

/** The `messageStream` of the messages this emulator keeps, telling them from Postmark's in the shared state. */
const STREAM = 'sendgrid';

/** One SendGrid event of the Email Logs. */
interface LogsEvent {
  event: string;
  at: number;
  type?: string;
  reason?: string;
  bounce_classification?: string;
  attempt?: number;
}

/** The message's events visible at `now`, in SendGrid's words, oldest first. */
function logsEvents(record: EmailRecord, now: number): LogsEvent[] {
  const events: LogsEvent[] = [{ event: 'processed', at: record.createdAt }];
  if (record.plan.behaviour === 'inactive') events.push({ event: 'dropped', at: record.createdAt, reason: SUPPRESSED_REASON });
  for (const e of record.events.filter((x) => x.at <= now)) events.push(logsEvent(e));
  return events.filter((e) => e.at <= now);
}

function logsEvent(event: EmailEvent): LogsEvent {
  switch (event.type) {
    case 'Delivered':
      return { event: 'delivered', at: event.at };
    case 'Bounced':
      return event.bounceType === 'SoftBounce'
        ? {
            event: 'bounce',
            at: event.at,
            type: 'blocked',
            reason: '452 4.2.2 Mailbox full (sandbox)',
            bounce_classification: 'Mailbox Unavailable',
          }
        : {
            event: 'bounce',
            at: event.at,
            type: 'bounce',
            reason: '550 5.1.1 User unknown (sandbox)',
            bounce_classification: 'Invalid Address',
          };
    case 'Transient':
      return { event: 'deferred', at: event.at, reason: '421 4.7.0 Try again later (sandbox)', attempt: 1 };
    case 'Opened':
      return { event: 'open', at: event.at };
    case 'LinkClicked':
      return { event: 'click', at: event.at };
  }
}

/**
 * The summary status of the Email Logs: `processed | delivered | deferred | dropped | bounced |
 * blocked`, where `delivered` stands for a delivery, an open or a click.
 */
function summaryStatus(events: LogsEvent[]): { status: string; reason: string | null } {
  const find = (predicate: (e: LogsEvent) => boolean) => events.findLast(predicate);
  const dropped = find((e) => e.event === 'dropped');
  if (dropped) return { status: 'dropped', reason: dropped.reason ?? null };
  const hard = find((e) => e.event === 'bounce' && e.type === 'bounce');
  if (hard) return { status: 'bounced', reason: hard.reason ?? null };
  if (find((e) => ['delivered', 'open', 'click'].includes(e.event))) return { status: 'delivered', reason: null };
  const soft = find((e) => e.event === 'bounce');
  if (soft) return { status: 'blocked', reason: soft.reason ?? null };
  const deferred = find((e) => e.event === 'deferred');
  if (deferred) return { status: 'deferred', reason: deferred.reason ?? null };
  return { status: 'processed', reason: null };
}

/** A message as the search lists it. */
function summary(record: EmailRecord, now: number): Json {
  const { status, reason } = summaryStatus(logsEvents(record, now));
  return {
    from_email: record.from,
    sg_message_id: record.messageId,
    subject: record.subject,
    to_email: record.recipients[0],
    reason,
    status,
    sg_message_id_created_at: new Date(record.createdAt).toISOString(),
  };
}

/** The Logs' and the Event Webhook's ID of a message's `index`-th event: the same event, the same ID. */
function sgEventId(record: EmailRecord, index: number): string {
  return `${record.messageId.slice(0, 22)}-${index}`;
}

/**
 * The Event Webhook's posts of a message's events, each when it happens: a JSON array (one event
 * per post here), the custom args at each event's top level, signed with the target's key over
 * the timestamp header followed by the body.
 */
function sendgridWebhooks(record: EmailRecord): PlannedWebhook[] {
  const recipient = record.recipients[0] ?? '';
  return logsEvents(record, Infinity).map((e, index) => ({
    provider: 'sendgrid',
    messageId: record.messageId,
    address: recipient,
    at: e.at,
    render: (target: WebhookTarget): RenderedWebhook | undefined => {
      if (!target.sendgridPrivateKey) return undefined;
      const { at, attempt, ...fields } = e;
      const event: Json = {
        ...record.metadata,
        email: recipient,
        timestamp: Math.floor(at / 1000),
        'smtp-id': `<${record.messageId.split('.')[0]}@sandbox.sendgrid.invalid>`,
        ...fields,
        ...(attempt === undefined ? {} : { attempt: String(attempt) }),
        ...(e.event === 'delivered' ? { response: '250 OK (sandbox)' } : {}),
        ...(record.tag === undefined ? {} : { category: [record.tag] }),
        sg_event_id: sgEventId(record, index),
        sg_message_id: record.messageId,
      };
      const body = JSON.stringify([event]);
      const timestamp = String(Math.floor(Date.now() / 1000));
      return {
        path: '/webhooks/sendgrid',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'SendGrid Event API',
          'x-twilio-email-event-webhook-signature': signSendgridWebhook(target.sendgridPrivateKey, timestamp, body),
          'x-twilio-email-event-webhook-timestamp': timestamp,
        },
        body,
      };
    },
  }));
}

/** A message with its events, as `GET /v3/logs/{sg_message_id}` shows it. */
function message(record: EmailRecord, now: number): Json {
  const events = logsEvents(record, now);
  return {
    ...summary(record, now),
    categories: record.tag === undefined ? [] : [record.tag],
    custom_args: { ...record.metadata },
    events: events.map((e, i) => {
      const { at, ...rest } = e;
      return {
        ...rest,
        sg_event_id: sgEventId(record, i),
        sg_message_id: record.messageId,
        email: record.recipients[0],
        timestamp: Math.floor(at / 1000),
        custom_args: { ...record.metadata },
      };
    }),
  };
}

/** One condition of an Email Logs query. */
interface Condition {
  field: string;
  operator: string;
  values: string[];
}

const OPERATORS: Record<string, string[]> = {
  sg_message_id: ['='],
  subject: ['='],
  to_email: ['='],
  reason: ['='],
  status: ['IN'],
  categories: ['IN'],
  sg_message_id_created_at: ['>', '<', '>=', '<='],
};

/** Parses `field op value [AND ...]`; returns the conditions or what is wrong with the query. */
export function parseQuery(query: string): Condition[] | string {
  const conditions: Condition[] = [];
  const pattern = /^\s*([a-z_]+)\s*(>=|<=|=|>|<|IN)\s*(TIMESTAMP\s*)?(?:"([^"]*)"|'([^']*)'|\(([^)]*)\))\s*(?:(AND)\s+|$)/;
  let rest = query.trim();
  if (rest === '') return conditions;
  while (rest !== '') {
    const m = pattern.exec(rest);
    if (!m) return `invalid query: cannot read "${rest.slice(0, 60)}"`;
    const [whole, field = '', operator = '', timestamp, double, single, list, and] = m;
    const allowed = OPERATORS[field];
    if (!allowed) return `invalid query: '${field}' is not a known field`;
    if (!allowed.includes(operator)) return `invalid query: ${field} does not take the operator ${operator}`;
    const isTime = field === 'sg_message_id_created_at';
    if (isTime !== (timestamp !== undefined)) return `invalid query: ${field} ${isTime ? 'needs' : 'takes no'} TIMESTAMP`;
    let values: string[];
    if (operator === 'IN') {
      if (list === undefined) return `invalid query: IN takes a list: ${field} IN ('a', 'b')`;
      values = [...list.matchAll(/'([^']*)'|"([^"]*)"/g)].map((v) => v[1] ?? v[2] ?? '');
    } else {
      if (list !== undefined) return `invalid query: ${field} ${operator} takes one value`;
      values = [double ?? single ?? ''];
    }
    if (isTime && Number.isNaN(Date.parse(values[0] ?? ''))) return `invalid query: "${values[0]}" is not a timestamp`;
    conditions.push({ field, operator, values });
    rest = rest.slice(whole.length);
    if (and === undefined && rest !== '') return `invalid query: conditions are joined by AND`;
  }
  return conditions;
}

function matches(condition: Condition, message: Json): boolean {
  const { field, operator, values } = condition;
  if (field === 'sg_message_id_created_at') {
    const at = Date.parse(String(message[field]));
    const bound = Date.parse(values[0] ?? '');
    if (operator === '>') return at > bound;
    if (operator === '<') return at < bound;
    if (operator === '>=') return at >= bound;
    return at <= bound;
  }
  if (field === 'categories') return false;
  const value = message[field];
  // Addresses are matched without regard to case; the rest exactly, as the docs say.
  if (field === 'to_email') return typeof value === 'string' && value.toLowerCase() === (values[0] ?? '').toLowerCase();
  return operator === 'IN' ? values.includes(String(value)) : value === values[0];
}

/** SendGrid's custom_args rules; returns the args or what is wrong with them. */
function checkCustomArgs(value: unknown): Record<string, string> | string {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) return 'custom_args must be an object of string values.';
  if (Buffer.byteLength(JSON.stringify(value)) > CUSTOM_ARGS_BYTES) return `custom_args may not exceed ${CUSTOM_ARGS_BYTES} bytes.`;
  const args: Record<string, string> = {};
  for (const [name, field] of Object.entries(value)) {
    if (typeof field !== 'string') return `custom_args values must be strings: '${name}'.`;
    args[name] = field;
  }
  return args;
}

function firstRecipient(body: Json): string | undefined {
  const personalizations = body['personalizations'];
  const first = Array.isArray(personalizations) && isObject(personalizations[0]) ? personalizations[0]['to'] : undefined;
  const to = Array.isArray(first) && isObject(first[0]) ? first[0]['email'] : undefined;
  return typeof to === 'string' ? to : undefined;
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
