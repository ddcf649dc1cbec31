import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { createAwsSmsProvider } from '../../src/providers/aws-sms.js';
import { diagnose } from '../../src/doctor.js';
import { checkFeedQueues, FeedSweep, POISON_RECEIVES } from '../../src/providers/feed.js';
import { readSesMessage, readSmsMessage } from '../../src/providers/feed-events.js';
import { createSesProvider } from '../../src/providers/ses.js';
import { ProviderError, type EmailProvider, type SmsProvider } from '../../src/providers/types.js';
import {
  SANDBOX_ACCOUNT_ID,
  SANDBOX_MAX_RECEIVE_COUNT,
  SANDBOX_QUEUE_NAMES,
  SANDBOX_TOPIC_ARNS,
  startSandbox,
  type Sandbox,
} from '@herald/sandbox';
import { KEEP_AFTER_FINAL_READ_MS, ProviderFeedStore } from '../../src/store/provider-feed.js';
import { SuppressionStore } from '../../src/store/suppressions.js';
import { shardOfKey } from '../../src/notice/ids.js';
import { deleteKeys, plainRedis, sleep, testEnv, testPrefix } from '../helpers/env.js';

const credentials = { accessKeyId: 'AKIASANDBOX', secretAccessKey: 'sandbox-secret' };
let sandbox: Sandbox;
let email: EmailProvider;
let sms: SmsProvider;
let sweep: FeedSweep;
let store: ProviderFeedStore;
let suppressions: SuppressionStore;
const redis = plainRedis();
const prefix = testPrefix('awsfeed');
/** The SES adapter's HERALD_FEED_ABSENCE_MS here. */
const ABSENCE_MS = 1_500;

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ProviderError) return error;
    throw error;
  }
  throw new Error('expected a ProviderError');
}

beforeAll(async () => {
  sandbox = await startSandbox({ slowMs: 300 });
  store = new ProviderFeedStore(redis, prefix, 60_000);
  suppressions = new SuppressionStore(redis, prefix);
  const common = { region: 'us-east-1', credentials, endpoint: sandbox.url, timeoutMs: 2000 };
  email = createSesProvider({
    ...common,
    from: 'herald@sandbox.example',
    configurationSet: 'herald',
    feed: store,
    feedAbsenceMs: ABSENCE_MS,
  });
  sms = createAwsSmsProvider({ ...common, originationIdentity: '+15005550006', configurationSet: 'herald', feed: store });
  sweep = new FeedSweep({
    sources: [
      {
        provider: 'ses',
        queueUrl: `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.ses}`,
        topicArn: SANDBOX_TOPIC_ARNS.ses,
        read: readSesMessage,
      },
      {
        provider: 'aws-sms',
        queueUrl: `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.awsSms}`,
        topicArn: SANDBOX_TOPIC_ARNS.awsSms,
        read: readSmsMessage,
      },
    ],
    sqs: common,
    store,
    suppressions,
    clock: systemClock,
    log: pino({ level: 'silent' }),
    settings: { waitSeconds: 0, budgetMs: 2000 },
  });
});
afterAll(async () => {
  sweep.close();
  await sandbox.close();
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

let n = 0;
const address = (behaviour: string, ...labels: string[]) => [`${behaviour}+300ms`, ...labels, `a${++n}`].join('+') + '@example.com';
let areaCode = 300;
const number = (suffix: string) => `+1${++areaCode}55501${suffix}`;
const message = (to: string, key = `key-${++n}`) => ({
  to,
  subject: 'Terms',
  text: 'The terms change.',
  idempotencyKey: key,
  metadata: { notice_id: `n${n}` },
});

describe('SES v2 adapter, through the real SDK, against the emulator and its event feed', () => {
  it('sends one email with Herald key as a tag; status is pending until the feed says delivered', async () => {
    const sent = await email.send(message(`delivered+2s+a${++n}@example.com`));
    expect(sent.providerMessageId).toMatch(/^0100/);
    const stored = sandbox.emails().find((e) => e.messageId === sent.providerMessageId)!;
    expect(stored.metadata).toMatchObject({ herald_key: expect.stringMatching(/^key-/), notice_id: expect.any(String) });
    expect(await email.status(sent.providerMessageId)).toEqual({ providerStatus: 'NoEventYet', status: 'pending', engagement: [] });
    await sweep.sweepOnce();
    expect(await email.status(sent.providerMessageId)).toMatchObject({ providerStatus: 'Send', status: 'pending' });
    await sleep(2100);
    await sweep.sweepOnce();
    expect(await email.status(sent.providerMessageId)).toEqual({ providerStatus: 'Delivery', status: 'delivered', engagement: [] });
  });

  it('maps bounces, delays, suppression-list bounces, opens and complaints; suppresses no address without its notice', async () => {
    const bounce = await email.send(message(address('bounce')));
    const soft = await email.send(message(address('softbounce')));
    const deferred = await email.send(message(address('deferred')));
    const inactive = await email.send(message(address('inactive')));
    const opened = await email.send(message(address('opened')));
    const complaintTo = address('complaint');
    const complaint = await email.send(message(complaintTo));
    await sleep(700);
    await sweep.sweepOnce();
    expect(await email.status(bounce.providerMessageId)).toMatchObject({
      status: 'bounced',
      bounceType: 'Permanent/General',
      suppressed: true,
    });
    expect(await email.status(soft.providerMessageId)).toMatchObject({ status: 'deferred', bounceType: 'Transient/MailboxFull' });
    expect(await email.status(deferred.providerMessageId)).toMatchObject({
      status: 'deferred',
      providerStatus: 'DeliveryDelay(TransientCommunicationFailure)',
    });
    expect(await email.status(inactive.providerMessageId)).toMatchObject({ status: 'failed', suppressed: true });
    // Opens and clicks are engagement, never delivery.
    expect(await email.status(opened.providerMessageId)).toEqual({
      providerStatus: 'Send',
      status: 'pending',
      engagement: ['clicked', 'opened'],
    });
    // A complaint says the address is suppressed and changes nothing of the delivery.
    const complained = await email.status(complaint.providerMessageId);
    expect(complained).toMatchObject({
      status: 'delivered',
      providerStatus: 'Delivery',
      suppressed: true,
      suppressionSource: 'ses_complaint',
      engagement: ['complained'],
    });
    expect(await email.status(bounce.providerMessageId)).toMatchObject({ suppressionSource: 'ses_hard_bounce' });
    // These keys name no notice of Herald's: there is no address Herald recorded for the message,
    // so the sweep suppresses none (test/processes/provider-ses.test.ts has the notice's own).
    expect(await suppressions.get('email', complaintTo)).toBeNull();
  });

  it('keeps the latest observation through duplicates and a Send read after its Delivery', async () => {
    const dup = await email.send(message(address('delivered', 'dup')));
    const reordered = await email.send(message(address('delivered', 'reorder')));
    const sesQueue = () => sandbox.feedQueues().find((q) => q.name === SANDBOX_QUEUE_NAMES.ses)!;
    await sleep(1000);
    for (let sweeps = 0; sweeps < 10 && sesQueue().messages > 0; sweeps += 1) await sweep.sweepOnce();
    expect(await email.status(dup.providerMessageId)).toMatchObject({ status: 'delivered', providerStatus: 'Delivery' });
    expect(await email.status(reordered.providerMessageId)).toMatchObject({ status: 'delivered', providerStatus: 'Delivery' });
    // Everything stored was deleted.
    expect(sesQueue().messages).toBe(0);
    // The store itself, in a fixed order: a duplicate and a late Send change nothing.
    const delivery = { messageId: `order-${++n}`, at: 2000, rank: 5, status: 'delivered' as const, providerStatus: 'Delivery' };
    expect(await store.record('ses', delivery)).toBe(true);
    expect(await store.record('ses', delivery)).toBe(false);
    expect(await store.record('ses', { ...delivery, at: 1000, rank: 1, status: 'pending', providerStatus: 'Send' })).toBe(false);
    expect(
      await store.record('ses', { ...delivery, at: 3000, rank: 0, status: 'pending', providerStatus: 'Open', engagement: 'opened' }),
    ).toBe(false);
    expect(await store.observation('ses', delivery.messageId)).toEqual({
      providerStatus: 'Delivery',
      status: 'delivered',
      engagement: ['opened'],
      events: 4,
    });
    // Every record expires after the horizon; one read final goes sooner.
    const horizon = new ProviderFeedStore(redis, prefix, 10 * KEEP_AFTER_FINAL_READ_MS);
    const final = { ...delivery, messageId: `order-${++n}` };
    const pending = { ...delivery, messageId: `order-${++n}`, rank: 1, status: 'pending' as const, providerStatus: 'Send' };
    for (const event of [final, pending]) {
      await horizon.record('ses', event);
      await horizon.observation('ses', event.messageId);
    }
    expect(await redis.pttl(horizon.keys.feedObservation('ses', final.messageId))).toBeLessThanOrEqual(KEEP_AFTER_FINAL_READ_MS);
    expect(await redis.pttl(horizon.keys.feedObservation('ses', pending.messageId))).toBeGreaterThan(KEEP_AFTER_FINAL_READ_MS);
  });

  it('deletes and counts what is not from the pinned topic or breaks a bound, recording nothing of it', async () => {
    const client = new SQSClient({ region: 'us-east-1', credentials, endpoint: sandbox.url, maxAttempts: 1 });
    const QueueUrl = `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.ses}`;
    const forged = (topicArn: string | undefined, record: Record<string, unknown>) => {
      const body =
        topicArn === undefined
          ? record
          : { Type: 'Notification', MessageId: `f${++n}`, TopicArn: topicArn, Message: JSON.stringify(record) };
      return client.send(new SendMessageCommand({ QueueUrl, MessageBody: JSON.stringify(body) }));
    };
    const victim = `victim-${++n}@example.com`;
    const mail = (messageId: string, to: string) => ({
      messageId,
      destination: [to],
      timestamp: new Date().toISOString(),
      tags: { herald_key: [`k${n}`] },
    });
    const bounce = (to: string) => ({ bounceType: 'Permanent', bounceSubType: 'General', bouncedRecipients: [{ emailAddress: to }] });
    const ids = [`forged-${++n}`, `raw-${++n}`, `long-${++n}`];
    const counted = async (outcome: string) =>
      Number((await redis.hget(store.keys.metrics(shardOfKey('ses')), `feed|ses|${outcome}`)) ?? 0);
    const before = { foreign: await counted('foreign_topic'), raw: await counted('not_sns'), refused: await counted('refused') };
    await forged('arn:aws:sns:us-east-1:999999999999:not-herald', {
      eventType: 'Bounce',
      mail: mail(ids[0]!, victim),
      bounce: bounce(victim),
    });
    await forged(undefined, { eventType: 'Bounce', mail: mail(ids[1]!, victim), bounce: bounce(victim) });
    const long = `${'x'.repeat(50_000)}@example.com`;
    await forged(SANDBOX_TOPIC_ARNS.ses, { eventType: 'Bounce', mail: mail(ids[2]!, 'a@example.com'), bounce: bounce(long) });
    for (let sweeps = 0; sweeps < 5 && sandbox.feedQueues().find((q) => q.name === SANDBOX_QUEUE_NAMES.ses)!.messages > 0; sweeps += 1) {
      await sweep.sweepOnce();
    }
    expect(sandbox.feedQueues().find((q) => q.name === SANDBOX_QUEUE_NAMES.ses)!.messages).toBe(0);
    for (const id of ids) expect(await store.observation('ses', id)).toBeUndefined();
    expect(await suppressions.get('email', victim)).toBeNull();
    expect(await suppressions.get('email', long)).toBeNull();
    expect(await counted('foreign_topic')).toBe(before.foreign + 1);
    expect(await counted('not_sns')).toBe(before.raw + 1);
    expect(await counted('refused')).toBe(before.refused + 1);
    client.destroy();
  });

  it('finds a send in doubt by its key once the feed shows it, and never answers "none" before', async () => {
    const key = `doubt-${++n}`;
    const to = address('delivered');
    sandbox.injectFault({ operation: 'ses.send', mode: 'accept_then_drop', match: to });
    // The SDK names a reset connection a TimeoutError: either way the send is in doubt, and retryable.
    const dropped = await failure(email.send(message(to, key)));
    expect(['server_error', 'timeout']).toContain(dropped.kind);
    const inDoubt = await failure(email.findByIdempotencyKey(key, to));
    expect(inDoubt.message).toMatch(/stays in doubt/);
    await sweep.sweepOnce();
    const found = await email.findByIdempotencyKey(key, to);
    expect(found?.providerMessageId).toBe(sandbox.emails().find((e) => e.metadata.herald_key === key)!.messageId);
  });

  it('answers "no such message" only once the absence time has passed and the feed was read to its end since', async () => {
    const key = `absent-${++n}`;
    const to = address('delivered');
    // The attempt in doubt started at `startedAt`: the window says how long ago, as the engine does.
    const window = (startedAt: number) => ({ since: startedAt, lastAttemptAgeMs: Date.now() - startedAt });
    // Before the absence time: it cannot tell.
    expect((await failure(email.findByIdempotencyKey(key, to, window(Date.now() - ABSENCE_MS + 500)))).message).toMatch(/stays in doubt/);
    // Just past it, the feed last read to its end before: it still cannot tell.
    await sleep(20);
    const startedAt = Date.now() - ABSENCE_MS - 10;
    expect((await failure(email.findByIdempotencyKey(key, to, window(startedAt)))).message).toMatch(/not been read to its end/);
    // A sweep reads the queue to its end: no event with the key, so SES never took the message.
    await sweep.sweepOnce();
    expect(await email.findByIdempotencyKey(key, to, window(startedAt))).toBeNull();
    // A message the feed showed is found whatever the age.
    const sent = await email.send(message(to, key));
    await sweep.sweepOnce();
    expect(await email.findByIdempotencyKey(key, to, window(startedAt))).toEqual({
      providerMessageId: sent.providerMessageId,
      providerStatus: 'Send',
    });
  });

  it('classifies errors: rejection, throttling, 5xx, timeouts; the SDK never resends', async () => {
    expect(await failure(email.send(message(address('rejected'))))).toMatchObject({ kind: 'rejected', httpStatus: 400 });
    const flaky = address('flaky');
    expect(await failure(email.send(message(flaky)))).toMatchObject({ kind: 'server_error', httpStatus: 500 });
    expect(await failure(email.send(message(flaky)))).toMatchObject({ kind: 'rate_limited', httpStatus: 429 });
    await email.send(message(flaky));
    const hanging = address('delivered');
    sandbox.injectFault({ operation: 'ses.send', mode: 'hang', match: hanging });
    expect(await failure(email.send(message(hanging)))).toMatchObject({ kind: 'timeout' });
    sandbox.injectFault({ operation: 'ses.send', mode: 'status_503', match: 'retry-check' });
    expect(await failure(email.send(message(address('delivered', 'retry-check'))))).toMatchObject({
      kind: 'server_error',
      httpStatus: 503,
    });
    expect(sandbox.requests().filter((r) => r.operation === 'ses.send' && r.recipient?.includes('retry-check'))).toHaveLength(1);
  });

  it('refuses bad credentials as a retryable account problem, and verify says what the account is', async () => {
    const bad = createSesProvider({
      region: 'us-east-1',
      credentials: { accessKeyId: 'bad-token', secretAccessKey: 'x' },
      endpoint: sandbox.url,
      timeoutMs: 2000,
      from: 'a@b.c',
      configurationSet: 'c',
      feed: store,
      feedAbsenceMs: ABSENCE_MS,
    });
    expect(await failure(bad.verify())).toMatchObject({ kind: 'server_error', httpStatus: 403 });
    expect(await email.verify()).toMatch(/sending enabled/);
  });
});

describe('AWS End User Messaging SMS adapter, through the real SDK, against the emulator and its event feed', () => {
  it('sends with Herald key in Context; the feed moves it queued → delivered', async () => {
    const sent = await sms.send({ to: number('00'), body: 'Terms change', idempotencyKey: 'n1-sms' });
    expect(await sms.status(sent.providerMessageId)).toMatchObject({ status: 'pending', providerStatus: 'NoEventYet' });
    await sleep(1100);
    await sweep.sweepOnce();
    expect(await sms.status(sent.providerMessageId)).toEqual({ providerStatus: 'TEXT_DELIVERED', status: 'delivered', engagement: [] });
    expect(await sms.findSince(number('00'), 0, 'x', { to: number('00'), body: 'x', idempotencyKey: 'n1-sms' })).toEqual([
      { providerMessageId: sent.providerMessageId },
    ]);
  });

  it('maps failures, keeps carrier acceptance pending, survives duplicates and reordering', async () => {
    const unreachable = await sms.send({ to: number('01'), body: 'x' });
    const invalid = await sms.send({ to: number('02'), body: 'x' });
    const accepted = await sms.send({ to: number('05'), body: 'x' });
    const dup = await sms.send({ to: number('08'), body: 'x' });
    const reordered = await sms.send({ to: number('09'), body: 'x' });
    await sleep(1600);
    await sweep.sweepOnce();
    expect(await sms.status(unreachable.providerMessageId)).toMatchObject({ status: 'failed', providerStatus: 'TEXT_UNREACHABLE' });
    expect(await sms.status(invalid.providerMessageId)).toMatchObject({ status: 'failed', providerStatus: 'TEXT_INVALID' });
    expect(await sms.status(accepted.providerMessageId)).toMatchObject({ status: 'pending', providerStatus: 'TEXT_SUCCESSFUL' });
    expect(await sms.status(dup.providerMessageId)).toMatchObject({ status: 'delivered' });
    expect(await sms.status(reordered.providerMessageId)).toMatchObject({ status: 'delivered', providerStatus: 'TEXT_DELIVERED' });
  });

  it('an opted-out number is a suppressed rejection; an SMS the feed has not shown stays in doubt', async () => {
    expect(await failure(sms.send({ to: number('03'), body: 'x' }))).toMatchObject({ kind: 'rejected', suppressed: true, httpStatus: 400 });
    const flaky = number('04');
    expect(await failure(sms.send({ to: flaky, body: 'x' }))).toMatchObject({ kind: 'server_error', httpStatus: 500 });
    expect(await failure(sms.send({ to: flaky, body: 'x' }))).toMatchObject({ kind: 'rate_limited' });
    expect((await failure(sms.findSince(flaky, 0, 'x', { to: flaky, body: 'x', idempotencyKey: 'never-sent' }))).message).toMatch(
      /stays in doubt/,
    );
    expect(await sms.verify()).toMatch(/ACCOUNT_TIER=SANDBOX/);
  });
});

describe('the SQS emulator, through the real SDK', () => {
  it('hides a received message for its visibility timeout, checks receipt handles, and answers unknown queues as SQS does', async () => {
    const client = new SQSClient({ region: 'us-east-1', credentials, endpoint: sandbox.url, maxAttempts: 1 });
    await sms.send({ to: number('05'), body: 'x' });
    // Its three events (queued, pending, carrier-accepted) are all visible by now.
    await sleep(800);
    const queueUrl = `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.awsSms}`;
    const first = await client.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 3 }),
    );
    expect(first.Messages?.length).toBeGreaterThanOrEqual(1);
    const again = await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }));
    expect(again.Messages ?? []).toHaveLength(0);
    await expect(client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: 'nope' }))).rejects.toMatchObject({
      name: 'ReceiptHandleIsInvalid',
    });
    await expect(
      client.send(new ReceiveMessageCommand({ QueueUrl: `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/missing` })),
    ).rejects.toMatchObject({
      name: 'QueueDoesNotExist',
    });
    await sleep(3100);
    const back = await client.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }));
    expect(back.Messages?.map((m) => m.MessageId)).toEqual(expect.arrayContaining(first.Messages!.map((m) => m.MessageId)));
    for (const m of back.Messages ?? [])
      await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
    client.destroy();
  });

  it('creates queues, takes messages, counts receives, and moves a message past its redrive policy to the dead-letter queue', async () => {
    const client = new SQSClient({ region: 'us-east-1', credentials, endpoint: sandbox.url, maxAttempts: 1 });
    const name = `emulator-${++n}`;
    const dlq = await client.send(new CreateQueueCommand({ QueueName: `${name}-dlq` }));
    const redrive = JSON.stringify({ deadLetterTargetArn: `arn:aws:sqs:us-east-1:${SANDBOX_ACCOUNT_ID}:${name}-dlq`, maxReceiveCount: 2 });
    const { QueueUrl } = await client.send(
      new CreateQueueCommand({ QueueName: name, Attributes: { VisibilityTimeout: '0', RedrivePolicy: redrive } }),
    );
    expect(QueueUrl).toBe(`${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${name}`);
    // The same attributes again: the same queue; others: refused, as SQS does.
    await client.send(new CreateQueueCommand({ QueueName: name, Attributes: { VisibilityTimeout: '0', RedrivePolicy: redrive } }));
    await expect(client.send(new CreateQueueCommand({ QueueName: name }))).rejects.toMatchObject({ name: 'QueueNameExists' });
    const attributes = await client.send(
      new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['RedrivePolicy', 'VisibilityTimeout'] }),
    );
    expect(JSON.parse(attributes.Attributes!.RedrivePolicy!)).toEqual(JSON.parse(redrive));
    expect(attributes.Attributes!.VisibilityTimeout).toBe('0');
    const without = await client.send(new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['RedrivePolicy'] }));
    expect(without.Attributes?.RedrivePolicy).toBeUndefined();

    // The SDK checks the MD5 of what it sent against the answer's.
    await client.send(new SendMessageCommand({ QueueUrl, MessageBody: 'not an event' }));
    const counts: string[] = [];
    for (let receive = 0; receive < 3; receive += 1) {
      const answer = await client.send(new ReceiveMessageCommand({ QueueUrl, MessageSystemAttributeNames: ['ApproximateReceiveCount'] }));
      counts.push(...(answer.Messages ?? []).map((m) => m.Attributes!.ApproximateReceiveCount!));
    }
    // Received twice (its maxReceiveCount), then moved at the third receive.
    expect(counts).toEqual(['1', '2']);
    expect(sandbox.feedQueues().find((q) => q.name === name)).toMatchObject({ messages: 0, redriven: 1 });
    expect(sandbox.feedQueues().find((q) => q.name === `${name}-dlq`)).toMatchObject({ messages: 1 });
    // The events queues have one too.
    const events = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.ses}`,
        AttributeNames: ['All'],
      }),
    );
    expect(JSON.parse(events.Attributes!.RedrivePolicy!)).toMatchObject({ maxReceiveCount: SANDBOX_MAX_RECEIVE_COUNT });
    client.destroy();
  });

  it('counts a message it cannot read, then leaves it to the redrive policy, or deletes it once from a queue without one', async () => {
    const client = new SQSClient({ region: 'us-east-1', credentials, endpoint: sandbox.url, maxAttempts: 1 });
    const queue = async (name: string, attributes: Record<string, string>) =>
      (await client.send(new CreateQueueCommand({ QueueName: name, Attributes: { VisibilityTimeout: '0', ...attributes } }))).QueueUrl!;
    const bare = `poison-bare-${++n}`;
    const guarded = `poison-guarded-${++n}`;
    await queue(`${guarded}-dlq`, {});
    const maxReceiveCount = POISON_RECEIVES + 1;
    const urls = {
      bare: await queue(bare, {}),
      guarded: await queue(guarded, {
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: `arn:aws:sqs:us-east-1:${SANDBOX_ACCOUNT_ID}:${guarded}-dlq`,
          maxReceiveCount,
        }),
      }),
    };
    for (const QueueUrl of Object.values(urls))
      await client.send(new SendMessageCommand({ QueueUrl, MessageBody: 'truncated {"Type": "Noti' }));
    const counted = async (provider: string, outcome: string) =>
      Number((await redis.hget(store.keys.metrics(shardOfKey(provider)), `feed|${provider}|${outcome}`)) ?? 0);
    const poisonSweep = new FeedSweep({
      sources: [
        { provider: 'poison-bare', queueUrl: urls.bare, topicArn: SANDBOX_TOPIC_ARNS.ses, read: readSesMessage },
        { provider: 'poison-guarded', queueUrl: urls.guarded, topicArn: SANDBOX_TOPIC_ARNS.ses, read: readSesMessage },
      ],
      sqs: { region: 'us-east-1', credentials, endpoint: sandbox.url, timeoutMs: 2000 },
      store,
      suppressions,
      clock: systemClock,
      log: pino({ level: 'silent' }),
      settings: { waitSeconds: 0, budgetMs: 2000 },
    });
    const view = (name: string) => sandbox.feedQueues().find((q) => q.name === name)!;
    // One receive of each queue per sweep (the message is visible again at once).
    for (let sweeps = 0; sweeps < maxReceiveCount + 1; sweeps += 1) await poisonSweep.sweepOnce();
    poisonSweep.close();
    // Without a redrive policy: received POISON_RECEIVES times, then deleted, once.
    expect(view(bare)).toMatchObject({ messages: 0, deleted: 1 });
    expect(await counted('poison-bare', 'unreadable')).toBe(POISON_RECEIVES - 1);
    expect(await counted('poison-bare', 'poison_deleted')).toBe(1);
    // With one: Herald never deletes it; SQS moves it to the dead-letter queue past maxReceiveCount.
    expect(view(guarded)).toMatchObject({ messages: 0, deleted: 0, redriven: 1 });
    expect(view(`${guarded}-dlq`)).toMatchObject({ messages: 1 });
    expect(await counted('poison-guarded', 'unreadable')).toBe(maxReceiveCount);
    client.destroy();
  });

  it('a feed fault on receive loses nothing: the events are read by the next sweep', async () => {
    const sent = await email.send(message(address('delivered')));
    sandbox.injectFault({ operation: 'sqs.receive', mode: 'status_500', count: 2 });
    const failed = await sweep.sweepOnce();
    expect(failed.failed).toBe(2);
    await sleep(400);
    await sweep.sweepOnce();
    expect(await email.status(sent.providerMessageId)).toMatchObject({ status: 'delivered' });
  });
});

describe('herald doctor and the events queues', () => {
  it('reads each queue without receiving, and says when one does not exist', async () => {
    const sqs = { region: 'us-east-1', credentials, endpoint: sandbox.url, timeoutMs: 2000 };
    const sesQueue = `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.ses}`;
    expect(
      await checkFeedQueues([{ provider: 'ses', queueUrl: sesQueue, topicArn: SANDBOX_TOPIC_ARNS.ses, read: readSesMessage }], sqs),
    ).toEqual([{ provider: 'ses', queueUrl: sesQueue, waiting: expect.any(Number), redrivePolicy: true }]);
    const missing = checkFeedQueues(
      [{ provider: 'ses', queueUrl: `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/nope`, topicArn: SANDBOX_TOPIC_ARNS.ses, read: readSesMessage }],
      sqs,
    );
    await expect(missing).rejects.toMatchObject({ kind: 'server_error', httpStatus: 400 });

    const env = testEnv(testPrefix('doctor'), {
      HERALD_EMAIL_PROVIDER: 'ses',
      HERALD_SMS_PROVIDER: 'aws-sms',
      AWS_ENDPOINT_URL: sandbox.url,
      TWILIO_API_URL: sandbox.url,
      POSTMARK_API_URL: sandbox.url,
    });
    const findings = await diagnose(env);
    expect(findings.filter((f) => f.area === 'events queue')).toEqual([
      expect.objectContaining({ verdict: 'ok', what: expect.stringContaining('ses events') }),
      expect.objectContaining({ verdict: 'ok', what: expect.stringContaining('aws-sms events') }),
    ]);
    expect(findings.find((f) => f.area === 'ses')).toMatchObject({ verdict: 'ok' });
    expect(findings.find((f) => f.area === 'aws-sms')).toMatchObject({ verdict: 'ok' });
    const wrong = await diagnose({ ...env, SES_EVENTS_QUEUE_URL: `${sandbox.url}/${SANDBOX_ACCOUNT_ID}/wrong` });
    expect(wrong.find((f) => f.area === 'events queue')).toMatchObject({
      verdict: 'fail',
      fix: expect.stringContaining('SES_EVENTS_QUEUE_URL'),
    });
  });
});
