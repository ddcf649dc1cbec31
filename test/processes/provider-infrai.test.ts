import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { noticeBody } from '../helpers/herald.js';
import { testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

/**
 * Herald with HERALD_EMAIL_PROVIDER=infrai and HERALD_SMS_PROVIDER=infrai: the HTTP API and a
 * real worker against the Infrai emulator, through the adapter's own fetch.
 */
let stack: Stack;
let phones = 0;
const phone = (behaviour = '00') => `+1${301 + (phones++ % 600)}55501${behaviour}`;

beforeAll(async () => {
  stack = await startStack({ prefix: testPrefix('infrai'), env: { HERALD_EMAIL_PROVIDER: 'infrai', HERALD_SMS_PROVIDER: 'infrai' } });
});
afterAll(async () => {
  await stack.close();
});

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
const notice = (email: string, to: string | undefined, deadlineInSeconds: number) =>
  noticeBody({ recipient: { id: `player-${phones}`, email, ...(to ? { phone: to } : {}) }, deadlineInSeconds });
const infraiCalls = (operation: string, recipient: string) =>
  stack.sandbox.requests().filter((r) => r.operation === operation && r.recipient === recipient);

describe('a notice through Infrai', () => {
  it('delivered: ends email_delivered, no SMS, and names infrai-sandbox in email.requested', async () => {
    const to = phone();
    const address = 'delivered+300ms+infrai@example.com';
    const id = await stack.createNotice(notice(address, to, 6));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const events = await stack.events(id);
    expect(ofType(events, 'email.requested')[0]).toMatchObject({ provider: 'infrai-sandbox', idempotencyKey: `${id}-email` });
    expect(ofType(events, 'email.observed').at(-1)).toMatchObject({ status: 'delivered' });
    expect(ofType(events, 'fallback.decided')).toHaveLength(0);
    expect(stack.smsTo(to)).toBe(0);
    expect(stack.sandbox.emails().filter((m) => m.to === address)).toEqual([
      expect.objectContaining({ messageStream: 'infrai', metadata: { idempotency_key: `${id}-email` } }),
    ]);
  });

  it('never delivered: one fallback at or after the deadline and one SMS through Infrai', async () => {
    const to = phone();
    const id = await stack.createNotice(notice('never+infrai@example.com', to, 3));
    const view = await stack.waitForState(id, ['sms_delivered']);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = await stack.events(id);
    const decided = ofType(events, 'fallback.decided');
    expect(decided).toHaveLength(1);
    expect(Date.parse(decided[0]!.decidedAt as string)).toBeGreaterThanOrEqual(Date.parse(decided[0]!.deadline as string));
    expect(ofType(events, 'sms.requested')[0]).toMatchObject({ provider: 'infrai-sandbox', idempotencyKey: `${id}-sms` });
    expect(ofType(events, 'sms.observed').at(-1)).toMatchObject({ status: 'delivered', providerStatus: 'delivered' });
    expect(stack.smsTo(to)).toBe(1);
    expect(infraiCalls('infrai.sms.send', to)).toHaveLength(1);
  });

  it('hard bounce: falls back early with email_bounced', async () => {
    const to = phone();
    const id = await stack.createNotice(notice('bounce+200ms+infrai@example.com', to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_bounced');
    expect(Date.parse(view.fallback.decidedAt)).toBeLessThan(Date.parse(view.deadline));
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').some((e) => e.status === 'bounced' && e.bounceType === 'hard')).toBe(true);
    expect(stack.smsTo(to)).toBe(1);
  });

  it('opened only: records the engagement and still falls back at the deadline', async () => {
    const to = phone();
    const id = await stack.createNotice(notice('opened+200ms+infrai@example.com', to, 3));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').some((e) => (e.engagement as string[]).includes('opened') && e.status === 'pending')).toBe(
      true,
    );
    expect(stack.smsTo(to)).toBe(1);
  });

  it('email send in doubt: resolved by replaying it under its key, one email', async () => {
    const address = 'delivered+300ms+infrai-doubt@example.com';
    stack.sandbox.injectFault({ operation: 'infrai.email.send', mode: 'accept_then_hang', match: address });
    const id = await stack.createNotice(notice(address, phone(), 15));
    await stack.waitForState(id, ['email_delivered']);
    expect(stack.sandbox.emails().filter((m) => m.to === address)).toHaveLength(1);
    const events = await stack.events(id);
    expect(ofType(events, 'provider.error')[0]).toMatchObject({ kind: 'timeout', operation: 'send', channel: 'email' });
    expect(ofType(events, 'email.requested')).toHaveLength(1);
    expect(ofType(events, 'email.accepted')).toEqual([expect.objectContaining({ resolvedBy: 'provider_search' })]);
    // The search was the replay: a second POST that created nothing.
    expect(infraiCalls('infrai.email.send', address)).toHaveLength(2);
  });

  it('SMS send in doubt: resolved by replaying it under its key, one SMS', async () => {
    const to = phone();
    stack.sandbox.injectFault({ operation: 'infrai.sms.send', mode: 'accept_then_drop', match: to });
    const id = await stack.createNotice(notice('never+infrai-sms-doubt@example.com', to, 2));
    await stack.waitForState(id, ['sms_delivered']);
    expect(stack.smsTo(to)).toBe(1);
    const events = await stack.events(id);
    expect(ofType(events, 'provider.error').some((e) => e.channel === 'sms' && e.operation === 'send')).toBe(true);
    expect(ofType(events, 'sms.accepted')).toEqual([expect.objectContaining({ resolvedBy: 'provider_search' })]);
  });

  it('opted-out number: sms_failed, the number suppressed, the next fallback blocked', async () => {
    const to = phone('03');
    const first = await stack.createNotice(notice('never+infrai-stop@example.com', to, 2));
    await stack.waitForState(first, ['sms_failed']);
    expect((await stack.web.call('GET', `/v1/suppressions/sms/${encodeURIComponent(to)}`)).json()).toMatchObject({
      noticeId: first,
      source: 'infrai_suppressed',
    });
    const second = await stack.createNotice(notice('never+infrai-stop2@example.com', to, 2));
    await stack.waitForState(second, ['blocked']);
    expect(infraiCalls('infrai.sms.send', to)).toHaveLength(1);
  });
});
