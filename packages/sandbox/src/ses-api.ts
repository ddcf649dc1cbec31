/**
 * The Amazon SES v2 endpoints Herald uses, with SES's shapes (restJson1): `POST
 * /v2/email/outbound-emails` (SendEmail) and `GET /v2/email/account` (GetAccount); errors as
 * the status, `x-amzn-ErrorType: <Name>` and `{"message": …}`. Requests are SigV4-signed; the
 * emulator checks only that they are (access key `bad-token` is refused).
 *
 * The address chooses the behaviour as for Postmark (email-behaviour.ts), and SES publishes
 * the message's events — `Send`, then `Delivery`, `Bounce`, `DeliveryDelay`, `Open`, `Click`,
 * `Complaint` — as notifications of its SNS topic (`SANDBOX_TOPIC_ARNS.ses`) into the sandbox's
 * SES events queue (sqs-api.ts), each visible at its event's time, when the send names a
 * configuration set (as SES does). SES-only parts of the address: the behaviour `complaint`
 * (delivered, then a complaint), and the labels `dup` (every event published twice) and
 * `reorder` (the `Send` event arrives last).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { emailAddress, planEmail, type EmailBehaviour } from './email-behaviour.js';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import type { EmailEvent, EmailRecord } from './state.js';
import {
  awsCredentialProblem,
  SANDBOX_ACCOUNT_ID,
  SANDBOX_QUEUE_NAMES,
  SANDBOX_TOPIC_ARNS,
  snsEnvelope,
  type SandboxQueues,
} from './sqs-api.js';

type Json = Record<string, unknown>;

/** SES's error answer. */
export function sesError(status: number, name: string, message: string): Answer {
  return { status, body: { message }, headers: { 'x-amzn-errortype': name, 'content-type': 'application/json' } };
}

function faultAnswer(status: 429 | 500 | 503): Answer {
  if (status === 429) return sesError(429, 'TooManyRequestsException', 'Maximum sending rate exceeded.');
  return status === 500 ? sesError(500, 'InternalFailure', 'Internal Failure') : sesError(503, 'ServiceUnavailable', 'Service Unavailable');
}

/** The SES-only parts of an address: its behaviour name and labels. */
function sesAddressTags(address: string): { name: string; labels: string[] } {
  const bare = emailAddress(address).toLowerCase();
  const at = bare.lastIndexOf('@');
  const [name = '', ...labels] = (at >= 0 ? bare.slice(0, at) : bare).split('+');
  return { name, labels };
}

/** When the feed faults of an address put each event's copies in the queue, relative to the event. */
const DUPLICATE_AFTER_MS = 400;
const REORDER_SEND_AFTER_MS = 300;

/** Registers the SES v2 routes. */
export function registerSes(app: FastifyInstance, ctx: SandboxContext, queues: SandboxQueues): void {
  const { state } = ctx;
  const authorize = (request: FastifyRequest) => (): Answer | undefined => {
    const problem = awsCredentialProblem(request.headers.authorization);
    return problem ? sesError(403, 'UnrecognizedClientException', problem) : undefined;
  };
  const slowDelay = (behaviour: EmailBehaviour): number => (behaviour === 'slow' ? ctx.slowMs : 0);

  app.post('/v2/email/outbound-emails', async (request, reply) => {
    const body: Json = isObject(request.body) ? request.body : {};
    const destination = isObject(body['Destination']) ? body['Destination'] : {};
    const to = Array.isArray(destination['ToAddresses'])
      ? destination['ToAddresses'].filter((a): a is string => typeof a === 'string')
      : [];
    await exchange(ctx, request, reply, {
      provider: 'ses',
      operation: 'ses.send',
      recipient: to[0],
      authorize: authorize(request),
      faultAnswer,
      run: () => send(body, to),
    });
  });

  function send(body: Json, to: string[]): Answer {
    const from = typeof body['FromEmailAddress'] === 'string' ? body['FromEmailAddress'].trim() : '';
    if (from === '') return sesError(400, 'BadRequestException', 'Missing required field FromEmailAddress.');
    if (to.length === 0) return sesError(400, 'BadRequestException', 'Missing required field Destination.ToAddresses.');
    const invalid = to.find((r) => !/^[^@\s]+@[^@\s]+$/.test(emailAddress(r)));
    if (invalid !== undefined) return sesError(400, 'BadRequestException', `Illegal address: ${invalid}`);
    const simple = isObject(body['Content']) && isObject(body['Content']['Simple']) ? body['Content']['Simple'] : undefined;
    if (!simple) return sesError(400, 'BadRequestException', 'Content.Simple is required (the sandbox takes no Raw or Template content).');
    const subject = isObject(simple['Subject']) && typeof simple['Subject']['Data'] === 'string' ? simple['Subject']['Data'] : '';
    const bodyPart = isObject(simple['Body']) ? simple['Body'] : {};
    const part = (name: string) =>
      isObject(bodyPart[name]) && typeof bodyPart[name]['Data'] === 'string' ? (bodyPart[name]['Data'] as string) : undefined;
    const textBody = part('Text');
    const htmlBody = part('Html');
    if (textBody === undefined && htmlBody === undefined)
      return sesError(400, 'BadRequestException', 'Content.Simple.Body needs Text or Html.');
    const tags = checkTags(body['EmailTags']);
    if (typeof tags === 'string') return sesError(400, 'BadRequestException', tags);
    const configurationSet = typeof body['ConfigurationSetName'] === 'string' ? body['ConfigurationSetName'] : undefined;

    const first = emailAddress(to[0] as string);
    const plan = planEmail(first);
    const { name, labels } = sesAddressTags(first);
    if (plan.behaviour === 'rejected')
      return sesError(400, 'MessageRejected', `Email address is not verified. The sandbox rejects ${first}.`);
    if (plan.behaviour === 'flaky') {
      const attempt = state.nextAttempt(`ses:${first.toLowerCase()}`);
      if (attempt === 1) return faultAnswer(500);
      if (attempt === 2) return faultAnswer(429);
    }

    const createdAt = Date.now();
    const fields: Omit<EmailRecord, 'events'> = {
      messageId: `0100${createdAt.toString(16)}-${randomBytes(4).toString('hex')}-${randomBytes(2).toString('hex')}-${randomBytes(2).toString('hex')}-${randomBytes(6).toString('hex')}-000000`,
      from,
      to: to.join(', '),
      recipients: to.map(emailAddress),
      subject,
      messageStream: configurationSet ?? '',
      metadata: tags,
      plan,
      createdAt,
    };
    if (textBody !== undefined) fields.textBody = textBody;
    if (htmlBody !== undefined) fields.htmlBody = htmlBody;
    const record = state.addEmail(fields);
    // SES publishes events only for sends through a configuration set with an event destination.
    if (configurationSet !== undefined) {
      publishEvents(queues, record, configurationSet, {
        complaint: name === 'complaint',
        duplicate: labels.includes('dup'),
        reorder: labels.includes('reorder'),
      });
    }
    return {
      status: 200,
      body: { MessageId: record.messageId },
      headers: { 'content-type': 'application/json' },
      delayMs: slowDelay(plan.behaviour),
    };
  }

  // The account (`herald doctor`'s authenticated call that sends nothing).
  app.get('/v2/email/account', async (request, reply) => {
    await exchange(ctx, request, reply, {
      provider: 'ses',
      operation: 'ses.account',
      recipient: undefined,
      authorize: authorize(request),
      faultAnswer,
      run: () => ({
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: {
          DedicatedIpAutoWarmupEnabled: false,
          EnforcementStatus: 'HEALTHY',
          ProductionAccessEnabled: false,
          SendQuota: { Max24HourSend: 200, MaxSendRate: 1, SentLast24Hours: state.emails.size },
          SendingEnabled: true,
        },
      }),
    });
  });
}

/** The SES event records of a message, each with its time, published as SNS notifications. */
function publishEvents(
  queues: SandboxQueues,
  record: EmailRecord,
  configurationSet: string,
  opts: { complaint: boolean; duplicate: boolean; reorder: boolean },
): void {
  const to = record.recipients[0] as string;
  const mail = {
    timestamp: new Date(record.createdAt).toISOString(),
    source: record.from,
    sourceArn: `arn:aws:ses:us-east-1:${SANDBOX_ACCOUNT_ID}:identity/${record.from.split('@')[1] ?? record.from}`,
    sendingAccountId: SANDBOX_ACCOUNT_ID,
    messageId: record.messageId,
    destination: record.recipients,
    headersTruncated: false,
    tags: {
      'ses:configuration-set': [configurationSet],
      'ses:source-ip': ['127.0.0.1'],
      'ses:from-domain': [record.from.split('@')[1] ?? ''],
      ...Object.fromEntries(Object.entries(record.metadata).map(([name, value]) => [name, [value]])),
    },
    commonHeaders: { from: [record.from], to: record.recipients, subject: record.subject },
  };
  const events: { at: number; record: Json }[] = [{ at: record.createdAt, record: { eventType: 'Send', mail, send: {} } }];
  const delayMs = record.plan.delayMs;
  for (const event of record.events) events.push({ at: event.at, record: { mail, ...sesEvent(event, to) } });
  if (record.plan.behaviour === 'inactive') {
    // On the account's suppression list: SES accepts the message and never tries it.
    const at = record.createdAt + delayMs;
    events.push({
      at,
      record: {
        mail,
        eventType: 'Bounce',
        bounce: bounce(
          'Permanent',
          'OnAccountSuppressionList',
          to,
          at,
          'Amazon SES has suppressed sending to this address because it has a recent history of bouncing as an invalid address.',
        ),
      },
    });
  }
  if (opts.complaint) {
    const at = record.createdAt + 2 * delayMs;
    events.push({
      at,
      record: {
        mail,
        eventType: 'Complaint',
        complaint: {
          complainedRecipients: [{ emailAddress: to }],
          timestamp: new Date(at).toISOString(),
          feedbackId: randomBytes(8).toString('hex'),
          complaintFeedbackType: 'abuse',
        },
      },
    });
  }
  if (opts.reorder) {
    const last = Math.max(...events.map((e) => e.at));
    events[0]!.at = last + REORDER_SEND_AFTER_MS;
  }
  for (const { at, record: event } of events) publish(queues, SANDBOX_QUEUE_NAMES.ses, SANDBOX_TOPIC_ARNS.ses, event, at, opts.duplicate);
}

/**
 * Publishes one event as a notification of the SNS topic `topicArn` into the queue subscribed to
 * it, visible at `at`; with `duplicate`, twice more (at once and a little later), as SNS and SQS
 * may deliver it (at-least-once).
 */
export function publish(queues: SandboxQueues, queue: string, topicArn: string, event: Json, at: number, duplicate: boolean): void {
  queues.publish(queue, snsEnvelope(topicArn, event, at), at);
  if (!duplicate) return;
  queues.publish(queue, snsEnvelope(topicArn, event, at), at);
  queues.publish(queue, snsEnvelope(topicArn, event, at), at + DUPLICATE_AFTER_MS);
}

/** An SES event record for one of the shared model's events (its `mail` part added by the caller). */
function sesEvent(event: EmailEvent, to: string): Json {
  const timestamp = new Date(event.at).toISOString();
  switch (event.type) {
    case 'Delivered':
      return {
        eventType: 'Delivery',
        delivery: {
          timestamp,
          processingTimeMillis: 900,
          recipients: [to],
          smtpResponse: '250 2.0.0 OK (sandbox)',
          reportingMTA: 'a8-70.smtp-out.sandbox.invalid',
        },
      };
    case 'Bounced':
      return event.bounceType === 'SoftBounce'
        ? {
            eventType: 'Bounce',
            bounce: bounce(
              'Transient',
              'MailboxFull',
              to,
              event.at,
              'smtp; 452 4.2.2 The email account that you tried to reach is over quota (sandbox)',
            ),
          }
        : { eventType: 'Bounce', bounce: bounce('Permanent', 'General', to, event.at, 'smtp; 550 5.1.1 user unknown (sandbox)') };
    case 'Transient':
      return {
        eventType: 'DeliveryDelay',
        deliveryDelay: {
          timestamp,
          delayType: 'TransientCommunicationFailure',
          expirationTime: new Date(event.at + 12 * 3600_000).toISOString(),
          delayedRecipients: [{ emailAddress: to, status: '4.4.1', diagnosticCode: 'smtp; 421 4.4.1 Try again later (sandbox)' }],
        },
      };
    case 'Opened':
      return { eventType: 'Open', open: { timestamp, userAgent: 'Sandbox Mail', ipAddress: '127.0.0.1' } };
    case 'LinkClicked':
      return {
        eventType: 'Click',
        click: { timestamp, link: 'https://example.com/', userAgent: 'Sandbox Mail', ipAddress: '127.0.0.1', linkTags: {} },
      };
  }
}

function bounce(bounceType: string, bounceSubType: string, to: string, at: number, diagnosticCode: string): Json {
  return {
    bounceType,
    bounceSubType,
    bouncedRecipients: [{ emailAddress: to, action: 'failed', status: bounceType === 'Permanent' ? '5.1.1' : '4.2.2', diagnosticCode }],
    timestamp: new Date(at).toISOString(),
    feedbackId: randomBytes(8).toString('hex'),
    reportingMTA: 'dns; sandbox.invalid',
  };
}

/** SES's MessageTag rules; returns the tags as a map, or what is wrong with them. */
function checkTags(value: unknown): Record<string, string> | string {
  if (value === undefined || value === null) return {};
  if (!Array.isArray(value)) return 'EmailTags must be a list.';
  if (value.length > 50) return 'At most 50 EmailTags per message.';
  const tags: Record<string, string> = {};
  for (const tag of value) {
    const name = isObject(tag) ? tag['Name'] : undefined;
    const tagValue = isObject(tag) ? tag['Value'] : undefined;
    if (
      typeof name !== 'string' ||
      typeof tagValue !== 'string' ||
      !/^[A-Za-z0-9_-]{1,256}$/.test(name) ||
      !/^[A-Za-z0-9_-]{1,256}$/.test(tagValue)
    ) {
      return `Invalid tag ${JSON.stringify(tag)}: names and values may contain only ASCII letters, digits, underscores and dashes, at most 256 characters.`;
    }
    tags[name] = tagValue;
  }
  return tags;
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
