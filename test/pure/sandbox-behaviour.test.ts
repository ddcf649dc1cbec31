import { describe, expect, it } from 'vitest';
import { DEFAULT_EMAIL_DELAY_MS, planEmail, plannedEmailEvents } from '@herald/sandbox/email-behaviour';
import { plannedSteps, sentAt, smsBehaviour, stepAt } from '@herald/sandbox/sms-behaviour';

describe('email behaviour from the address', () => {
  it('reads the behaviour from the local part, with the default delay', () => {
    expect(planEmail('bounce@example.com')).toEqual({ behaviour: 'bounce', delayMs: DEFAULT_EMAIL_DELAY_MS });
    expect(planEmail('hang-status@example.com').behaviour).toBe('hang-status');
  });

  it('reads a delay tag in seconds or milliseconds', () => {
    expect(planEmail('delivered+3s@example.com')).toEqual({ behaviour: 'delivered', delayMs: 3000 });
    expect(planEmail('bounce+500ms@example.com')).toEqual({ behaviour: 'bounce', delayMs: 500 });
  });

  it('ignores label tags, which only make the address unique', () => {
    expect(planEmail('softbounce+200ms+player42@example.com')).toEqual({ behaviour: 'softbounce', delayMs: 200 });
    expect(planEmail('flaky+run7@example.com')).toEqual({ behaviour: 'flaky', delayMs: DEFAULT_EMAIL_DELAY_MS });
  });

  it('treats unknown addresses as delivered, case-insensitively and in Name <addr> form', () => {
    expect(planEmail('p42@example.com').behaviour).toBe('delivered');
    expect(planEmail('Player <NEVER+1s@Example.com>')).toEqual({ behaviour: 'never', delayMs: 1000 });
  });

  it('plans the events of each behaviour relative to creation', () => {
    const events = (address: string) => plannedEmailEvents(planEmail(address));
    expect(events('delivered+100ms@x.test')).toEqual([{ type: 'Delivered', afterMs: 100 }]);
    expect(events('bounce+100ms@x.test')).toEqual([{ type: 'Bounced', afterMs: 100, bounceType: 'HardBounce' }]);
    expect(events('softbounce+100ms@x.test')).toEqual([{ type: 'Bounced', afterMs: 100, bounceType: 'SoftBounce' }]);
    expect(events('deferred+100ms@x.test')).toEqual([{ type: 'Transient', afterMs: 100 }]);
    expect(events('opened+100ms@x.test')).toEqual([
      { type: 'Opened', afterMs: 100 },
      { type: 'LinkClicked', afterMs: 200 },
    ]);
    for (const never of ['never', 'timeout', 'hang-status', 'rejected', 'inactive']) {
      expect(events(`${never}@x.test`)).toEqual([]);
    }
  });
});

describe('SMS behaviour from the number', () => {
  it('reads the last two digits of +1 NPA 555-01XX numbers, any area code', () => {
    expect(smsBehaviour('+12025550101')).toBe('undelivered');
    expect(smsBehaviour('+14155550103')).toBe('opted_out');
    expect(smsBehaviour('+13125550107')).toBe('hang_status');
  });

  it('treats numbers outside the range, and unassigned suffixes, as delivered', () => {
    expect(smsBehaviour('+819012345678')).toBe('delivered');
    expect(smsBehaviour('+12025550199')).toBe('delivered');
    expect(smsBehaviour('+12025550601')).toBe('delivered');
  });

  it('moves a delivered message from queued to delivered within about a second', () => {
    const steps = plannedSteps('delivered', { createdAt: 0, viaService: false });
    expect([0, 300, 600, 1000].map((t) => stepAt(steps, t).status)).toEqual(['queued', 'sending', 'sent', 'delivered']);
    expect(sentAt(steps, 500)).toBeNull();
    expect(sentAt(steps, 1000)).toBe(600);
  });

  it('ends undelivered and failed messages with their error codes', () => {
    expect(stepAt(plannedSteps('undelivered', { createdAt: 0, viaService: false }), 5000)).toMatchObject({
      status: 'undelivered',
      errorCode: 30003,
    });
    const failed = plannedSteps('failed', { createdAt: 0, viaService: false });
    expect(stepAt(failed, 5000)).toMatchObject({ status: 'failed', errorCode: 30006 });
    expect(sentAt(failed, 5000)).toBeNull();
  });

  it('starts scheduled messages as scheduled and Messaging Service messages as accepted', () => {
    const scheduled = plannedSteps('delivered', { createdAt: 0, sendAt: 10_000, viaService: true });
    expect(stepAt(scheduled, 9_999).status).toBe('scheduled');
    expect(stepAt(scheduled, 10_000).status).toBe('accepted');
    expect(stepAt(scheduled, 10_100).status).toBe('queued');
    expect(stepAt(plannedSteps('stays_sent', { createdAt: 0, viaService: false }), 1e9).status).toBe('sent');
  });
});
