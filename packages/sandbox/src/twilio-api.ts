/**
 * The Twilio Messages endpoints Herald uses, with Twilio's shapes: form-encoded requests,
 * snake_case JSON, RFC 2822 dates, page envelopes, errors as `{ code, message, more_info,
 * status }`, basic auth with the account SID as user name.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import twilio from 'twilio';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import { BAD_TOKEN } from './postmark-api.js';
import { plannedSteps, sentAt, smsBehaviour, stepAt, TWILIO_ERROR_MESSAGES, type SmsBehaviour } from './sms-behaviour.js';
import type { SmsRecord } from './state.js';
import type { PlannedWebhook, RenderedWebhook, WebhookTarget } from './webhooks.js';

const API = '/2010-04-01';
const BODY_LIMIT = 1600;
const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 1000;
/** Scheduled messages: SendAt between 15 minutes and 35 days ahead. */
const SCHEDULE_MIN_MS = 900_000;
const SCHEDULE_MAX_MS = 35 * 24 * 3600_000;

type Form = Record<string, string | undefined>;
type Json = Record<string, unknown>;

/** Twilio's error answer. */
export function twilioError(status: number, code: number, message: string, headers?: Record<string, string>): Answer {
  return {
    status,
    body: { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status },
    ...(headers ? { headers } : {}),
  };
}

function faultAnswer(status: 429 | 500 | 503, retryAfterSeconds: number): Answer {
  if (status === 429) return twilioError(429, 20429, 'Too Many Requests', { 'retry-after': String(retryAfterSeconds) });
  return status === 500 ? twilioError(500, 20500, 'Internal Server Error') : twilioError(503, 20503, 'Service Unavailable');
}

/** Twilio's date format: RFC 2822 in UTC, e.g. `Sat, 29 Nov 2025 14:02:17 +0000`. */
export function rfc2822(ms: number): string {
  return new Date(ms).toUTCString().replace('GMT', '+0000');
}

/** Registers the Twilio routes and the form-encoded body parser they need. */
export function registerTwilio(app: FastifyInstance, ctx: SandboxContext): void {
  const { state } = ctx;

  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    // Repeated keys (MediaUrl) keep their last value: no route here reads a list.
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  const authorize = (request: FastifyRequest, accountSid: string) => (): Answer | undefined => {
    const header = request.headers.authorization ?? '';
    const [scheme, encoded = ''] = header.split(' ');
    const decoded = scheme?.toLowerCase() === 'basic' ? Buffer.from(encoded, 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    const user = colon >= 0 ? decoded.slice(0, colon) : '';
    const password = colon >= 0 ? decoded.slice(colon + 1) : '';
    if (!accountSid.startsWith('AC') || user !== accountSid || password === '' || password === BAD_TOKEN) {
      return twilioError(401, 20003, 'Authenticate', { 'www-authenticate': 'Basic realm="Twilio API"' });
    }
    return undefined;
  };
  const slowDelay = (behaviour: SmsBehaviour): number => (behaviour === 'slow' ? ctx.slowMs : 0);
  const findMessage = (accountSid: string, file: string): SmsRecord | undefined => {
    const record = state.sms.get(file.replace(/\.json$/, ''));
    return record && record.accountSid === accountSid && file.endsWith('.json') ? record : undefined;
  };
  const notFound = (request: FastifyRequest): Answer =>
    twilioError(404, 20404, `The requested resource ${request.url.split('?')[0]} was not found`);

  app.post<{ Params: { accountSid: string }; Body: Form | undefined }>(
    `${API}/Accounts/:accountSid/Messages.json`,
    async (request, reply) => {
      const form = request.body ?? {};
      await exchange(ctx, request, reply, {
        provider: 'twilio',
        operation: 'twilio.create',
        recipient: form['To'],
        authorize: authorize(request, request.params.accountSid),
        faultAnswer,
        run: () => create(request.params.accountSid, form),
      });
    },
  );

  function create(accountSid: string, form: Form): Answer {
    const to = form['To']?.trim() ?? '';
    const body = form['Body'] ?? '';
    const from = form['From']?.trim() || null;
    const messagingServiceSid = form['MessagingServiceSid']?.trim() || null;
    if (to === '') return twilioError(400, 21604, "A 'To' phone number is required.");
    if (body === '' && !form['MediaUrl'] && !form['ContentSid']) return twilioError(400, 21602, 'Message body is required.');
    if (!from && !messagingServiceSid) return twilioError(400, 21603, "A 'From' phone number is required.");
    if (!/^\+[1-9]\d{6,14}$/.test(to)) return twilioError(400, 21211, `The 'To' number ${to} is not a valid phone number.`);
    if (form['StatusCallback'] !== undefined && !/^https?:\/\/[^/]/.test(form['StatusCallback'])) {
      return twilioError(400, 21609, `The StatusCallback URL ${form['StatusCallback']} is not a valid URL.`);
    }
    if (body.length > BODY_LIMIT) {
      return twilioError(400, 21617, `The concatenated message body exceeds the ${BODY_LIMIT} character limit.`);
    }

    const now = Date.now();
    let sendAt: number | undefined;
    // Without a Messaging Service Twilio ignores scheduling and sends at once.
    if (form['ScheduleType'] !== undefined && messagingServiceSid) {
      if (form['ScheduleType'] !== 'fixed') {
        return twilioError(400, 35126, 'The ScheduleType value provided is not supported for this channel.');
      }
      if (!form['SendAt']) return twilioError(400, 35111, "SendAt timestamp is missing. It is required when ScheduleType is 'fixed'.");
      sendAt = Date.parse(form['SendAt']);
      if (Number.isNaN(sendAt) || sendAt - now < SCHEDULE_MIN_MS || sendAt - now > SCHEDULE_MAX_MS) {
        return twilioError(400, 35114, 'Scheduling does not support this timestamp.');
      }
    }

    const behaviour = smsBehaviour(to);
    if (behaviour === 'opted_out') return twilioError(400, 21610, 'Attempt to send to unsubscribed recipient');
    if (behaviour === 'flaky') {
      const attempt = state.nextAttempt(`twilio:${to}`);
      if (attempt === 1) return faultAnswer(500, 0);
      if (attempt === 2) return faultAnswer(429, 1);
    }
    const record = state.addSms({
      sid: sid('SM'),
      accountSid,
      to,
      from,
      messagingServiceSid,
      body,
      behaviour,
      createdAt: now,
      sendAt: sendAt ?? null,
      steps: plannedSteps(behaviour, { createdAt: now, viaService: messagingServiceSid !== null, ...(sendAt ? { sendAt } : {}) }),
    });
    const statusCallback = form['StatusCallback']?.trim();
    if (statusCallback && ctx.webhooks.configured) ctx.webhooks.plan(plannedCallbacks(record, statusCallback));
    return { status: 201, body: messageJson(record, now), delayMs: slowDelay(behaviour) };
  }

  // The account itself (`herald doctor`'s authenticated call that sends nothing).
  app.get<{ Params: { file: string } }>(`${API}/Accounts/:file`, async (request, reply) => {
    const accountSid = request.params.file.replace(/\.json$/, '');
    await exchange(ctx, request, reply, {
      provider: 'twilio',
      operation: 'twilio.account',
      recipient: undefined,
      authorize: authorize(request, accountSid),
      faultAnswer,
      run: () =>
        request.params.file.endsWith('.json')
          ? {
              status: 200,
              body: { sid: accountSid, friendly_name: 'Herald sandbox', status: 'active', type: 'Full', date_created: rfc2822(0) },
            }
          : notFound(request),
    });
  });

  app.get<{ Params: { accountSid: string; file: string } }>(`${API}/Accounts/:accountSid/Messages/:file`, async (request, reply) => {
    const record = findMessage(request.params.accountSid, request.params.file);
    await exchange(ctx, request, reply, {
      provider: 'twilio',
      operation: 'twilio.fetch',
      recipient: record?.to,
      authorize: authorize(request, request.params.accountSid),
      faultAnswer,
      run: () => {
        if (!record) return notFound(request);
        if (record.behaviour === 'hang_status') return { status: 0, hang: true };
        return { status: 200, body: messageJson(record, Date.now()), delayMs: slowDelay(record.behaviour) };
      },
    });
  });

  app.post<{ Params: { accountSid: string; file: string }; Body: Form | undefined }>(
    `${API}/Accounts/:accountSid/Messages/:file`,
    async (request, reply) => {
      const record = findMessage(request.params.accountSid, request.params.file);
      const form = request.body ?? {};
      await exchange(ctx, request, reply, {
        provider: 'twilio',
        operation: 'twilio.cancel',
        recipient: record?.to,
        authorize: authorize(request, request.params.accountSid),
        faultAnswer,
        run: () => {
          if (!record) return notFound(request);
          const now = Date.now();
          if (form['Status'] === 'canceled') {
            if (stepAt(record.steps, now).status !== 'scheduled') {
              return twilioError(400, 30409, 'This message cannot be canceled.');
            }
            record.steps = [...record.steps.filter((s) => s.at <= now), { status: 'canceled', at: now }];
          } else if (form['Body'] === '') {
            // Redaction: Twilio lets the body of a message be blanked.
            record.body = '';
          } else {
            return twilioError(400, 20001, 'Only Status=canceled or an empty Body can be updated.');
          }
          return { status: 200, body: messageJson(record, now), delayMs: slowDelay(record.behaviour) };
        },
      });
    },
  );

  app.get<{ Params: { accountSid: string }; Querystring: Form }>(`${API}/Accounts/:accountSid/Messages.json`, async (request, reply) => {
    const query = request.query;
    const to = phoneParam(query['To']);
    await exchange(ctx, request, reply, {
      provider: 'twilio',
      operation: 'twilio.list',
      recipient: to,
      authorize: authorize(request, request.params.accountSid),
      faultAnswer,
      run: () => list(request.params.accountSid, query, to),
    });
  });

  function list(accountSid: string, query: Form, to: string | undefined): Answer {
    const pageSize = query['PageSize'] === undefined ? DEFAULT_PAGE_SIZE : Number(query['PageSize']);
    const page = query['Page'] === undefined ? 0 : Number(query['Page']);
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
      return twilioError(400, 20001, `PageSize must be between 1 and ${MAX_PAGE_SIZE}.`);
    }
    if (!Number.isInteger(page) || page < 0) return twilioError(400, 20001, 'Page must be a non-negative integer.');
    const now = Date.now();
    const from = phoneParam(query['From']);
    const sent = dateSentFilter(query);
    if (typeof sent === 'string') return twilioError(400, 20001, sent);

    const matches = [...state.sms.values()]
      .filter((r) => r.accountSid === accountSid && (!to || r.to === to) && (!from || r.from === from))
      .filter((r) => sent(sentAt(r.steps, now)))
      .sort((a, b) => b.createdAt - a.createdAt || b.seq - a.seq);

    // A PageToken (`PA` + the last SID of the previous page) keeps paging stable while new
    // messages arrive; without one, the page number decides.
    const token = query['PageToken'];
    const after = token?.startsWith('PA') ? matches.findIndex((r) => r.sid === token.slice(2)) : -1;
    const start = after >= 0 ? after + 1 : page * pageSize;
    const messages = matches.slice(start, start + pageSize);
    const last = messages.at(-1);

    const path = `${API}/Accounts/${accountSid}/Messages.json`;
    const filters = Object.entries(query).filter(
      ([name, value]) => value !== undefined && !['PageSize', 'Page', 'PageToken'].includes(name),
    ) as Array<[string, string]>;
    const pageUri = (pageNumber: number, pageToken?: string): string => {
      const params = new URLSearchParams([...filters, ['PageSize', String(pageSize)], ['Page', String(pageNumber)]]);
      if (pageToken) params.set('PageToken', pageToken);
      return `${path}?${params.toString()}`;
    };
    return {
      status: 200,
      body: {
        end: messages.length > 0 ? start + messages.length - 1 : start,
        first_page_uri: pageUri(0),
        messages: messages.map((r) => messageJson(r, now)),
        next_page_uri: last && start + pageSize < matches.length ? pageUri(page + 1, `PA${last.sid}`) : null,
        page,
        page_size: pageSize,
        previous_page_uri: page > 0 ? pageUri(page - 1) : null,
        start,
        uri: pageUri(page, token),
      },
      delayMs: to ? slowDelay(smsBehaviour(to)) : 0,
    };
  }
}

/**
 * The status callbacks Twilio posts to a message's StatusCallback URL, one per status change
 * after it leaves the schedule: form bodies signed (`X-Twilio-Signature`) with the auth token
 * over the URL Herald is reached at and the parameters, sent to the callback's path and query.
 */
function plannedCallbacks(record: SmsRecord, statusCallback: string): PlannedWebhook[] {
  const callback = new URL(statusCallback);
  const path = callback.pathname + callback.search;
  return record.steps
    .filter((step) => step.status !== 'scheduled')
    .map((step) => {
      const params: Record<string, string> = {
        AccountSid: record.accountSid,
        ApiVersion: '2010-04-01',
        From: record.from ?? '+15005550006',
        MessageSid: record.sid,
        MessageStatus: step.status,
        SmsSid: record.sid,
        SmsStatus: step.status,
        To: record.to,
      };
      if (record.messagingServiceSid) params['MessagingServiceSid'] = record.messagingServiceSid;
      if (step.errorCode !== undefined) params['ErrorCode'] = String(step.errorCode);
      return {
        provider: 'twilio',
        messageId: record.sid,
        address: record.to,
        at: Math.max(step.at, record.createdAt),
        render: (target: WebhookTarget): RenderedWebhook | undefined => {
          if (target.twilioAuthToken === undefined) return undefined;
          const signedUrl = (target.publicUrl ?? target.url).replace(/\/+$/, '') + path;
          return {
            path,
            headers: {
              'content-type': 'application/x-www-form-urlencoded',
              'x-twilio-signature': twilio.getExpectedTwilioSignature(target.twilioAuthToken, signedUrl, params),
              'i-twilio-idempotency-token': `${record.sid}-${step.status}`,
              'user-agent': 'TwilioProxy/1.1',
            },
            body: new URLSearchParams(params).toString(),
          };
        },
      };
    });
}

/** A message resource as Twilio renders it at `now`. */
function messageJson(record: SmsRecord, now: number): Json {
  const step = stepAt(record.steps, now);
  const dateSent = sentAt(record.steps, now);
  const uri = `${API}/Accounts/${record.accountSid}/Messages/${record.sid}.json`;
  return {
    account_sid: record.accountSid,
    api_version: '2010-04-01',
    body: record.body,
    date_created: rfc2822(record.createdAt),
    date_sent: dateSent === null ? null : rfc2822(dateSent),
    date_updated: rfc2822(Math.max(step.at, record.createdAt)),
    direction: 'outbound-api',
    error_code: step.errorCode ?? null,
    error_message: step.errorCode === undefined ? null : (TWILIO_ERROR_MESSAGES[step.errorCode] ?? null),
    // With a Messaging Service and no From, Twilio picks the sender when the message leaves the queue.
    from: record.from ?? (step.status === 'accepted' || step.status === 'scheduled' ? null : '+15005550006'),
    messaging_service_sid: record.messagingServiceSid,
    num_media: '0',
    num_segments: String(segments(record.body)),
    price: null,
    price_unit: 'USD',
    sid: record.sid,
    status: step.status,
    subresource_uris: { media: `${API}/Accounts/${record.accountSid}/Messages/${record.sid}/Media.json` },
    to: record.to,
    uri,
  };
}

/** GSM-7 segments: 160 characters alone, 153 per part when concatenated. */
function segments(body: string): number {
  return body.length <= 160 ? 1 : Math.ceil(body.length / 153);
}

/** `SM` / `AC` / `MG` followed by 32 hex digits, as Twilio SIDs are. */
export function sid(prefix: string): string {
  return prefix + randomBytes(16).toString('hex');
}

/** A phone number from a query string, where an unencoded `+` arrives as a space. */
function phoneParam(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  return value.replace(/^ /, '+').trim();
}

/**
 * Twilio's DateSent filters: `DateSent` (that day, or that second), `DateSent<` (on or before)
 * and `DateSent>` (on or after), each a `YYYY-MM-DD` date or a `YYYY-MM-DDTHH:mm:ssZ` time.
 * A message without a date sent (still queued) matches no DateSent filter.
 */
function dateSentFilter(query: Form): ((dateSent: number | null) => boolean) | string {
  const bounds: Array<(t: number) => boolean> = [];
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || !name.startsWith('DateSent')) continue;
    const dateOnly = /^\d{4}-\d{2}-\d{2}$/.test(value);
    const start = Date.parse(dateOnly ? `${value}T00:00:00Z` : value);
    if (Number.isNaN(start)) return `${name} must be a date (YYYY-MM-DD) or a time (YYYY-MM-DDTHH:mm:ssZ).`;
    const end = start + (dateOnly ? 86_400_000 : 1000);
    if (name === 'DateSent') bounds.push((t) => t >= start && t < end);
    else if (name === 'DateSent<') bounds.push((t) => t < end);
    else if (name === 'DateSent>') bounds.push((t) => t >= start);
  }
  return (dateSent) => bounds.length === 0 || (dateSent !== null && bounds.every((inBounds) => inBounds(dateSent)));
}
