import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { noticeBody } from '../helpers/herald.js';
import { plainRedis, sleep, testPrefix, waitFor } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

// HERALD_SMS_PROVIDER=aws-sms end to end: the fallback SMS through the End User Messaging SMS SDK
// against the emulator, its status read from the events the feed sweep pulled from SQS.
let stack: Stack;
let phones = 0;
const phone = (behaviour = '00') => `+1${301 + (phones++ % 600)}55501${behaviour}`;

beforeAll(async () => {
  stack = await startStack({ prefix: testPrefix('awssms'), env: { HERALD_SMS_PROVIDER: 'aws-sms' } });
});
afterAll(async () => {
  await stack.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const notice = (to: string, deadlineInSeconds = 2) =>
  noticeBody({ recipient: { id: `player-aws-${phones}`, email: 'never@example.com', phone: to }, deadlineInSeconds });
const smsSends = (to: string) => stack.sandbox.requests().filter((r) => r.operation === 'aws-sms.send' && r.recipient === to);

describe('with HERALD_SMS_PROVIDER=aws-sms', () => {
  it('the fallback SMS is sent once and confirmed delivered from the feed; the log names aws-sms-sandbox', async () => {
    const to = phone();
    const id = await stack.createNotice(notice(to));
    const view = await stack.waitForState(id, ['sms_delivered', 'sms_failed']);
    expect(view.state).toBe('sms_delivered');
    const events = await stack.events(id);
    expect(ofType(events, 'sms.requested')).toEqual([
      expect.objectContaining({ provider: 'aws-sms-sandbox', idempotencyKey: `${id}-sms` }),
    ]);
    expect(ofType(events, 'sms.observed').at(-1)).toMatchObject({ status: 'delivered', providerStatus: 'TEXT_DELIVERED' });
    expect(stack.smsTo(to)).toBe(1);
  });

  it('an opted-out number is refused: sms_failed, and the number is on the suppression list', async () => {
    const to = phone('03');
    const id = await stack.createNotice(notice(to));
    await stack.waitForState(id, ['sms_failed']);
    const events = await stack.events(id);
    expect(ofType(events, 'provider.error').at(-1)).toMatchObject({ channel: 'sms', kind: 'rejected', retryable: false, httpStatus: 400 });
    expect(ofType(events, 'suppression.added')).toEqual([expect.objectContaining({ channel: 'sms', source: 'aws_sms_opt_out' })]);
    expect((await stack.web.call('GET', `/v1/suppressions/sms/${encodeURIComponent(to)}`)).statusCode).toBe(200);
    expect(stack.smsTo(to)).toBe(0);
  });

  it('an unreachable handset ends sms_failed from its TEXT_UNREACHABLE event', async () => {
    const id = await stack.createNotice(notice(phone('01')));
    await stack.waitForState(id, ['sms_failed']);
    expect(ofType(await stack.events(id), 'sms.observed').at(-1)).toMatchObject({ status: 'failed', providerStatus: 'TEXT_UNREACHABLE' });
  });

  it('a feed with duplicates (08) and one in reverse order (09) both end sms_delivered with one SMS each', async () => {
    for (const suffix of ['08', '09']) {
      const to = phone(suffix);
      const id = await stack.createNotice(notice(to));
      const view = await stack.waitForState(id, ['sms_delivered', 'sms_failed']);
      expect(view.state, suffix).toBe('sms_delivered');
      expect(smsSends(to)).toHaveLength(1);
    }
  });

  it('an SMS in doubt that reached the provider is found by its key in the feed: no second SMS', async () => {
    const to = phone();
    stack.sandbox.injectFault({ operation: 'aws-sms.send', mode: 'accept_then_hang', match: to });
    const id = await stack.createNotice(notice(to));
    await stack.waitForState(id, ['sms_delivered'], 30_000);
    expect(stack.smsTo(to)).toBe(1);
    expect(smsSends(to)).toHaveLength(1);
    const events = await stack.events(id);
    expect(ofType(events, 'provider.error')[0]).toMatchObject({ kind: 'timeout', operation: 'send', channel: 'sms' });
    expect(ofType(events, 'sms.accepted')).toEqual([expect.objectContaining({ resolvedBy: 'provider_search' })]);
  });

  it('an SMS in doubt the feed never shows stays in doubt: searched again until its bound, never sent twice', async () => {
    const to = phone();
    stack.sandbox.injectFault({ operation: 'aws-sms.send', mode: 'hang', match: to });
    const id = await stack.createNotice(notice(to));
    await stack.waitForState(id, ['sms_sending']);
    await sleep(9_000);
    const view = await stack.view(id);
    expect(view.state).toBe('sms_sending');
    expect(smsSends(to)).toHaveLength(1);
    expect(stack.smsTo(to)).toBe(0);
    const events = await stack.events(id);
    expect(ofType(events, 'sms.requested')).toHaveLength(1);
    const searches = ofType(events, 'provider.error').filter((e) => e.operation === 'search');
    expect(searches.length).toBeGreaterThanOrEqual(1);
    expect(searches.every((e) => e.kind === 'server_error' && e.retryable === true)).toBe(true);
  });
});

describe('with HERALD_SMS_PROVIDER=aws-sms, when the feed never shows an SMS in doubt', () => {
  // A short SMS plan: five checks, 0.2 to 6.2 s after an SMS is accepted, so the search for an SMS
  // in doubt ends 6.2 s after its attempt started; finished notices leave Redis a second later.
  let short: Stack;
  const redis = plainRedis();
  beforeAll(async () => {
    short = await startStack({
      prefix: testPrefix('awssms-bound'),
      env: {
        HERALD_SMS_PROVIDER: 'aws-sms',
        HERALD_MAX_CHECKS_PER_NOTICE: '5',
        HERALD_NOTICE_KEEP_HOT: '1s',
        HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
        HERALD_MIRROR_INTERVAL_MS: '200',
      },
    });
  });
  afterAll(async () => {
    await short.close();
    await redis.quit();
  });

  it('records sms.unconfirmed (sms_send_unconfirmed) once the SMS plan has run out, stops searching, sends no second SMS, and leaves Redis', async () => {
    // `10`: the emulator publishes no event for the number. accept_then_drop: the message is
    // created (one SMS) and the connection dropped (Herald cannot know); hang: nothing is created.
    const dropped = `+1${301 + (phones++ % 600)}5550110`;
    const hung = `+1${301 + (phones++ % 600)}5550110`;
    short.sandbox.injectFault({ operation: 'aws-sms.send', mode: 'accept_then_drop', match: dropped });
    short.sandbox.injectFault({ operation: 'aws-sms.send', mode: 'hang', match: hung });
    const body = (to: string) =>
      noticeBody({
        recipient: { id: `player-aws-bound-${to.slice(2, 5)}`, email: 'never@example.com', phone: to },
        deadlineInSeconds: 2,
        policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 1 },
      });
    const [droppedId, hungId] = await Promise.all([short.createNotice(body(dropped)), short.createNotice(body(hung))]);

    for (const [id, to, delivered] of [
      [droppedId, dropped, 1],
      [hungId, hung, 0],
    ] as const) {
      const noticeKey = short.web.store.keys.notice(id);
      await waitFor(async () => (await redis.exists(noticeKey)) === 0, 45_000, `the unconfirmed notice ${id} to leave Redis`);
      const view = await short.view(id);
      expect(view).toMatchObject({ id, state: 'sms_sending', fallback: { reason: 'email_deadline_elapsed' }, sms: { status: 'unknown' } });
      expect(short.sandbox.requests().filter((r) => r.operation === 'aws-sms.send' && r.recipient === to)).toHaveLength(1);
      expect(short.smsTo(to)).toBe(delivered);

      const events = await short.events(id);
      const types = events.map((e) => e.type);
      expect(ofType(events, 'sms.requested')).toHaveLength(1);
      expect(types).not.toContain('sms.accepted');
      expect(types).not.toContain('notice.completed');
      const requested = ofType(events, 'sms.requested')[0]!;
      const [unconfirmed, ...more] = ofType(events, 'sms.unconfirmed');
      expect(more).toEqual([]);
      expect(unconfirmed).toMatchObject({ attemptId: requested.attemptId, reason: 'sms_send_unconfirmed', checks: 0 });
      // The bound: the attempt's start plus the SMS plan's span (6.2 s), and never before it.
      const searchedUntil = Date.parse(String(unconfirmed!.searchedUntil));
      expect(searchedUntil - Date.parse(requested.at)).toBeGreaterThanOrEqual(6_100);
      expect(searchedUntil - Date.parse(requested.at)).toBeLessThanOrEqual(6_300);
      expect(Date.parse(unconfirmed!.at)).toBeGreaterThanOrEqual(searchedUntil);
      // Searched until then (each search a retryable provider.error), and not once after.
      const searches = ofType(events, 'provider.error').filter((e) => e.operation === 'search');
      expect(searches.length).toBeGreaterThanOrEqual(2);
      expect(searches.every((e) => e.kind === 'server_error' && e.retryable === true)).toBe(true);
      const after = events.filter((e) => e.seq > unconfirmed!.seq && e.type !== 'notice.reconciled').map((e) => e.type);
      expect(after).toEqual(['content.purged']);
    }
  });
});
