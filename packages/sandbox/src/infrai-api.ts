/**
 * The Infrai endpoints Herald uses (email and SMS), over the shared sandbox model.
 *
 * Vendor-stated and copied here: `Authorization: Bearer`, canonical JSON answers (sorted keys,
 * no spaces, trailing newline), the envelope `{ ok, data, error, metadata }`, the send
 * parameters and records (`email_id` / `sms_id`, `state`, `to`, `vendor`, `created_at`), the
 * `Idempotency-Key` header and the body `idempotency_key` ("identical retries return the same
 * result"), and 402 `INSUFFICIENT_CREDIT`.
 *
 * DEFINED BY THIS EMULATOR, not confirmed by Infrai (docs/PROVIDERS.md, Infrai): the `state`
 * and event vocabularies, the event list's shape, the SMS status read's fields, every error
 * code but `INSUFFICIENT_CREDIT`, the `error` object's fields, the `Idempotent-Replayed`
 * answer header, and the 409 for a key reused for another recipient. The adapter
 * (src/providers/infrai.ts) reads exactly what is defined here.
 */
import { randomBytes } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { emailAddress, planEmail, statusHangs, type EmailBehaviour } from './email-behaviour.js';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import { BAD_TOKEN } from './postmark-api.js';
import { plannedSteps, smsBehaviour, stepAt, type SmsBehaviour, type TwilioStatus } from './sms-behaviour.js';
import type { EmailEvent, EmailRecord, SmsRecord } from './state.js';

/** The API key the emulator answers 402 INSUFFICIENT_CREDIT for (an account out of credit). */
export const NO_CREDIT_KEY = 'no-credit';
/** Paths the Infrai emulator owns: its not-found and error answers use Infrai's envelope. */
export const INFRAI_PATHS = ['/v1/email/', '/v1/sms/'];
/** The vendor name the emulator reports in records and metadata. */
const VENDOR = 'sandbox';
/** The account every emulated Infrai SMS belongs to (the shared SMS store is keyed by account). */
const INFRAI_ACCOUNT = 'infrai';
const BODY_LIMIT = 1600;
const MAX_EVENTS = 1000;

/** Infrai's error codes as this emulator answers them; only INSUFFICIENT_CREDIT is vendor-stated. */
export const INFRAI_ERROR_CODES = {
  unauthorized: 'UNAUTHORIZED',
  insufficientCredit: 'INSUFFICIENT_CREDIT',
  invalid: 'INVALID_REQUEST',
  invalidRecipient: 'INVALID_RECIPIENT',
  suppressed: 'RECIPIENT_SUPPRESSED',
  optedOut: 'RECIPIENT_OPTED_OUT',
  idempotencyConflict: 'IDEMPOTENCY_KEY_REUSED',
  notFound: 'NOT_FOUND',
  rateLimited: 'RATE_LIMITED',
  internal: 'INTERNAL_ERROR',
  unavailable: 'SERVICE_UNAVAILABLE',
} as const;

/** Email event types of the event list (emulator-defined). */
export type InfraiEmailEventType = 'queued' | 'sent' | 'delivered' | 'deferred' | 'bounced' | 'opened' | 'clicked';

/** SMS `state`s of the status read (emulator-defined): the shared timeline's Twilio words, `accepted` shown as `queued`. */
const SMS_STATE: Record<TwilioStatus, string> = {
  accepted: 'queued',
  scheduled: 'scheduled',
  queued: 'queued',
  sending: 'sending',
  sent: 'sent',
  delivered: 'delivered',
  undelivered: 'undelivered',
  failed: 'failed',
  canceled: 'canceled',
};

/** The SMS `error_code`s for the shared timeline's carrier errors (emulator-defined). */
const SMS_ERROR_CODE: Record<number, string> = {
  30003: 'UNREACHABLE_DESTINATION',
  30006: 'LANDLINE_OR_UNREACHABLE_CARRIER',
};

type Json = Record<string, unknown>;

/** A request id as Infrai's metadata carries it: a UUID v7 (time-ordered). */
function uuidV7(now = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** An answer in Infrai's envelope, as canonical JSON with a trailing newline. */
function envelope(status: number, data: unknown, error: { code: string; message: string } | null, extra: Partial<Answer> = {}): Answer {
  const body = {
    ok: error === null,
    data: error === null ? data : null,
    error,
    metadata: { cost_usd: 0, latency_ms: extra.delayMs ?? 0, vendor: VENDOR, cache_hit: false, request_id: uuidV7() },
  };
  return {
    ...extra,
    status,
    body: `${canonicalize(body)}\n`,
    headers: { 'content-type': 'application/json; charset=utf-8', ...extra.headers },
  };
}

/** Infrai's error answer. */
export function infraiError(status: number, code: string, message: string, headers?: Record<string, string>): Answer {
  return envelope(status, null, { code, message }, headers ? { headers } : {});
}

function faultAnswer(status: 429 | 500 | 503, retryAfterSeconds: number): Answer {
  if (status === 429) {
    return infraiError(429, INFRAI_ERROR_CODES.rateLimited, 'Too many requests; retry later.', {
      'retry-after': String(retryAfterSeconds),
    });
  }
  return status === 500
    ? infraiError(500, INFRAI_ERROR_CODES.internal, 'Internal error')
    : infraiError(503, INFRAI_ERROR_CODES.unavailable, 'Service unavailable');
}

/** Registers the Infrai routes. */
export function registerInfrai(app: FastifyInstance, ctx: SandboxContext): void {
  const { state } = ctx;

  const authorize = (request: FastifyRequest) => (): Answer | undefined => {
    const [scheme, key = ''] = (request.headers.authorization ?? '').split(' ');
    if (scheme?.toLowerCase() !== 'bearer' || key.trim() === '' || key === BAD_TOKEN) {
      return infraiError(401, INFRAI_ERROR_CODES.unauthorized, 'Missing or invalid API key.');
    }
    if (key === NO_CREDIT_KEY) {
      return infraiError(402, INFRAI_ERROR_CODES.insufficientCredit, 'Insufficient credit; top up with POST /v1/account/topup.');
    }
    return undefined;
  };
  const emailDelay = (behaviour: EmailBehaviour): number => (behaviour === 'slow' ? ctx.slowMs : 0);
  const smsDelay = (behaviour: SmsBehaviour): number => (behaviour === 'slow' ? ctx.slowMs : 0);

  /** The idempotency key of a send: header and body must agree when both are given. */
  function sendKey(request: FastifyRequest, body: Json): string | undefined | Answer {
    const header = request.headers['idempotency-key'];
    const fromHeader = typeof header === 'string' && header !== '' ? header : undefined;
    const fromBody = typeof body['idempotency_key'] === 'string' && body['idempotency_key'] !== '' ? body['idempotency_key'] : undefined;
    if (fromHeader !== undefined && fromBody !== undefined && fromHeader !== fromBody) {
      return infraiError(400, INFRAI_ERROR_CODES.invalid, 'Idempotency-Key header and idempotency_key differ.');
    }
    return fromHeader ?? fromBody;
  }

  app.post('/v1/email/send', async (request, reply) => {
    const body: Json = isObject(request.body) ? request.body : {};
    const to = firstRecipient(body['to']);
    await exchange(ctx, request, reply, {
      provider: 'infrai',
      operation: 'infrai.email.send',
      recipient: to,
      authorize: authorize(request),
      faultAnswer,
      run: () => sendEmail(request, body, to),
    });
  });

  function sendEmail(request: FastifyRequest, body: Json, to: string): Answer {
    const key = sendKey(request, body);
    if (typeof key === 'object') return key;
    if (to === '') return infraiError(400, INFRAI_ERROR_CODES.invalid, '`to` is required.');
    if (!/^[^@\s]+@[^@\s]+$/.test(to))
      return infraiError(400, INFRAI_ERROR_CODES.invalidRecipient, `\`to\` is not an email address: ${to}`);
    const subject = typeof body['subject'] === 'string' ? body['subject'] : '';
    if (subject === '') return infraiError(400, INFRAI_ERROR_CODES.invalid, '`subject` is required.');
    const text = optionalString(body['text']);
    const html = optionalString(body['html']);
    if (!text && !html && !optionalString(body['template_id'])) {
      return infraiError(400, INFRAI_ERROR_CODES.invalid, 'One of `text`, `html` or `template_id` is required.');
    }

    const replay = key === undefined ? undefined : state.idempotencyKeys.get(`infrai.email:${key}`);
    if (replay !== undefined) {
      const original = state.emails.get(replay);
      if (original) {
        if (original.recipients[0]?.toLowerCase() !== to.toLowerCase()) {
          return infraiError(409, INFRAI_ERROR_CODES.idempotencyConflict, 'This idempotency key was used for another request.');
        }
        return envelope(200, emailRecordJson(original, Date.now()), null, {
          headers: { 'idempotent-replayed': 'true' },
          delayMs: emailDelay(original.plan.behaviour),
        });
      }
    }

    const plan = planEmail(to);
    if (plan.behaviour === 'rejected') return infraiError(422, INFRAI_ERROR_CODES.invalidRecipient, `The sandbox rejects ${to}.`);
    if (plan.behaviour === 'inactive') {
      return infraiError(422, INFRAI_ERROR_CODES.suppressed, `${to} is on the suppression list (an earlier hard bounce or complaint).`);
    }
    if (plan.behaviour === 'flaky') {
      const attempt = state.nextAttempt(`infrai:${to.toLowerCase()}`);
      if (attempt === 1) return faultAnswer(500, 0);
      if (attempt === 2) return faultAnswer(429, 1);
    }
    const createdAt = Date.now();
    const fields: Omit<EmailRecord, 'events'> = {
      messageId: `eml_${randomBytes(12).toString('hex')}`,
      from: optionalString(body['from']) ?? 'noreply@infrai.sandbox',
      to,
      recipients: [to],
      subject,
      messageStream: 'infrai',
      metadata: key === undefined ? {} : { idempotency_key: key },
      plan,
      createdAt,
    };
    if (text !== undefined) fields.textBody = text;
    if (html !== undefined) fields.htmlBody = html;
    const record = state.addEmail(fields);
    if (key !== undefined) state.rememberIdempotencyKey(`infrai.email:${key}`, record.messageId);
    return envelope(200, emailRecordJson(record, createdAt), null, { delayMs: emailDelay(plan.behaviour) });
  }

  app.get<{ Params: { id: string } }>('/v1/email/get/:id', async (request, reply) => {
    const record = infraiEmail(request.params.id);
    await exchange(ctx, request, reply, {
      provider: 'infrai',
      operation: 'infrai.email.get',
      recipient: record?.recipients[0],
      authorize: authorize(request),
      faultAnswer,
      run: () => {
        if (!record) return infraiError(404, INFRAI_ERROR_CODES.notFound, `No email ${request.params.id}.`);
        if (statusHangs(record.plan.behaviour)) return { status: 0, hang: true };
        return envelope(200, emailRecordJson(record, Date.now()), null, { delayMs: emailDelay(record.plan.behaviour) });
      },
    });
  });

  app.get<{ Querystring: Record<string, string | undefined> }>('/v1/email/event/list', async (request, reply) => {
    const messageId = optionalString(request.query['message_id']);
    const record = messageId === undefined ? undefined : infraiEmail(messageId);
    await exchange(ctx, request, reply, {
      provider: 'infrai',
      operation: 'infrai.email.events',
      recipient: record?.recipients[0],
      authorize: authorize(request),
      faultAnswer,
      run: () => {
        const limit = request.query['limit'] === undefined ? 100 : Number(request.query['limit']);
        if (!Number.isInteger(limit) || limit < 1 || limit > MAX_EVENTS) {
          return infraiError(400, INFRAI_ERROR_CODES.invalid, `\`limit\` must be from 1 to ${MAX_EVENTS}.`);
        }
        const now = Date.now();
        if (record && statusHangs(record.plan.behaviour)) return { status: 0, hang: true };
        // Events are listed once indexed, like a search; an unknown message has none.
        const records = messageId === undefined ? [...state.emails.values()].filter(isInfrai) : record ? [record] : [];
        const items = records
          .filter((r) => r.createdAt + ctx.indexLagMs <= now)
          .flatMap((r) => emailEvents(r, now))
          .sort((a, b) => String(a['occurred_at']).localeCompare(String(b['occurred_at'])))
          .slice(0, limit);
        return envelope(200, { items, next_cursor: null }, null, { delayMs: record ? emailDelay(record.plan.behaviour) : 0 });
      },
    });
  });

  app.post('/v1/sms/send', async (request, reply) => {
    const body: Json = isObject(request.body) ? request.body : {};
    const to = typeof body['to'] === 'string' ? body['to'].trim() : '';
    await exchange(ctx, request, reply, {
      provider: 'infrai',
      operation: 'infrai.sms.send',
      recipient: to,
      authorize: authorize(request),
      faultAnswer,
      run: () => sendSms(request, body, to),
    });
  });

  function sendSms(request: FastifyRequest, body: Json, to: string): Answer {
    const key = sendKey(request, body);
    if (typeof key === 'object') return key;
    const text = typeof body['body'] === 'string' ? body['body'] : '';
    if (to === '') return infraiError(400, INFRAI_ERROR_CODES.invalid, '`to` is required.');
    if (!/^\+[1-9]\d{6,14}$/.test(to)) return infraiError(400, INFRAI_ERROR_CODES.invalidRecipient, `\`to\` is not an E.164 number: ${to}`);
    if (text === '' && !optionalString(body['template_id'])) return infraiError(400, INFRAI_ERROR_CODES.invalid, '`body` is required.');
    if (text.length > BODY_LIMIT) return infraiError(400, INFRAI_ERROR_CODES.invalid, `\`body\` is longer than ${BODY_LIMIT} characters.`);

    const replay = key === undefined ? undefined : state.sms.get(state.idempotencyKeys.get(`infrai.sms:${key}`) ?? '');
    if (replay) {
      if (replay.to !== to)
        return infraiError(409, INFRAI_ERROR_CODES.idempotencyConflict, 'This idempotency key was used for another request.');
      return envelope(200, smsRecordJson(replay, Date.now()), null, {
        headers: { 'idempotent-replayed': 'true' },
        delayMs: smsDelay(replay.behaviour),
      });
    }

    const behaviour = smsBehaviour(to);
    if (behaviour === 'opted_out') return infraiError(422, INFRAI_ERROR_CODES.optedOut, `${to} opted out of messages (STOP).`);
    if (behaviour === 'flaky') {
      const attempt = state.nextAttempt(`infrai:${to}`);
      if (attempt === 1) return faultAnswer(500, 0);
      if (attempt === 2) return faultAnswer(429, 1);
    }
    const now = Date.now();
    const record = state.addSms({
      sid: `sms_${randomBytes(12).toString('hex')}`,
      accountSid: INFRAI_ACCOUNT,
      to,
      from: optionalString(body['from']) ?? null,
      messagingServiceSid: null,
      body: text,
      behaviour,
      createdAt: now,
      sendAt: null,
      steps: plannedSteps(behaviour, { createdAt: now, viaService: false }),
    });
    if (key !== undefined) state.rememberIdempotencyKey(`infrai.sms:${key}`, record.sid);
    return envelope(200, smsRecordJson(record, now), null, { delayMs: smsDelay(behaviour) });
  }

  app.get<{ Params: { id: string } }>('/v1/sms/status/:id', async (request, reply) => {
    const found = state.sms.get(request.params.id);
    const record = found?.accountSid === INFRAI_ACCOUNT ? found : undefined;
    await exchange(ctx, request, reply, {
      provider: 'infrai',
      operation: 'infrai.sms.status',
      recipient: record?.to,
      authorize: authorize(request),
      faultAnswer,
      run: () => {
        if (!record) return infraiError(404, INFRAI_ERROR_CODES.notFound, `No SMS ${request.params.id}.`);
        if (record.behaviour === 'hang_status') return { status: 0, hang: true };
        return envelope(200, smsRecordJson(record, Date.now()), null, { delayMs: smsDelay(record.behaviour) });
      },
    });
  });

  function infraiEmail(id: string): EmailRecord | undefined {
    const record = state.emails.get(id);
    return record && isInfrai(record) ? record : undefined;
  }
}

const isInfrai = (record: EmailRecord): boolean => record.messageStream === 'infrai';

/** `to` as a string or the first of a list, bare. */
function firstRecipient(value: unknown): string {
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? emailAddress(first) : '';
}

/** The email's delivery `state` at `now` (emulator-defined): engagement never changes it. */
export function infraiEmailState(record: EmailRecord, now: number): string {
  let state = 'sent';
  for (const event of record.events) {
    if (event.at > now) continue;
    if (event.type === 'Delivered') state = 'delivered';
    else if (event.type === 'Bounced') state = event.bounceType === 'HardBounce' ? 'bounced' : state === 'delivered' ? state : 'deferred';
    else if (event.type === 'Transient' && state === 'sent') state = 'deferred';
  }
  return state;
}

/** EmailRecord, as `email.send` and `email.get` answer it. */
function emailRecordJson(record: EmailRecord, now: number): Json {
  return {
    email_id: record.messageId,
    state: infraiEmailState(record, now),
    to: record.to,
    subject: record.subject,
    vendor: VENDOR,
    created_at: new Date(record.createdAt).toISOString(),
  };
}

/** The event list's rows for one email at `now`: `queued` and `sent` at creation, then the shared timeline. */
function emailEvents(record: EmailRecord, now: number): Json[] {
  const row = (type: InfraiEmailEventType, at: number, index: number, extra: Json = {}): Json => ({
    event_id: `${record.messageId}.${index}`,
    message_id: record.messageId,
    type,
    recipient: record.recipients[0],
    occurred_at: new Date(at).toISOString(),
    ...extra,
  });
  const rows = [row('queued', record.createdAt, 0), row('sent', record.createdAt, 1)];
  record.events.forEach((event, i) => {
    if (event.at <= now) rows.push(row(eventType(event), event.at, i + 2, bounceFields(event)));
  });
  return rows;
}

function eventType(event: EmailEvent): InfraiEmailEventType {
  switch (event.type) {
    case 'Delivered':
      return 'delivered';
    case 'Bounced':
      return 'bounced';
    case 'Transient':
      return 'deferred';
    case 'Opened':
      return 'opened';
    case 'LinkClicked':
      return 'clicked';
  }
}

function bounceFields(event: EmailEvent): Json {
  if (event.type !== 'Bounced') return {};
  return event.bounceType === 'HardBounce'
    ? { bounce_type: 'hard', reason: 'smtp;550 5.1.1 mailbox does not exist (sandbox)' }
    : { bounce_type: 'soft', reason: 'smtp;452 4.2.2 mailbox full (sandbox)' };
}

/** SmsRecord, as `sms.send` and the status read answer it. */
function smsRecordJson(record: SmsRecord, now: number): Json {
  const step = stepAt(record.steps, now);
  return {
    sms_id: record.sid,
    to: record.to,
    state: SMS_STATE[step.status],
    vendor: VENDOR,
    segments: record.body.length <= 160 ? 1 : Math.ceil(record.body.length / 153),
    created_at: new Date(record.createdAt).toISOString(),
    updated_at: new Date(Math.max(step.at, record.createdAt)).toISOString(),
    error_code: step.errorCode === undefined ? null : (SMS_ERROR_CODE[step.errorCode] ?? String(step.errorCode)),
  };
}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
