import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { noticeBody } from '../helpers/herald.js';
import { testPrefix, waitFor } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

let stack: Stack;
let phones = 0;
/** A fresh fictional number per notice; the last two digits choose the SMS behaviour. */
const phone = (behaviour = '00') => `+1${201 + (phones++ % 700)}55501${behaviour}`;

beforeAll(async () => {
  stack = await startStack({ prefix: testPrefix('life') });
});
afterAll(async () => {
  await stack.close();
});

const types = (events: StoredEntry[]) => events.map((e) => e.type);
const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);

function notice(email: string, to: string | undefined, deadlineInSeconds: number, extra: Record<string, unknown> = {}) {
  return noticeBody({
    recipient: { id: `player-${phones}`, email, ...(to ? { phone: to } : {}) },
    deadlineInSeconds,
    ...extra,
  });
}

/** Every entry is in order, and none carries the message body. */
function expectSoundLog(events: StoredEntry[]) {
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  const raw = JSON.stringify(events);
  expect(raw).not.toContain('The terms change on Monday');
  expect(raw).not.toContain('Terms change Monday.');
  expect(ofType(events, 'notice.completed').length).toBeLessThanOrEqual(1);
}

describe('a notice', () => {
  describe('when the email is delivered before the deadline', () => {
    it('ends email_delivered and sends no SMS', async () => {
      const to = phone();
      const id = await stack.createNotice(notice('delivered+300ms@example.com', to, 6));
      const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
      expect(view.state).toBe('email_delivered');
      expect(view.email.status).toBe('delivered');
      expect(view.fallback).toBeNull();
      const events = await stack.events(id);
      expect(types(events)).toEqual(expect.arrayContaining(['email.requested', 'email.accepted', 'email.observed', 'notice.completed']));
      expect(ofType(events, 'notice.completed')[0]).toMatchObject({ state: 'email_delivered' });
      expect(ofType(events, 'fallback.decided')).toHaveLength(0);
      expectSoundLog(events);
      expect(stack.smsTo(to)).toBe(0);
      // Its job (the one job a notice has, `<id>-deadline`) ends with the delivery rather than
      // wait for the deadline to wake up for nothing.
      await waitFor(
        async () => (await stack.web.queues.deadline.getJobState(`${id}-deadline`)) === 'completed',
        5_000,
        "the notice's job to finish",
      );
    });
  });

  describe('when the email is never delivered', () => {
    it('falls back at the deadline with exactly one decision and exactly one SMS, after at least two observations', async () => {
      const to = phone();
      const id = await stack.createNotice(notice('never@example.com', to, 3));
      const view = await stack.waitForState(id, ['sms_delivered']);
      expect(view.fallback.reason).toBe('email_deadline_elapsed');
      expect(view.sms.status).toBe('delivered');
      const events = await stack.events(id);
      const decided = ofType(events, 'fallback.decided');
      expect(decided).toHaveLength(1);
      expect(Date.parse(decided[0]!.decidedAt as string)).toBeGreaterThanOrEqual(Date.parse(decided[0]!.deadline as string));
      expect(decided[0]).toMatchObject({ lastEmailStatus: 'pending', smsIdempotencyKey: `${id}-sms` });
      const observed = ofType(events, 'email.observed');
      expect(observed.length).toBeGreaterThanOrEqual(2);
      // The deadline step reads the status once more and records it before deciding.
      const decidedAt = events.indexOf(decided[0]!);
      expect(events[decidedAt - 2]!.type).toBe('email.observed');
      expect(events[decidedAt - 1]).toMatchObject({ type: 'policy.checked', channel: 'sms', outcome: 'allowed' });
      expect(types(events)).toEqual(expect.arrayContaining(['sms.requested', 'sms.accepted', 'sms.observed']));
      expect(ofType(events, 'notice.completed')[0]).toMatchObject({ state: 'sms_delivered' });
      expectSoundLog(events);
      expect(stack.smsTo(to)).toBe(1);
    });
  });

  describe('when the email hard-bounces', () => {
    it('falls back early with email_bounced, before the deadline', async () => {
      const to = phone();
      const id = await stack.createNotice(notice('bounce+200ms@example.com', to, 30));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_bounced');
      expect(Date.parse(view.fallback.decidedAt)).toBeLessThan(Date.parse(view.deadline));
      const events = await stack.events(id);
      expect(ofType(events, 'email.observed').some((e) => e.status === 'bounced' && e.bounceType === 'HardBounce')).toBe(true);
      expect(ofType(events, 'fallback.decided')).toHaveLength(1);
      expect(stack.smsTo(to)).toBe(1);
      // The notice's job waits for the SMS's checks now, not for the deadline.
      const due = await stack.web.queues.deadline.delayedUntil(`${id}-deadline`);
      if (due !== undefined) expect(due).toBeLessThan(Date.parse(view.deadline));
    });
  });

  describe('when the email is opened but never delivered', () => {
    it('records the engagement but still falls back at the deadline', async () => {
      const to = phone();
      const id = await stack.createNotice(notice('opened@example.com', to, 3));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_deadline_elapsed');
      const events = await stack.events(id);
      expect(
        ofType(events, 'email.observed').some((e) => (e.engagement as string[] | undefined)?.includes('opened') && e.status === 'pending'),
      ).toBe(true);
      expect(stack.smsTo(to)).toBe(1);
    });
  });

  describe('when status calls time out', () => {
    it('records provider.error of kind timeout, never an email failure, and waits for the deadline', async () => {
      const to = phone();
      const id = await stack.createNotice(notice('hang-status@example.com', to, 4));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_deadline_elapsed');
      const events = await stack.events(id);
      const errors = ofType(events, 'provider.error');
      expect(errors.length).toBeGreaterThanOrEqual(1);
      expect(
        errors.every((e) => e.kind === 'timeout' && e.retryable === true && e.channel === 'email' && e.providerTimeoutMs === 1000),
      ).toBe(true);
      expect(ofType(events, 'email.observed').some((e) => ['bounced', 'failed'].includes(e.status as string))).toBe(false);
      expect(stack.smsTo(to)).toBe(1);
    });
  });

  describe('when the email send is flaky (a 500, then a 429)', () => {
    it('sends exactly one email and records each provider error', async () => {
      const id = await stack.createNotice(notice('flaky+200ms@example.com', phone(), 10));
      const view = await stack.waitForState(id, ['email_delivered']);
      expect(view.state).toBe('email_delivered');
      expect(stack.sandbox.emails().filter((m) => m.to === 'flaky+200ms@example.com' && m.metadata.notice_id === id)).toHaveLength(1);
      const errors = ofType(await stack.events(id), 'provider.error');
      expect(errors.map((e) => e.kind)).toEqual(expect.arrayContaining(['server_error', 'rate_limited']));
      expect(errors.find((e) => e.kind === 'rate_limited')).toMatchObject({ retryAfterMs: 1000 });
    });
  });

  describe('when the email send is accepted but its answer never arrives', () => {
    it('finds the email by its idempotency metadata instead of sending a second one', async () => {
      const address = 'delivered+300ms+doubt@example.com';
      stack.sandbox.injectFault({ operation: 'postmark.send', mode: 'accept_then_hang', match: address });
      const id = await stack.createNotice(notice(address, phone(), 15));
      await stack.waitForState(id, ['email_delivered']);
      expect(stack.sandbox.emails().filter((m) => m.to === address)).toHaveLength(1);
      const events = await stack.events(id);
      expect(ofType(events, 'provider.error')[0]).toMatchObject({ kind: 'timeout', operation: 'send', channel: 'email' });
      expect(ofType(events, 'email.accepted')).toHaveLength(1);
      expect(ofType(events, 'email.accepted')[0]).toMatchObject({ resolvedBy: 'provider_search' });
    });
  });

  describe('when Postmark refuses the email', () => {
    it('falls back at once with email_rejected for an invalid request (422/300)', async () => {
      const to = phone();
      const id = await stack.createNotice(notice('rejected@example.com', to, 30));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_rejected');
      expect(ofType(await stack.events(id), 'provider.error')[0]).toMatchObject({ kind: 'rejected', retryable: false, providerCode: 300 });
      expect(stack.smsTo(to)).toBe(1);
    });
    it('falls back at once with email_suppressed for an inactive recipient (422/406)', async () => {
      const id = await stack.createNotice(notice('inactive@example.com', phone(), 30));
      const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
      expect(view.fallback.reason).toBe('email_suppressed');
    });
  });

  describe('when the recipient withdraws SMS consent before the deadline', () => {
    it('records fallback.blocked, ends blocked, and sends no SMS', async () => {
      const to = phone();
      const body = notice('never@example.com', to, 3);
      const recipientId = (body.recipient as { id: string }).id;
      const id = await stack.createNotice(body);
      const put = await stack.web.call('PUT', `/v1/recipients/${recipientId}/policy`, { consent: { email: true, sms: false } });
      expect(put.statusCode).toBe(200);
      const view = await stack.waitForState(id, ['blocked', 'sms_sent', 'sms_delivered']);
      expect(view.state).toBe('blocked');
      const events = await stack.events(id);
      expect(ofType(events, 'policy.checked').at(-1)).toMatchObject({
        channel: 'sms',
        outcome: 'no_consent',
        policyVersion: put.json().version,
      });
      expect(ofType(events, 'fallback.blocked')[0]).toMatchObject({
        reason: 'sms_consent_missing',
        fallbackReason: 'email_deadline_elapsed',
      });
      expect(ofType(events, 'fallback.decided')).toHaveLength(0);
      expect(ofType(events, 'notice.completed')[0]).toMatchObject({ state: 'blocked' });
      expect(stack.smsTo(to)).toBe(0);
    });
  });

  describe('when there is no phone', () => {
    it('records fallback.blocked with no_phone', async () => {
      const id = await stack.createNotice(notice('never@example.com', undefined, 2));
      await stack.waitForState(id, ['blocked']);
      expect(ofType(await stack.events(id), 'fallback.blocked')[0]).toMatchObject({ reason: 'no_phone' });
    });
  });

  describe('when the SMS provider refuses the number (STOP, 21610)', () => {
    it('ends sms_failed with the provider error recorded', async () => {
      const id = await stack.createNotice(notice('never@example.com', phone('03'), 2));
      await stack.waitForState(id, ['sms_failed']);
      const events = await stack.events(id);
      expect(ofType(events, 'provider.error').at(-1)).toMatchObject({
        channel: 'sms',
        kind: 'rejected',
        providerCode: 21610,
        retryable: false,
      });
      expect(ofType(events, 'notice.completed')[0]).toMatchObject({ state: 'sms_failed' });
    });
  });

  describe('when the SMS is undelivered', () => {
    it('ends sms_failed after observing it', async () => {
      const id = await stack.createNotice(notice('never@example.com', phone('01'), 2));
      await stack.waitForState(id, ['sms_failed']);
      expect(ofType(await stack.events(id), 'sms.observed').at(-1)).toMatchObject({ status: 'failed', providerStatus: 'undelivered' });
    });
  });
});
