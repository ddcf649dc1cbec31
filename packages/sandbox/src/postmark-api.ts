/**
 * The Postmark endpoints Herald uses, with Postmark's shapes: PascalCase JSON, errors as
 * 422 `{ ErrorCode, Message }`, auth by `X-Postmark-Server-Token`.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { emailAddress, planEmail, statusHangs, type EmailBehaviour } from './email-behaviour.js';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import type { BounceRecord, EmailEvent, EmailRecord } from './state.js';
import type { PlannedWebhook, RenderedWebhook, WebhookTarget } from './webhooks.js';

/** The token that the emulator refuses, to exercise 401 handling. */
export const BAD_TOKEN = 'bad-token';

const METADATA_LIMITS = { fields: 10, nameLength: 20, valueLength: 80 };
const SEARCH_MAX_COUNT = 500;
const SEARCH_WINDOW = 10_000;

const BOUNCE_INFO = {
  HardBounce: {
    typeCode: 1,
    name: 'Hard bounce',
    description: 'The server was unable to deliver your message (ex: unknown user, mailbox not found).',
    details: 'smtp;550 5.1.1 The email account that you tried to reach does not exist (sandbox)',
  },
  SoftBounce: {
    typeCode: 4096,
    name: 'Soft bounce/Undeliverable',
    description: 'Unable to temporarily deliver this email.',
    details: 'smtp;452 4.2.2 The email account that you tried to reach is over quota (sandbox)',
  },
} as const;

type Json = Record<string, unknown>;

/** Postmark's error answer. */
function postmarkError(status: number, errorCode: number, message: string, headers?: Record<string, string>): Answer {
  return { status, body: { ErrorCode: errorCode, Message: message }, ...(headers ? { headers } : {}) };
}

function faultAnswer(status: 429 | 500 | 503, retryAfterSeconds: number): Answer {
  if (status === 429) {
    return postmarkError(429, 0, 'Rate limit exceeded. Please retry later.', { 'retry-after': String(retryAfterSeconds) });
  }
  return postmarkError(status, 0, status === 500 ? 'Internal Server Error' : 'Service Unavailable');
}

/** Registers the Postmark routes. */
export function registerPostmark(app: FastifyInstance, ctx: SandboxContext): void {
  const { state } = ctx;

  const authorize = (token: unknown) => (): Answer | undefined => {
    if (typeof token !== 'string' || token.trim() === '') {
      return postmarkError(
        401,
        10,
        'No Account or Server API tokens were supplied in the HTTP headers. Please add a header for either X-Postmark-Server-Token or X-Postmark-Account-Token.',
      );
    }
    if (token === BAD_TOKEN) {
      return postmarkError(
        401,
        10,
        'The Server Token you provided in the X-Postmark-Server-Token request header was invalid. Please verify that you are using a valid token.',
      );
    }
    return undefined;
  };
  const slowDelay = (behaviour: EmailBehaviour): number => (behaviour === 'slow' ? ctx.slowMs : 0);
  const indexed = (record: EmailRecord, now: number): boolean => record.createdAt + ctx.indexLagMs <= now;

  app.post('/email', async (request, reply) => {
    const body: Json = isObject(request.body) ? request.body : {};
    const to = typeof body['To'] === 'string' ? body['To'] : '';
    await exchange(ctx, request, reply, {
      provider: 'postmark',
      operation: 'postmark.send',
      recipient: to,
      authorize: authorize(request.headers['x-postmark-server-token']),
      faultAnswer,
      run: () => send(body, to),
    });
  });

  function send(body: Json, to: string): Answer {
    const from = typeof body['From'] === 'string' ? body['From'].trim() : '';
    if (from === '') return postmarkError(422, 300, "Invalid 'From' address: ''.");
    const recipients = to
      .split(',')
      .map(emailAddress)
      .filter((r) => r !== '');
    if (recipients.length === 0) return postmarkError(422, 300, 'Zero recipients specified');
    const invalid = recipients.find((r) => !/^[^@\s]+@[^@\s]+$/.test(r));
    if (invalid !== undefined) {
      return postmarkError(422, 300, `Error parsing 'To': Illegal email address '${invalid}'. It must contain the '@' symbol.`);
    }
    const textBody = optionalString(body['TextBody']);
    const htmlBody = optionalString(body['HtmlBody']);
    if (!textBody && !htmlBody) return postmarkError(422, 300, 'Provide either email TextBody or HtmlBody or both.');
    const metadata = checkMetadata(body['Metadata']);
    if (typeof metadata === 'string') return postmarkError(422, 300, metadata);

    const first = recipients[0] as string;
    const plan = planEmail(first);
    const delayMs = slowDelay(plan.behaviour);
    if (plan.behaviour === 'rejected') {
      return postmarkError(422, 300, `Invalid email request: the sandbox rejects '${first}'.`);
    }
    if (plan.behaviour === 'inactive') {
      return postmarkError(
        422,
        406,
        `You tried to send to recipient(s) that have been marked as inactive. Found inactive addresses: ${first}. Inactive recipients are ones that have generated a hard bounce, a spam complaint, or a manual suppression.`,
      );
    }
    if (plan.behaviour === 'flaky') {
      const attempt = state.nextAttempt(`postmark:${first.toLowerCase()}`);
      if (attempt === 1) return faultAnswer(500, 0);
      if (attempt === 2) return faultAnswer(429, 1);
    }

    const createdAt = Date.now();
    const fields: Omit<EmailRecord, 'events'> = {
      messageId: randomUUID(),
      from,
      to,
      recipients,
      subject: typeof body['Subject'] === 'string' ? body['Subject'] : '',
      messageStream: optionalString(body['MessageStream']) ?? 'outbound',
      metadata,
      plan,
      createdAt,
    };
    if (textBody !== undefined) fields.textBody = textBody;
    if (htmlBody !== undefined) fields.htmlBody = htmlBody;
    const tag = optionalString(body['Tag']);
    if (tag !== undefined) fields.tag = tag;
    const record = state.addEmail(fields);
    if (ctx.webhooks.configured) ctx.webhooks.plan(plannedWebhooks(record));
    return {
      status: 200,
      body: {
        To: to,
        SubmittedAt: new Date(createdAt).toISOString(),
        MessageID: record.messageId,
        ErrorCode: 0,
        Message: 'OK',
      },
      delayMs,
    };
  }

  app.get<{ Params: { id: string } }>('/messages/outbound/:id/details', async (request, reply) => {
    const record = state.emails.get(request.params.id);
    await exchange(ctx, request, reply, {
      provider: 'postmark',
      operation: 'postmark.details',
      recipient: record?.recipients[0],
      authorize: authorize(request.headers['x-postmark-server-token']),
      faultAnswer,
      run: () => {
        const now = Date.now();
        // Right after sending Postmark has not indexed the message yet, and says so like this.
        if (!record || !indexed(record, now)) return postmarkError(422, 701, 'This message was not found.');
        if (statusHangs(record.plan.behaviour)) return { status: 0, hang: true };
        return { status: 200, body: details(record, now), delayMs: slowDelay(record.plan.behaviour) };
      },
    });
  });

  // The server the token belongs to (`herald doctor`'s authenticated call that sends nothing).
  app.get('/server', async (request, reply) => {
    await exchange(ctx, request, reply, {
      provider: 'postmark',
      operation: 'postmark.server',
      recipient: undefined,
      authorize: authorize(request.headers['x-postmark-server-token']),
      faultAnswer,
      run: () => ({
        status: 200,
        body: { ID: 1, Name: 'Herald sandbox', ApiTokens: ['[redacted]'], Color: 'Blue', DeliveryType: 'Sandbox' },
      }),
    });
  });

  app.get<{ Querystring: Record<string, string | undefined> }>('/messages/outbound', async (request, reply) => {
    const query = request.query;
    const recipient = query['recipient'];
    await exchange(ctx, request, reply, {
      provider: 'postmark',
      operation: 'postmark.search',
      recipient,
      authorize: authorize(request.headers['x-postmark-server-token']),
      faultAnswer,
      run: () => search(query, recipient),
    });
  });

  function search(query: Record<string, string | undefined>, recipient: string | undefined): Answer {
    const count = Number(query['count']);
    const offset = Number(query['offset'] ?? 0);
    if (!Number.isInteger(count) || count < 1 || count > SEARCH_MAX_COUNT) {
      return postmarkError(422, 0, `The 'count' parameter must be between 1 and ${SEARCH_MAX_COUNT}.`);
    }
    if (!Number.isInteger(offset) || offset < 0 || count + offset > SEARCH_WINDOW) {
      return postmarkError(422, 0, `The 'offset' parameter must be ≥ 0 and count + offset at most ${SEARCH_WINDOW}.`);
    }
    const now = Date.now();
    // Postmark's parameter names are lower case; the SDK sends some in camelCase (messageStream).
    const filter = (name: string): string | undefined =>
      Object.entries(query).find(([key, value]) => key.toLowerCase() === name && value !== '')?.[1];
    const [tag, stream, subject, status] = ['tag', 'messagestream', 'subject', 'status'].map(filter);
    const metadataFilters = Object.entries(query).filter(([name]) => name.startsWith('metadata_'));
    const matches = [...state.emails.values()]
      .filter((r) => indexed(r, now))
      .filter((r) => !recipient || r.recipients.some((a) => a.toLowerCase().includes(recipient.toLowerCase())))
      .filter((r) => !tag || r.tag === tag)
      .filter((r) => !stream || r.messageStream === stream)
      .filter((r) => !subject || r.subject.toLowerCase().includes(subject.toLowerCase()))
      // Every emulated message has left Postmark: none is still `queued` or only `processed`.
      .filter(() => !status || status === 'sent')
      .filter((r) => metadataFilters.every(([name, value]) => r.metadata[name.slice('metadata_'.length)] === value))
      .reverse();
    const delayMs = recipient ? slowDelay(planEmail(recipient).behaviour) : 0;
    return {
      status: 200,
      body: { TotalCount: matches.length, Messages: matches.slice(offset, offset + count).map(summary) },
      delayMs,
    };
  }

  app.get<{ Params: { id: string } }>('/bounces/:id', async (request, reply) => {
    const bounce = state.bounces.get(Number(request.params.id));
    const record = bounce ? state.emails.get(bounce.messageId) : undefined;
    await exchange(ctx, request, reply, {
      provider: 'postmark',
      operation: 'postmark.bounce',
      recipient: record?.recipients[0],
      authorize: authorize(request.headers['x-postmark-server-token']),
      faultAnswer,
      run: () => {
        if (!bounce || !record || bounce.at > Date.now()) return postmarkError(422, 407, 'This bounce was not found.');
        if (statusHangs(record.plan.behaviour)) return { status: 0, hang: true };
        return { status: 200, body: bounceBody(bounce, record), delayMs: slowDelay(record.plan.behaviour) };
      },
    });
  });
}

/** An outbound message as the search lists it. */
function summary(record: EmailRecord): Json {
  return {
    Tag: record.tag ?? '',
    MessageID: record.messageId,
    MessageStream: record.messageStream,
    To: record.recipients.map((Email) => ({ Email, Name: null })),
    Cc: [],
    Bcc: [],
    Recipients: record.recipients,
    ReceivedAt: new Date(record.createdAt).toISOString(),
    From: record.from,
    Subject: record.subject,
    Attachments: [],
    Status: 'Sent',
    TrackOpens: record.plan.behaviour === 'opened',
    TrackLinks: record.plan.behaviour === 'opened' ? 'HtmlAndText' : 'None',
    Metadata: record.metadata,
    Sandboxed: false,
  };
}

/** A message's details: the summary plus bodies and the events visible at `now`. */
function details(record: EmailRecord, now: number): Json {
  return {
    TextBody: record.textBody ?? '',
    HtmlBody: record.htmlBody ?? '',
    Body: '',
    ...summary(record),
    MessageEvents: record.events.filter((e) => e.at <= now).map((e) => messageEvent(record, e)),
  };
}

function messageEvent(record: EmailRecord, event: EmailEvent): Json {
  const base = { Recipient: record.recipients[0], Type: event.type, ReceivedAt: new Date(event.at).toISOString() };
  const server = { DestinationServer: 'mx.sandbox.invalid', DestinationIP: '127.0.0.1' };
  switch (event.type) {
    case 'Delivered':
      return { ...base, Details: { DeliveryMessage: 'smtp;250 2.0.0 OK (sandbox)', ...server } };
    case 'Transient':
      return { ...base, Details: { DeliveryMessage: 'smtp;421 4.7.0 Try again later (sandbox)', ...server } };
    case 'Bounced':
      return {
        ...base,
        Details: {
          Summary: BOUNCE_INFO[event.bounceType ?? 'HardBounce'].description,
          BounceID: String(event.bounceId),
        },
      };
    case 'Opened':
      return { ...base, Details: { Summary: 'Email opened with Sandbox Mail' } };
    case 'LinkClicked':
      return {
        ...base,
        Details: { Summary: 'Link clicked', Link: 'https://example.com/', ClickLocation: 'HTML' },
      };
  }
}

/** A Transient (delayed) event has no bounce of its own in the details; its webhook needs an ID. */
let transientBounceIds = 1_000_000_000;

/**
 * The webhooks Postmark pushes for a message's timeline (one per event, as its modular webhooks
 * do): JSON bodies shaped like Postmark's, sent with the basic-auth credentials of the webhook URL.
 */
function plannedWebhooks(record: EmailRecord): PlannedWebhook[] {
  return record.events.map((event) => {
    const body = webhookBody(record, event, event.type === 'Transient' ? ++transientBounceIds : undefined);
    return {
      provider: 'postmark',
      messageId: record.messageId,
      address: record.recipients[0] ?? '',
      at: event.at,
      render: (target: WebhookTarget): RenderedWebhook | undefined =>
        target.postmarkAuth === undefined
          ? undefined
          : {
              path: '/webhooks/postmark',
              headers: {
                'content-type': 'application/json',
                authorization: `Basic ${Buffer.from(target.postmarkAuth, 'utf8').toString('base64')}`,
                'user-agent': 'Postmark',
              },
              body: JSON.stringify(body),
            },
    };
  });
}

/** One event's webhook body, as Postmark's Delivery, Bounce, Open and Click webhooks carry it. */
function webhookBody(record: EmailRecord, event: EmailEvent, transientId: number | undefined): Json {
  const at = new Date(event.at).toISOString();
  const common = { MessageID: record.messageId, MessageStream: record.messageStream, Tag: record.tag ?? '', Metadata: record.metadata };
  const client = { Name: 'Sandbox Mail', Company: 'Herald', Family: 'Sandbox' };
  const reader = {
    Client: client,
    OS: { Name: 'Sandbox OS', Company: 'Herald', Family: 'Sandbox' },
    Platform: 'Desktop',
    UserAgent: 'Sandbox/1.0',
  };
  const geo = {
    CountryISOCode: 'JP',
    Country: 'Japan',
    RegionISOCode: '13',
    Region: 'Tokyo',
    City: 'Tokyo',
    Zip: '100-0001',
    Coords: '35.68,139.76',
    IP: '127.0.0.1',
  };
  switch (event.type) {
    case 'Delivered':
      return {
        RecordType: 'Delivery',
        ServerID: 1,
        ...common,
        Recipient: record.recipients[0],
        DeliveredAt: at,
        Details: 'smtp;250 2.0.0 OK (sandbox)',
      };
    case 'Bounced':
    case 'Transient': {
      const bounce: BounceRecord =
        event.type === 'Bounced'
          ? { id: event.bounceId ?? 0, messageId: record.messageId, type: event.bounceType ?? 'HardBounce', at: event.at }
          : { id: transientId ?? 0, messageId: record.messageId, type: 'SoftBounce', at: event.at };
      const body: Json = { ...bounceBody(bounce, record), Metadata: record.metadata };
      if (event.type === 'Transient') {
        Object.assign(body, {
          Type: 'Transient',
          TypeCode: 2,
          Name: 'Message delayed',
          Description: 'The server could not temporarily deliver your message (ex: Message is delayed due to network troubles).',
          Inactive: false,
        });
      }
      return body;
    }
    case 'Opened':
      return {
        RecordType: 'Open',
        FirstOpen: true,
        ...reader,
        ReadSeconds: 5,
        Geo: geo,
        ...common,
        Recipient: record.recipients[0],
        ReceivedAt: at,
      };
    case 'LinkClicked':
      return {
        RecordType: 'Click',
        ClickLocation: 'HTML',
        ...reader,
        OriginalLink: 'https://example.com/',
        Geo: geo,
        ...common,
        Recipient: record.recipients[0],
        ReceivedAt: at,
      };
  }
}

function bounceBody(bounce: BounceRecord, record: EmailRecord): Json {
  const info = BOUNCE_INFO[bounce.type];
  return {
    RecordType: 'Bounce',
    ID: bounce.id,
    Type: bounce.type,
    TypeCode: info.typeCode,
    Name: info.name,
    Tag: record.tag ?? '',
    MessageID: record.messageId,
    ServerID: 1,
    MessageStream: record.messageStream,
    Description: info.description,
    Details: info.details,
    Email: record.recipients[0],
    From: record.from,
    BouncedAt: new Date(bounce.at).toISOString(),
    DumpAvailable: false,
    // Postmark deactivates an address on a hard bounce; a soft bounce leaves it active.
    Inactive: bounce.type === 'HardBounce',
    CanActivate: true,
    Subject: record.subject,
  };
}

/** Postmark's Metadata rules; returns the metadata or what is wrong with it. */
function checkMetadata(value: unknown): Record<string, string> | string {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) return 'Metadata must be an object of string fields.';
  const entries = Object.entries(value);
  if (entries.length > METADATA_LIMITS.fields) return `Metadata may have at most ${METADATA_LIMITS.fields} fields.`;
  const metadata: Record<string, string> = {};
  for (const [name, field] of entries) {
    if (name === '' || name.length > METADATA_LIMITS.nameLength) {
      return `Metadata field names must be 1 to ${METADATA_LIMITS.nameLength} characters: '${name}'.`;
    }
    const text = typeof field === 'string' || typeof field === 'number' || typeof field === 'boolean' ? String(field) : null;
    if (text === null || text.length > METADATA_LIMITS.valueLength) {
      return `Metadata values must be text of at most ${METADATA_LIMITS.valueLength} characters: '${name}'.`;
    }
    metadata[name] = text;
  }
  return metadata;
}

function optionalString(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
