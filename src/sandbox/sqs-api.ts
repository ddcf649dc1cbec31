/**
 * The SQS queues the emulated feed providers publish their events into (SES and AWS SMS events,
 * wrapped in SNS envelopes), and the AWS JSON protocol's `POST /` that SQS shares with End User
 * Messaging SMS: requests are told apart by `X-Amz-Target` (`AmazonSQS.ReceiveMessage`,
 * `PinpointSMSVoiceV2.SendTextMessage`, …). The SQS SDK speaks awsJson1_0 with the query
 * protocol's error codes in `x-amzn-query-error`, and checks each message's `MD5OfBody`.
 *
 * A queue URL is `<sandbox>/<account>/<name>`; the emulator knows the queues the providers
 * publish to. A message becomes visible at its event's time, and once received it stays
 * invisible for the visibility timeout unless deleted, as in SQS.
 */
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import { BAD_TOKEN } from './postmark-api.js';

/** The emulated queues: the ones Herald's sandbox mode reads when no events queue URL is set (src/providers/registry.ts). */
export const SANDBOX_QUEUE_NAMES = { ses: 'herald-ses-events', awsSms: 'herald-aws-sms-events' } as const;
export const SANDBOX_ACCOUNT_ID = '000000000000';
export const SANDBOX_REGION = 'us-east-1';

const DEFAULT_VISIBILITY_SECONDS = 30;
const MAX_WAIT_SECONDS = 20;
const POLL_STEP_MS = 50;

interface QueuedMessage {
  messageId: string;
  body: string;
  md5: string;
  /** When the message becomes visible for the first time (its event's time). */
  availableAt: number;
  /** Hidden until then after a receive. */
  invisibleUntil: number;
  receiptHandle: string | undefined;
  receiveCount: number;
  sentAt: number;
}

/** What a test or the control API sees of a queue. */
export interface SandboxQueueView {
  name: string;
  /** Messages not yet deleted (visible, in flight, or not yet visible). */
  messages: number;
  /** Deleted so far. */
  deleted: number;
}

/** The emulator's SQS queues. Bounded like the rest of the sandbox: the oldest messages go first. */
export class SandboxQueues {
  private readonly queues = new Map<string, QueuedMessage[]>();
  private readonly deletedCount = new Map<string, number>();

  constructor(private readonly maxMessages: number) {
    for (const name of Object.values(SANDBOX_QUEUE_NAMES)) this.queues.set(name, []);
  }

  has(name: string): boolean {
    return this.queues.has(name);
  }

  /** Adds a message that becomes visible at `availableAt` (ms). */
  publish(name: string, body: string, availableAt: number): void {
    const queue = this.queues.get(name);
    if (!queue) throw new Error(`no sandbox queue ${name}`);
    queue.push({
      messageId: randomUUID(),
      body,
      md5: createHash('md5').update(body).digest('hex'),
      availableAt,
      invisibleUntil: 0,
      receiptHandle: undefined,
      receiveCount: 0,
      sentAt: Date.now(),
    });
    if (queue.length > this.maxMessages) queue.splice(0, queue.length - this.maxMessages);
  }

  /** Up to `max` visible messages, oldest event first, each hidden for `visibilityMs` under a new receipt handle. */
  receive(name: string, max: number, visibilityMs: number, now: number): QueuedMessage[] {
    const queue = this.queues.get(name) ?? [];
    const visible = queue.filter((m) => m.availableAt <= now && m.invisibleUntil <= now).sort((a, b) => a.availableAt - b.availableAt);
    return visible.slice(0, max).map((message) => {
      message.invisibleUntil = now + visibilityMs;
      message.receiptHandle = `${message.messageId}#${randomUUID()}`;
      message.receiveCount += 1;
      return message;
    });
  }

  /** How many messages are visible at `now`, without receiving them. */
  visibleCount(name: string, now: number): number {
    return (this.queues.get(name) ?? []).filter((m) => m.availableAt <= now && m.invisibleUntil <= now).length;
  }

  /** Deletes the message this receipt handle was last given for; false when there is none. */
  delete(name: string, receiptHandle: string): boolean {
    const queue = this.queues.get(name) ?? [];
    const index = queue.findIndex((m) => m.receiptHandle === receiptHandle);
    if (index < 0) return false;
    queue.splice(index, 1);
    this.deletedCount.set(name, (this.deletedCount.get(name) ?? 0) + 1);
    return true;
  }

  view(): SandboxQueueView[] {
    return [...this.queues.entries()].map(([name, messages]) => ({
      name,
      messages: messages.length,
      deleted: this.deletedCount.get(name) ?? 0,
    }));
  }

  clear(): void {
    for (const queue of this.queues.values()) queue.length = 0;
    this.deletedCount.clear();
  }
}

/** An SNS notification as SNS delivers it to an SQS subscription without raw delivery. */
export function snsEnvelope(topic: string, message: unknown, at: number): string {
  const id = randomUUID();
  return JSON.stringify({
    Type: 'Notification',
    MessageId: id,
    TopicArn: `arn:aws:sns:${SANDBOX_REGION}:${SANDBOX_ACCOUNT_ID}:${topic}`,
    Message: JSON.stringify(message),
    Timestamp: new Date(at).toISOString(),
    SignatureVersion: '1',
    Signature: 'c2FuZGJveA==',
    SigningCertURL: `https://sns.${SANDBOX_REGION}.amazonaws.com/SimpleNotificationService-sandbox.pem`,
    UnsubscribeURL: `https://sns.${SANDBOX_REGION}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:${SANDBOX_REGION}:${SANDBOX_ACCOUNT_ID}:${topic}:${id}`,
  });
}

/** The checks every emulated AWS API makes of the SigV4 `Authorization` header; an answer when refused. */
export function awsCredentialProblem(authorization: string | undefined): string | undefined {
  const match = /^AWS4-HMAC-SHA256 Credential=([^/]+)\//.exec(authorization ?? '');
  if (!match) return 'Request is missing Authentication Token';
  if (match[1] === BAD_TOKEN) return 'The security token included in the request is invalid.';
  return undefined;
}

/** An AWS JSON protocol (awsJson1_0) error answer; `queryError` for SQS's query-compatible codes. */
export function awsJsonError(
  status: number,
  type: string,
  message: string,
  extra: Record<string, unknown> = {},
  queryError?: string,
): Answer {
  return {
    status,
    body: { __type: type, message, ...extra },
    headers: { 'content-type': 'application/x-amz-json-1.0', ...(queryError ? { 'x-amzn-query-error': queryError } : {}) },
  };
}

/** A handler of one `X-Amz-Target` on `POST /`. */
export type AwsJsonHandler = (request: FastifyRequest, reply: FastifyReply, body: Record<string, unknown>) => Promise<void>;

/** The AWS JSON targets served on `POST /`: each emulator adds its own. */
export class AwsJsonTargets {
  private readonly handlers = new Map<string, AwsJsonHandler>();
  add(target: string, handler: AwsJsonHandler): void {
    this.handlers.set(target, handler);
  }
  get(target: string): AwsJsonHandler | undefined {
    return this.handlers.get(target);
  }
}

/** True for requests of the AWS JSON protocol (their error answers take its shape). */
export function isAwsJsonRequest(request: FastifyRequest): boolean {
  return request.method === 'POST' && request.url.split('?')[0] === '/' && typeof request.headers['x-amz-target'] === 'string';
}

/** Registers `POST /` and its body parser; the emulators add their targets to `targets`. */
export function registerAwsJson(app: FastifyInstance, targets: AwsJsonTargets): void {
  for (const type of ['application/x-amz-json-1.0', 'application/x-amz-json-1.1']) {
    app.addContentTypeParser(type, { parseAs: 'string' }, (_request, body, done) => {
      try {
        done(null, body === '' ? {} : JSON.parse(body as string));
      } catch (error) {
        done(Object.assign(error as Error, { statusCode: 400 }), undefined);
      }
    });
  }
  app.post('/', async (request, reply) => {
    const target = String(request.headers['x-amz-target'] ?? '');
    const handler = targets.get(target);
    const body = typeof request.body === 'object' && request.body !== null ? (request.body as Record<string, unknown>) : {};
    if (!handler) {
      const {
        status,
        body: error,
        headers,
      } = awsJsonError(400, 'UnknownOperationException', `Unknown operation ${target || '(no X-Amz-Target)'}`);
      return reply
        .code(status)
        .headers(headers ?? {})
        .send(error);
    }
    return handler(request, reply, body);
  });
}

function sqsFault(status: 429 | 500 | 503): Answer {
  if (status === 429)
    return awsJsonError(400, 'AWS.SimpleQueueService.RequestThrottled', 'Request is throttled.', {}, 'RequestThrottled;Sender');
  return status === 500
    ? awsJsonError(500, 'InternalError', 'We encountered an internal error. Please try again.', {}, 'InternalError;Receiver')
    : awsJsonError(
        503,
        'ServiceUnavailable',
        'The request has failed due to a temporary failure of the server.',
        {},
        'ServiceUnavailable;Receiver',
      );
}

/** Registers the SQS targets: ReceiveMessage, DeleteMessage, DeleteMessageBatch. */
export function registerSqs(targets: AwsJsonTargets, ctx: SandboxContext, queues: SandboxQueues): void {
  const authorize = (request: FastifyRequest) => (): Answer | undefined => {
    const problem = awsCredentialProblem(request.headers.authorization);
    return problem ? awsJsonError(400, 'InvalidClientTokenId', problem, {}, 'InvalidClientTokenId;Sender') : undefined;
  };
  const queueOf = (body: Record<string, unknown>): string | Answer => {
    const url = typeof body['QueueUrl'] === 'string' ? body['QueueUrl'] : '';
    const name = url.split('/').filter(Boolean).at(-1) ?? '';
    if (!queues.has(name)) {
      return awsJsonError(
        400,
        'AWS.SimpleQueueService.NonExistentQueue',
        'The specified queue does not exist.',
        {},
        'AWS.SimpleQueueService.NonExistentQueue;Sender',
      );
    }
    return name;
  };

  targets.add('AmazonSQS.ReceiveMessage', async (request, reply, body) => {
    const queue = queueOf(body);
    const max = body['MaxNumberOfMessages'] === undefined ? 1 : Number(body['MaxNumberOfMessages']);
    const wait = body['WaitTimeSeconds'] === undefined ? 0 : Number(body['WaitTimeSeconds']);
    const visibility = body['VisibilityTimeout'] === undefined ? DEFAULT_VISIBILITY_SECONDS : Number(body['VisibilityTimeout']);
    const invalid = (field: string, range: string) =>
      awsJsonError(
        400,
        'InvalidParameterValue',
        `Value for parameter ${field} is invalid. Reason: must be ${range}.`,
        {},
        'InvalidParameterValue;Sender',
      );
    // The long poll happens before the exchange: a fault or a hang applies to the answer.
    if (
      typeof queue === 'string' &&
      Number.isInteger(max) &&
      max >= 1 &&
      max <= 10 &&
      Number.isInteger(wait) &&
      wait >= 0 &&
      wait <= MAX_WAIT_SECONDS
    ) {
      const until = Date.now() + wait * 1000;
      while (Date.now() < until && !ctx.closing.aborted && queues.visibleCount(queue, Date.now()) === 0) {
        await sleep(POLL_STEP_MS);
      }
    }
    await exchange(ctx, request, reply, {
      provider: 'sqs',
      operation: 'sqs.receive',
      recipient: typeof queue === 'string' ? queue : undefined,
      authorize: authorize(request),
      faultAnswer: sqsFault,
      run: () => {
        if (typeof queue !== 'string') return queue;
        if (!(Number.isInteger(max) && max >= 1 && max <= 10)) return invalid('MaxNumberOfMessages', 'between 1 and 10');
        if (!(Number.isInteger(wait) && wait >= 0 && wait <= MAX_WAIT_SECONDS)) return invalid('WaitTimeSeconds', 'between 0 and 20');
        if (!(Number.isInteger(visibility) && visibility >= 0 && visibility <= 43_200))
          return invalid('VisibilityTimeout', 'between 0 and 43200');
        const messages = queues.receive(queue, max, visibility * 1000, Date.now());
        return {
          status: 200,
          headers: { 'content-type': 'application/x-amz-json-1.0' },
          body:
            messages.length === 0
              ? {}
              : {
                  Messages: messages.map((m) => ({
                    MessageId: m.messageId,
                    ReceiptHandle: m.receiptHandle,
                    MD5OfBody: m.md5,
                    Body: m.body,
                  })),
                },
        };
      },
    });
  });

  // `herald doctor`'s check of a queue, which receives nothing.
  targets.add('AmazonSQS.GetQueueAttributes', async (request, reply, body) => {
    const queue = queueOf(body);
    await exchange(ctx, request, reply, {
      provider: 'sqs',
      operation: 'sqs.attributes',
      recipient: typeof queue === 'string' ? queue : undefined,
      authorize: authorize(request),
      faultAnswer: sqsFault,
      run: () => {
        if (typeof queue !== 'string') return queue;
        const now = Date.now();
        return {
          status: 200,
          headers: { 'content-type': 'application/x-amz-json-1.0' },
          body: {
            Attributes: {
              ApproximateNumberOfMessages: String(queues.visibleCount(queue, now)),
              VisibilityTimeout: String(DEFAULT_VISIBILITY_SECONDS),
            },
          },
        };
      },
    });
  });

  targets.add('AmazonSQS.DeleteMessage', async (request, reply, body) => {
    const queue = queueOf(body);
    await exchange(ctx, request, reply, {
      provider: 'sqs',
      operation: 'sqs.delete',
      recipient: typeof queue === 'string' ? queue : undefined,
      authorize: authorize(request),
      faultAnswer: sqsFault,
      run: () => {
        if (typeof queue !== 'string') return queue;
        const handle = typeof body['ReceiptHandle'] === 'string' ? body['ReceiptHandle'] : '';
        if (!queues.delete(queue, handle)) {
          return awsJsonError(
            400,
            'ReceiptHandleIsInvalid',
            `The input receipt handle "${handle}" is not a valid receipt handle.`,
            {},
            'ReceiptHandleIsInvalid;Sender',
          );
        }
        return { status: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body: {} };
      },
    });
  });

  targets.add('AmazonSQS.DeleteMessageBatch', async (request, reply, body) => {
    const queue = queueOf(body);
    await exchange(ctx, request, reply, {
      provider: 'sqs',
      operation: 'sqs.delete',
      recipient: typeof queue === 'string' ? queue : undefined,
      authorize: authorize(request),
      faultAnswer: sqsFault,
      run: () => {
        if (typeof queue !== 'string') return queue;
        const entries = Array.isArray(body['Entries']) ? (body['Entries'] as Record<string, unknown>[]) : [];
        if (entries.length === 0 || entries.length > 10) {
          return awsJsonError(
            400,
            'AWS.SimpleQueueService.TooManyEntriesInBatchRequest',
            'Maximum number of entries per request are 10.',
            {},
            'AWS.SimpleQueueService.TooManyEntriesInBatchRequest;Sender',
          );
        }
        const successful: { Id: string }[] = [];
        const failed: { Id: string; SenderFault: boolean; Code: string; Message: string }[] = [];
        for (const entry of entries) {
          const id = String(entry['Id'] ?? '');
          const handle = typeof entry['ReceiptHandle'] === 'string' ? entry['ReceiptHandle'] : '';
          if (queues.delete(queue, handle)) successful.push({ Id: id });
          else failed.push({ Id: id, SenderFault: true, Code: 'ReceiptHandleIsInvalid', Message: 'The input receipt handle is invalid.' });
        }
        return { status: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body: { Successful: successful, Failed: failed } };
      },
    });
  });
}
