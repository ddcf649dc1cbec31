import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredEntry } from '../../src/store/notices.js';
import { noticeBody } from '../helpers/herald.js';
import { sleep, testPrefix } from '../helpers/env.js';
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

  it('an SMS in doubt the feed never shows stays in doubt: searched again and again, never sent twice', async () => {
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
