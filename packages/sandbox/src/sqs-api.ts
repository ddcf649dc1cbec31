/**
 * The SQS queues the emulated feed providers publish their events into (SES and AWS SMS events,
 * wrapped in SNS envelopes that name their topic, as SNS delivers to a subscribed queue without
 * raw delivery), and the AWS JSON protocol's `POST /` that SQS shares with End User Messaging
 * SMS: requests are told apart by `X-Amz-Target` (`AmazonSQS.ReceiveMessage`,
 * `PinpointSMSVoiceV2.SendTextMessage`, …). The SQS SDK speaks awsJson1_0 with the query
 * protocol's error codes in `x-amzn-query-error`, and checks each message's `MD5OfBody`.
 *
 * A queue URL is `<sandbox>/<account>/<name>`. The emulator holds the two events queues the
 * providers publish to, each with a dead-letter queue in its `RedrivePolicy`, and the queues a
 * client creates (`CreateQueue`, with or without a redrive policy). A message becomes visible at
 * its event's time (or its `SendMessage` delay); once received it stays invisible for the
 * visibility timeout unless deleted, and each receive counts (`ApproximateReceiveCount`). A
 * message received `maxReceiveCount` times is moved to the dead-letter queue at its next
 * receive, as SQS does.
 */
import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import { BAD_TOKEN } from './postmark-api.js';

/** The emulated queues: the ones Herald's sandbox mode reads, from its own copy of these values, when no events queue URL is set. */
export const SANDBOX_QUEUE_NAMES = { ses: 'herald-ses-events', awsSms: 'herald-aws-sms-events' } as const;
export const SANDBOX_ACCOUNT_ID = '000000000000';
export const SANDBOX_REGION = 'us-east-1';

/** The SNS topics the emulated providers publish through: what Herald's sandbox mode pins its feeds to. */
export const SANDBOX_TOPIC_ARNS = {
  ses: `arn:aws:sns:${SANDBOX_REGION}:${SANDBOX_ACCOUNT_ID}:herald-ses-events`,
  awsSms: `arn:aws:sns:${SANDBOX_REGION}:${SANDBOX_ACCOUNT_ID}:herald-aws-sms-events`,
} as const;

/** How many receives the events queues' redrive policy allows before a message goes to their dead-letter queue. */
export const SANDBOX_MAX_RECEIVE_COUNT = 5;

const DEFAULT_VISIBILITY_SECONDS = 30;
const MAX_WAIT_SECONDS = 20;
const POLL_STEP_MS = 50;
/** SQS's largest message body. */
const MAX_BODY_BYTES = 256 * 1024;

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
  firstReceivedAt: number | undefined;
}

/** A queue's redrive policy, as SQS keeps it. */
export interface RedrivePolicy {
  deadLetterTargetArn: string;
  maxReceiveCount: number;
}

interface SandboxQueue {
  messages: QueuedMessage[];
  deleted: number;
  /** Messages moved to the dead-letter queue. */
  redriven: number;
  visibilityTimeoutSeconds: number;
  redrivePolicy: RedrivePolicy | undefined;
  createdAt: number;
  /** The attributes it was created with, to tell a repeated CreateQueue from a conflicting one. */
  created: string;
}

/** What a test or the control API sees of a queue. */
export interface SandboxQueueView {
  name: string;
  /** Messages not yet deleted (visible, in flight, or not yet visible). */
  messages: number;
  /** Deleted so far. */
  deleted: number;
  /** Moved to the dead-letter queue so far. */
  redriven: number;
}

/** A queue's ARN, from its name. */
export const queueArn = (name: string): string => `arn:aws:sqs:${SANDBOX_REGION}:${SANDBOX_ACCOUNT_ID}:${name}`;

/** The emulator's SQS queues. Bounded like the rest of the sandbox: the oldest messages go first. */
export class SandboxQueues {
  private readonly queues = new Map<string, SandboxQueue>();

  constructor(private readonly maxMessages: number) {
    this.reset();
  }

  /** Back to the events queues alone, each with its dead-letter queue, all empty. */
  private reset(): void {
    this.queues.clear();
    for (const name of Object.values(SANDBOX_QUEUE_NAMES)) {
      this.create(`${name}-dlq`, {});
      this.create(name, { redrivePolicy: { deadLetterTargetArn: queueArn(`${name}-dlq`), maxReceiveCount: SANDBOX_MAX_RECEIVE_COUNT } });
    }
  }

  has(name: string): boolean {
    return this.queues.has(name);
  }

  /**
   * Creates a queue; true when it is new or exists with the same attributes, false when it exists
   * with others (SQS's `QueueNameExists`).
   */
  create(name: string, attributes: { visibilityTimeoutSeconds?: number; redrivePolicy?: RedrivePolicy }): boolean {
    const created = JSON.stringify([attributes.visibilityTimeoutSeconds ?? null, attributes.redrivePolicy ?? null]);
    const existing = this.queues.get(name);
    if (existing) return existing.created === created;
    this.queues.set(name, {
      messages: [],
      deleted: 0,
      redriven: 0,
      visibilityTimeoutSeconds: attributes.visibilityTimeoutSeconds ?? DEFAULT_VISIBILITY_SECONDS,
      redrivePolicy: attributes.redrivePolicy,
      createdAt: Date.now(),
      created,
    });
    return true;
  }

  /** The queue's attributes, as GetQueueAttributes names them. */
  attributes(name: string, now: number): Record<string, string> {
    const queue = this.queue(name);
    const attributes: Record<string, string> = {
      QueueArn: queueArn(name),
      ApproximateNumberOfMessages: String(this.visibleCount(name, now)),
      ApproximateNumberOfMessagesNotVisible: String(queue.messages.filter((m) => m.invisibleUntil > now).length),
      ApproximateNumberOfMessagesDelayed: String(queue.messages.filter((m) => m.availableAt > now).length),
      VisibilityTimeout: String(queue.visibilityTimeoutSeconds),
      CreatedTimestamp: String(Math.floor(queue.createdAt / 1000)),
      MaximumMessageSize: String(MAX_BODY_BYTES),
    };
    if (queue.redrivePolicy) attributes['RedrivePolicy'] = JSON.stringify(queue.redrivePolicy);
    return attributes;
  }

  visibilityTimeoutMs(name: string): number {
    return this.queue(name).visibilityTimeoutSeconds * 1000;
  }

  /** Adds a message that becomes visible at `availableAt` (ms); returns it. */
  publish(name: string, body: string, availableAt: number): QueuedMessage {
    const queue = this.queue(name);
    const message: QueuedMessage = {
      messageId: randomUUID(),
      body,
      md5: md5(body),
      availableAt,
      invisibleUntil: 0,
      receiptHandle: undefined,
      receiveCount: 0,
      sentAt: Date.now(),
      firstReceivedAt: undefined,
    };
    queue.messages.push(message);
    if (queue.messages.length > this.maxMessages) queue.messages.splice(0, queue.messages.length - this.maxMessages);
    return message;
  }

  /**
   * Up to `max` visible messages, oldest event first, each hidden for `visibilityMs` under a new
   * receipt handle. A message already received `maxReceiveCount` times goes to the dead-letter
   * queue instead.
   */
  receive(name: string, max: number, visibilityMs: number, now: number): QueuedMessage[] {
    const queue = this.queue(name);
    const visible = queue.messages
      .filter((m) => m.availableAt <= now && m.invisibleUntil <= now)
      .sort((a, b) => a.availableAt - b.availableAt);
    const handed: QueuedMessage[] = [];
    for (const message of visible) {
      if (handed.length >= max) break;
      if (queue.redrivePolicy && message.receiveCount >= queue.redrivePolicy.maxReceiveCount && this.redrive(name, message)) continue;
      message.invisibleUntil = now + visibilityMs;
      message.receiptHandle = `${message.messageId}#${randomUUID()}`;
      message.receiveCount += 1;
      message.firstReceivedAt ??= now;
      handed.push(message);
    }
    return handed;
  }

  /** Moves a message to its queue's dead-letter queue; false when that queue is gone (it stays). */
  private redrive(name: string, message: QueuedMessage): boolean {
    const queue = this.queue(name);
    const target = queue.redrivePolicy!.deadLetterTargetArn.split(':').at(-1) ?? '';
    const deadLetters = this.queues.get(target);
    if (!deadLetters) return false;
    queue.messages.splice(queue.messages.indexOf(message), 1);
    queue.redriven += 1;
    deadLetters.messages.push({ ...message, invisibleUntil: 0, receiptHandle: undefined, receiveCount: 0, firstReceivedAt: undefined });
    return true;
  }

  /** How many messages are visible at `now`, without receiving them. */
  visibleCount(name: string, now: number): number {
    return (this.queues.get(name)?.messages ?? []).filter((m) => m.availableAt <= now && m.invisibleUntil <= now).length;
  }

  /** Deletes the message this receipt handle was last given for; false when there is none. */
  delete(name: string, receiptHandle: string): boolean {
    const queue = this.queue(name);
    const index = queue.messages.findIndex((m) => m.receiptHandle === receiptHandle);
    if (index < 0) return false;
    queue.messages.splice(index, 1);
    queue.deleted += 1;
    return true;
  }

  view(): SandboxQueueView[] {
    return [...this.queues.entries()].map(([name, queue]) => ({
      name,
      messages: queue.messages.length,
      deleted: queue.deleted,
      redriven: queue.redriven,
    }));
  }

  clear(): void {
    this.reset();
  }

  private queue(name: string): SandboxQueue {
    const queue = this.queues.get(name);
    if (!queue) throw new Error(`no sandbox queue ${name}`);
    return queue;
  }
}

const md5 = (text: string): string => createHash('md5').update(text).digest('hex');

/** An SNS notification as SNS delivers it to an SQS subscription without raw delivery. */
export function snsEnvelope(topicArn: string, message: unknown, at: number): string {
  const id = randomUUID();
  return JSON.stringify({
    Type: 'Notification',
    MessageId: id,
    TopicArn: topicArn,
    Message: JSON.stringify(message),
    Timestamp: new Date(at).toISOString(),
    SignatureVersion: '1',
    Signature: 'c2FuZGJveA==',
    SigningCertURL: `https://sns.${SANDBOX_REGION}.amazonaws.com/SimpleNotificationService-sandbox.pem`,
    UnsubscribeURL: `https://sns.${SANDBOX_REGION}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=${topicArn}:${id}`,
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

/** A RedrivePolicy attribute (JSON text, `maxReceiveCount` a number or its digits); undefined when it is not one. */
function parseRedrivePolicy(value: unknown): RedrivePolicy | undefined {
  try {
    const policy: unknown = JSON.parse(String(value));
    if (typeof policy !== 'object' || policy === null) return undefined;
    const { deadLetterTargetArn, maxReceiveCount } = policy as Record<string, unknown>;
    const count = Number(maxReceiveCount);
    if (typeof deadLetterTargetArn !== 'string' || !Number.isInteger(count) || count < 1 || count > 1000) return undefined;
    return { deadLetterTargetArn, maxReceiveCount: count };
  } catch {
    return undefined;
  }
}

/** Registers the SQS targets: ReceiveMessage, DeleteMessage(Batch), GetQueueAttributes, SendMessage, CreateQueue. */
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

  const ok = (body: unknown): Answer => ({ status: 200, headers: { 'content-type': 'application/x-amz-json-1.0' }, body });
  const invalid = (field: string, range: string) =>
    awsJsonError(
      400,
      'InvalidParameterValue',
      `Value for parameter ${field} is invalid. Reason: must be ${range}.`,
      {},
      'InvalidParameterValue;Sender',
    );
  /** The attribute names a request asks for (`All` for every one). */
  const names = (value: unknown): string[] => (Array.isArray(value) ? value.filter((n): n is string => typeof n === 'string') : []);

  targets.add('AmazonSQS.ReceiveMessage', async (request, reply, body) => {
    const queue = queueOf(body);
    const max = body['MaxNumberOfMessages'] === undefined ? 1 : Number(body['MaxNumberOfMessages']);
    const wait = body['WaitTimeSeconds'] === undefined ? 0 : Number(body['WaitTimeSeconds']);
    const visibility =
      body['VisibilityTimeout'] === undefined
        ? typeof queue === 'string'
          ? queues.visibilityTimeoutMs(queue) / 1000
          : DEFAULT_VISIBILITY_SECONDS
        : Number(body['VisibilityTimeout']);
    // The system attributes asked for, by their current name or the one it replaced.
    const wanted = new Set([...names(body['MessageSystemAttributeNames']), ...names(body['AttributeNames'])]);
    const wants = (name: string) => wanted.has(name) || wanted.has('All');
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
        return ok(
          messages.length === 0
            ? {}
            : {
                Messages: messages.map((m) => {
                  const attributes: Record<string, string> = {};
                  if (wants('ApproximateReceiveCount')) attributes['ApproximateReceiveCount'] = String(m.receiveCount);
                  if (wants('SentTimestamp')) attributes['SentTimestamp'] = String(m.sentAt);
                  if (wants('ApproximateFirstReceiveTimestamp')) attributes['ApproximateFirstReceiveTimestamp'] = String(m.firstReceivedAt);
                  return {
                    MessageId: m.messageId,
                    ReceiptHandle: m.receiptHandle,
                    MD5OfBody: m.md5,
                    Body: m.body,
                    ...(Object.keys(attributes).length > 0 ? { Attributes: attributes } : {}),
                  };
                }),
              },
        );
      },
    });
  });

  // `herald doctor`'s check of a queue (its redrive policy among them), which receives nothing.
  targets.add('AmazonSQS.GetQueueAttributes', async (request, reply, body) => {
    const queue = queueOf(body);
    const asked = names(body['AttributeNames']);
    await exchange(ctx, request, reply, {
      provider: 'sqs',
      operation: 'sqs.attributes',
      recipient: typeof queue === 'string' ? queue : undefined,
      authorize: authorize(request),
      faultAnswer: sqsFault,
      run: () => {
        if (typeof queue !== 'string') return queue;
        const all = queues.attributes(queue, Date.now());
        const chosen = asked.includes('All') ? all : Object.fromEntries(Object.entries(all).filter(([name]) => asked.includes(name)));
        return ok(Object.keys(chosen).length === 0 ? {} : { Attributes: chosen });
      },
    });
  });

  // What a publisher does (SNS, or anyone the queue's policy lets in): the tests forge events this way.
  targets.add('AmazonSQS.SendMessage', async (request, reply, body) => {
    const queue = queueOf(body);
    const text = typeof body['MessageBody'] === 'string' ? body['MessageBody'] : '';
    const delay = body['DelaySeconds'] === undefined ? 0 : Number(body['DelaySeconds']);
    await exchange(ctx, request, reply, {
      provider: 'sqs',
      operation: 'sqs.send',
      recipient: typeof queue === 'string' ? queue : undefined,
      authorize: authorize(request),
      faultAnswer: sqsFault,
      run: () => {
        if (typeof queue !== 'string') return queue;
        if (text === '')
          return awsJsonError(
            400,
            'MissingParameter',
            'The request must contain the parameter MessageBody.',
            {},
            'MissingParameter;Sender',
          );
        if (Buffer.byteLength(text) > MAX_BODY_BYTES) return invalid('MessageBody', `at most ${MAX_BODY_BYTES} bytes`);
        if (!(Number.isInteger(delay) && delay >= 0 && delay <= 900)) return invalid('DelaySeconds', 'between 0 and 900');
        const message = queues.publish(queue, text, Date.now() + delay * 1000);
        return ok({ MessageId: message.messageId, MD5OfMessageBody: message.md5 });
      },
    });
  });

  // A queue of the test's own: its visibility timeout and redrive policy (or none) as given.
  targets.add('AmazonSQS.CreateQueue', async (request, reply, body) => {
    const name = typeof body['QueueName'] === 'string' ? body['QueueName'] : '';
    const attributes =
      typeof body['Attributes'] === 'object' && body['Attributes'] !== null ? (body['Attributes'] as Record<string, unknown>) : {};
    await exchange(ctx, request, reply, {
      provider: 'sqs',
      operation: 'sqs.create',
      recipient: name,
      authorize: authorize(request),
      faultAnswer: sqsFault,
      run: () => {
        if (!/^[A-Za-z0-9_-]{1,80}$/.test(name)) {
          return invalid('QueueName', 'at most 80 letters, digits, hyphens and underscores');
        }
        const visibility = attributes['VisibilityTimeout'] === undefined ? undefined : Number(attributes['VisibilityTimeout']);
        if (visibility !== undefined && !(Number.isInteger(visibility) && visibility >= 0 && visibility <= 43_200)) {
          return invalid('VisibilityTimeout', 'between 0 and 43200');
        }
        let redrivePolicy: RedrivePolicy | undefined;
        if (attributes['RedrivePolicy'] !== undefined) {
          const parsed = parseRedrivePolicy(attributes['RedrivePolicy']);
          if (!parsed || !queues.has(parsed.deadLetterTargetArn.split(':').at(-1) ?? '')) {
            return invalid('RedrivePolicy', 'a JSON object naming an existing deadLetterTargetArn and a maxReceiveCount from 1 to 1000');
          }
          redrivePolicy = parsed;
        }
        if (
          !queues.create(name, {
            ...(visibility !== undefined ? { visibilityTimeoutSeconds: visibility } : {}),
            ...(redrivePolicy ? { redrivePolicy } : {}),
          })
        ) {
          return awsJsonError(
            400,
            'QueueNameExists',
            'A queue already exists with the same name and a different value for attribute(s).',
            {},
            'QueueAlreadyExists;Sender',
          );
        }
        const host = request.headers.host ?? '127.0.0.1';
        return ok({ QueueUrl: `http://${host}/${SANDBOX_ACCOUNT_ID}/${name}` });
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
