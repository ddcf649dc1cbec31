import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_ACCOUNT_ID, SANDBOX_QUEUE_NAMES, SANDBOX_TOPIC_ARNS } from '@herald/sandbox';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { SuppressionStore } from '../../src/store/suppressions.js';
import { noticeBody } from '../helpers/herald.js';
import { plainRedis, sleep, testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

// HERALD_EMAIL_PROVIDER=ses end to end: the HTTP API, a real worker, the SES v2 SDK against the
// emulator, its events through SNS envelopes into the emulated SQS queue, the feed sweep.
let stack: Stack;
let phones = 0;
const phone = (behaviour = '00') => `+1${201 + (phones++ % 700)}55501${behaviour}`;

beforeAll(async () => {
  // Every scrape reads Redis: the feed's counters are asserted right after the sweep counted them.
  stack = await startStack({ prefix: testPrefix('ses'), env: { HERALD_EMAIL_PROVIDER: 'ses', HERALD_METRICS_CACHE_MS: '0' } });
});
afterAll(async () => {
  await stack.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const notice = (email: string, to: string | undefined, deadlineInSeconds: number) =>
  noticeBody({ recipient: { id: `player-ses-${phones}`, email, ...(to ? { phone: to } : {}) }, deadlineInSeconds });
const sesSends = (address: string) => stack.sandbox.requests().filter((r) => r.operation === 'ses.send' && r.recipient === address);

/** Puts an SNS envelope of `topicArn` carrying an SES event into the SES events queue, as anyone the queue lets in could. */
async function forge(topicArn: string, record: Record<string, unknown>): Promise<void> {
  const sqs = new SQSClient({
    region: 'us-east-1',
    credentials: { accessKeyId: 'AKIAFORGER', secretAccessKey: 'forger' },
    endpoint: stack.sandbox.url,
    maxAttempts: 1,
  });
  const envelope = { Type: 'Notification', MessageId: `forged-${Date.now()}`, TopicArn: topicArn, Message: JSON.stringify(record) };
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: `${stack.sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.ses}`,
      MessageBody: JSON.stringify(envelope),
    }),
  );
  sqs.destroy();
}

/** A permanent bounce of the notice's message, naming `bounced` as the recipient. */
const bounceOf = (id: string, messageId: string, bounced: string) => ({
  eventType: 'Bounce',
  mail: { messageId, timestamp: new Date().toISOString(), destination: [bounced], tags: { herald_key: [`${id}-email`], notice_id: [id] } },
  bounce: {
    bounceType: 'Permanent',
    bounceSubType: 'General',
    bouncedRecipients: [{ emailAddress: bounced }],
    timestamp: new Date().toISOString(),
  },
});

/** The feed's counter of one outcome, as /metrics says it. */
async function feedCount(outcome: string): Promise<number> {
  const text = (await stack.web.call('GET', '/metrics')).body;
  return Number(new RegExp(`^herald_feed_messages_total\\{provider="ses",outcome="${outcome}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const by = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > by) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** The notice's message ID, once SES accepted it. */
async function acceptedMessage(id: string): Promise<string> {
  let messageId: string | undefined;
  await until('email.accepted', async () => {
    messageId = ofType(await stack.events(id), 'email.accepted')[0]?.providerMessageId as string | undefined;
    return messageId !== undefined;
  });
  return messageId!;
}

describe('with HERALD_EMAIL_PROVIDER=ses', () => {
  it('a delivered email ends email_delivered, read from the feed, with no SMS; the log names ses-sandbox', async () => {
    const to = phone();
    const id = await stack.createNotice(notice('delivered+300ms@example.com', to, 8));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    const events = await stack.events(id);
    expect(view.state).toBe('email_delivered');
    expect(ofType(events, 'email.requested')[0]).toMatchObject({ provider: 'ses-sandbox' });
    expect(ofType(events, 'email.observed').at(-1)).toMatchObject({ status: 'delivered', providerStatus: 'Delivery' });
    expect(ofType(events, 'fallback.decided')).toHaveLength(0);
    expect(stack.smsTo(to)).toBe(0);
  });

  it('an email never delivered falls back once, at or after the deadline, with one SMS', async () => {
    const to = phone();
    const id = await stack.createNotice(notice('never@example.com', to, 3));
    const view = await stack.waitForState(id, ['sms_delivered']);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = await stack.events(id);
    const decided = ofType(events, 'fallback.decided');
    expect(decided).toHaveLength(1);
    expect(Date.parse(decided[0]!.decidedAt as string)).toBeGreaterThanOrEqual(Date.parse(decided[0]!.deadline as string));
    // Only the Send event ever came: accepted, pending.
    expect(ofType(events, 'email.observed').every((e) => e.status === 'pending')).toBe(true);
    expect(stack.smsTo(to)).toBe(1);
  });

  it('a hard bounce falls back early with email_bounced and puts the address on the suppression list', async () => {
    const to = phone();
    const address = 'bounce+200ms+ses@example.com';
    const id = await stack.createNotice(notice(address, to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_bounced');
    expect(Date.parse(view.fallback.decidedAt)).toBeLessThan(Date.parse(view.deadline));
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').some((e) => e.status === 'bounced' && e.bounceType === 'Permanent/General')).toBe(true);
    expect(stack.smsTo(to)).toBe(1);
    const suppression = await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(address)}`);
    expect(suppression.json()).toMatchObject({ source: 'ses_hard_bounce', noticeId: id });
  });

  it('an email opened but never delivered still falls back at the deadline', async () => {
    const to = phone();
    const id = await stack.createNotice(notice('opened+300ms@example.com', to, 4));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = await stack.events(id);
    expect(
      ofType(events, 'email.observed').some((e) => (e.engagement as string[] | undefined)?.includes('opened') && e.status === 'pending'),
    ).toBe(true);
    expect(stack.smsTo(to)).toBe(1);
  });

  it('a feed with duplicates and reordering still ends delivered, and no observation goes back', async () => {
    for (const address of ['delivered+300ms+dup@example.com', 'delivered+300ms+reorder@example.com']) {
      const to = phone();
      const id = await stack.createNotice(notice(address, to, 8));
      const view = await stack.waitForState(id, ['email_delivered', 'sms_sent', 'sms_delivered']);
      expect(view.state, address).toBe('email_delivered');
      expect(sesSends(address)).toHaveLength(1);
      expect(stack.smsTo(to)).toBe(0);
    }
  });

  it('a send in doubt that reached SES is found by its key in the feed: no second email', async () => {
    const address = 'delivered+300ms+doubt@example.com';
    stack.sandbox.injectFault({ operation: 'ses.send', mode: 'accept_then_hang', match: address });
    const id = await stack.createNotice(notice(address, phone(), 15));
    await stack.waitForState(id, ['email_delivered'], 30_000);
    expect(stack.sandbox.emails().filter((m) => m.to === address)).toHaveLength(1);
    expect(sesSends(address)).toHaveLength(1);
    const events = await stack.events(id);
    expect(ofType(events, 'provider.error')[0]).toMatchObject({ kind: 'timeout', operation: 'send', channel: 'email' });
    expect(ofType(events, 'email.accepted')).toEqual([expect.objectContaining({ resolvedBy: 'provider_search' })]);
  });

  it('a send in doubt the feed never shows stays in doubt, is never sent again, and the deadline decides', async () => {
    const address = 'delivered+300ms+lost@example.com';
    const to = phone();
    stack.sandbox.injectFault({ operation: 'ses.send', mode: 'hang', match: address });
    const id = await stack.createNotice(notice(address, to, 7));
    const view = await stack.waitForState(id, ['sms_delivered'], 30_000);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    // One SES request (it never answered), no email, no second attempt.
    expect(sesSends(address)).toHaveLength(1);
    const events = await stack.events(id);
    expect(ofType(events, 'email.requested')).toHaveLength(1);
    const searches = ofType(events, 'provider.error').filter((e) => e.operation === 'search');
    expect(searches.length).toBeGreaterThanOrEqual(1);
    // SES cannot answer "no such message": each search is recorded as a retryable error, never as "none".
    expect(searches.every((e) => e.kind === 'server_error' && e.retryable === true)).toBe(true);
    expect(ofType(events, 'email.observed').at(-1)).toMatchObject({ status: 'unknown', note: 'email_send_unconfirmed' });
    expect(stack.smsTo(to)).toBe(1);
  });

  it('a forged bounce from another SNS topic records nothing and suppresses nothing; /metrics counts it', async () => {
    const address = 'delivered+4s+forged@example.com';
    const id = await stack.createNotice(notice(address, phone(), 20));
    const messageId = await acceptedMessage(id);
    const before = await feedCount('foreign_topic');
    // Everything right but the topic: the notice's own message, key and address, seconds before its delivery.
    await forge('arn:aws:sns:us-east-1:999999999999:not-herald', bounceOf(id, messageId, address));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').some((e) => e.status === 'bounced')).toBe(false);
    expect(ofType(events, 'suppression.added')).toHaveLength(0);
    expect(await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(address)}`)).toMatchObject({ statusCode: 404 });
    await until('the forged envelope counted', async () => (await feedCount('foreign_topic')) > before);
  });

  it("a bounce naming an address other than the notice's own suppresses nothing of it; an over-long address is refused", async () => {
    const address = 'delivered+4s+mismatch@example.com';
    const id = await stack.createNotice(notice(address, phone(), 20));
    const messageId = await acceptedMessage(id);
    const mismatches = await feedCount('address_mismatch');
    const refusals = await feedCount('refused');
    const other = 'someone-else@example.com';
    const long = `${'x'.repeat(300)}@example.com`;
    await forge(SANDBOX_TOPIC_ARNS.ses, bounceOf(id, messageId, other));
    await forge(SANDBOX_TOPIC_ARNS.ses, bounceOf(id, messageId, long));
    // Neither is recorded as the message's observation: the delivery still ends the notice.
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    expect(ofType(await stack.events(id), 'email.observed').some((e) => e.status === 'bounced')).toBe(false);
    // The API refuses to look up an address that long: the list itself is read.
    const redis = plainRedis();
    const suppressions = new SuppressionStore(redis, stack.config.prefix);
    expect(await suppressions.get('email', other)).toBeNull();
    expect(await suppressions.get('email', long)).toBeNull();
    expect(await suppressions.get('email', address)).toBeNull();
    redis.disconnect();
    await until(
      'both bounces counted',
      async () => (await feedCount('address_mismatch')) > mismatches && (await feedCount('refused')) > refusals,
    );
  });

  it('the worker drains the events queue: what was stored is deleted', async () => {
    await sleep(1500);
    const queue = stack.sandbox.feedQueues().find((q) => q.name === 'herald-ses-events')!;
    expect(queue.deleted).toBeGreaterThan(0);
  });
});

/**
 * An SES send answered 500 is in doubt (SES may have taken it), and SES has no message search: its
 * event feed establishes whether the message arrived. Here HERALD_FEED_ABSENCE_MS is 3 s.
 */
describe('with HERALD_EMAIL_PROVIDER=ses and a send answered 500', () => {
  let absence: Stack;
  const ABSENCE_MS = 3_000;
  beforeAll(async () => {
    absence = await startStack({
      prefix: testPrefix('ses-absent'),
      env: { HERALD_EMAIL_PROVIDER: 'ses', HERALD_FEED_ABSENCE_MS: String(ABSENCE_MS) },
    });
  });
  afterAll(() => absence.close());

  const sends = (address: string) => absence.sandbox.requests().filter((r) => r.operation === 'ses.send' && r.recipient === address);

  it('is recorded not arrived once the feed has shown no event of it for HERALD_FEED_ABSENCE_MS, sent once more, and delivered: one email, no SMS', async () => {
    const address = 'delivered+300ms+absent@example.com';
    const to = phone();
    absence.sandbox.injectFault({ operation: 'ses.send', mode: 'status_500', match: address });
    const id = await absence.createNotice(notice(address, to, 30));
    const view = await absence.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered'], 30_000);
    expect(view.state).toBe('email_delivered');
    expect(absence.sandbox.emails().filter((m) => m.to === address)).toHaveLength(1);
    expect(sends(address)).toHaveLength(2);
    expect(absence.smsTo(to)).toBe(0);

    const events = await absence.events(id);
    const [first, second] = ofType(events, 'email.requested');
    expect(ofType(events, 'email.requested')).toHaveLength(2);
    expect(ofType(events, 'provider.error')[0]).toMatchObject({
      operation: 'send',
      kind: 'server_error',
      httpStatus: 500,
      attemptId: first!.attemptId,
    });
    const notArrived = ofType(events, 'email.not_arrived');
    expect(notArrived).toEqual([
      expect.objectContaining({
        attemptId: first!.attemptId,
        provider: 'ses-sandbox',
        feedAbsenceMs: ABSENCE_MS,
        attemptStartedAt: first!.at,
      }),
    ]);
    // Never before the absence time; the new attempt follows it, under the same key.
    expect(Date.parse(notArrived[0]!.at)).toBeGreaterThanOrEqual(Date.parse(first!.at) + ABSENCE_MS);
    expect(second).toMatchObject({ retryOf: first!.attemptId, idempotencyKey: first!.idempotencyKey, attempt: 2 });
    expect(second!.seq).toBeGreaterThan(notArrived[0]!.seq);
    expect(ofType(events, 'email.accepted')).toEqual([expect.objectContaining({ attemptId: second!.attemptId })]);
    expect(ofType(events, 'fallback.decided')).toHaveLength(0);
  });

  it('when the deadline comes first, the deadline decides as for any send in doubt: no second email, one SMS', async () => {
    const address = 'delivered+300ms+absent-late@example.com';
    const to = phone();
    absence.sandbox.injectFault({ operation: 'ses.send', mode: 'status_500', match: address });
    const id = await absence.createNotice(notice(address, to, 2));
    const view = await absence.waitForState(id, ['sms_delivered'], 30_000);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    expect(sends(address)).toHaveLength(1);
    expect(absence.smsTo(to)).toBe(1);
    const events = await absence.events(id);
    expect(ofType(events, 'email.not_arrived')).toHaveLength(0);
    expect(ofType(events, 'email.requested')).toHaveLength(1);
  });
});
