import { describe, expect, it } from 'vitest';
import type { SandboxEmail, SandboxSms } from '@herald/sandbox';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { checkNotice, checkRun, settled, type NoticeOutcome } from './invariants.js';
import type { NoticePlan } from './plan.js';

/**
 * The chaos checker is only worth its green if it turns red: each rule is shown failing on a
 * notice built to break it, starting from a sound one.
 */
const ID = 'ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa';
const PHONE = '+12015550100';
const DEADLINE = '2026-11-29T14:10:00.000Z';

const plan: NoticePlan = {
  index: 0,
  createAt: 0,
  recipientId: 'r0',
  email: 'never+n0@example.com',
  emailBehaviour: 'never',
  phone: PHONE,
  smsBehaviour: '00',
  deadlineInSeconds: 3,
  cancel: false,
  withdrawSmsConsent: false,
};

function log(...entries: Record<string, unknown>[]): StoredEntry[] {
  return entries.map((fields, i) => ({ id: `1-${i}`, noticeId: ID, at: DEADLINE, seq: i + 1, ...fields }) as StoredEntry);
}

const email: SandboxEmail = {
  messageId: 'pm-1',
  from: 'herald@sandbox.example',
  to: plan.email,
  subject: 's',
  messageStream: 'outbound',
  metadata: { notice_id: ID },
  behaviour: 'never',
  createdAt: 0,
  status: 'Sent',
  events: [],
};
const sms: SandboxSms = {
  sid: 'SM1',
  accountSid: 'AC1',
  to: PHONE,
  from: '+15005550006',
  messagingServiceSid: null,
  body: 'b',
  behaviour: 'delivered',
  createdAt: 0,
  sendAt: null,
  status: 'delivered',
  statusSince: 0,
  errorCode: null,
  dateSent: 0,
};

/** A notice that fell back and delivered its one SMS, with a complete log. */
function sound(): NoticeOutcome {
  const events = log(
    { type: 'notice.accepted' },
    { type: 'policy.checked', channel: 'email' },
    { type: 'email.requested', attemptId: 'a1' },
    { type: 'email.accepted', attemptId: 'a1', providerMessageId: 'pm-1' },
    { type: 'email.observed', status: 'pending', observedAt: DEADLINE },
    { type: 'policy.checked', channel: 'sms' },
    { type: 'fallback.decided', reason: 'email_deadline_elapsed', deadline: DEADLINE, decidedAt: '2026-11-29T14:10:00.120Z' },
    { type: 'sms.requested', attemptId: 'a2' },
    { type: 'sms.accepted', attemptId: 'a2', providerMessageId: 'SM1' },
    { type: 'sms.observed', status: 'delivered' },
    { type: 'notice.completed', state: 'sms_delivered' },
  );
  return {
    plan,
    id: ID,
    hash: {
      state: 'sms_delivered',
      seq: String(events.length),
      fallbackReason: 'email_deadline_elapsed',
      emailProviderMessageId: 'pm-1',
      smsProviderMessageId: 'SM1',
    },
    events,
    emails: [email],
    sms: [sms],
  };
}

const rules = (outcome: NoticeOutcome) => checkNotice(outcome).map((v) => v.rule);

describe('the chaos invariants', () => {
  it('find nothing wrong with a sound notice', () => {
    expect(checkNotice(sound())).toEqual([]);
    expect(checkRun([sound()], [email], [sms])).toEqual([]);
  });

  it('catch a second SMS', () => {
    expect(rules({ ...sound(), sms: [sms, { ...sms, sid: 'SM2' }] })).toContain('sms-twice');
  });

  it('catch a second email', () => {
    expect(rules({ ...sound(), emails: [email, { ...email, messageId: 'pm-2' }] })).toContain('email-twice');
  });

  it('catch a decided fallback whose SMS never reached the provider', () => {
    expect(rules({ ...sound(), sms: [] })).toContain('sms-missing');
  });

  it('catch a second fallback decision', () => {
    const outcome = sound();
    const events = log(...outcome.events.slice(0, 7), outcome.events[6]!, ...outcome.events.slice(7));
    expect(rules({ ...outcome, events, hash: { ...outcome.hash!, seq: String(events.length) } })).toContain('fallback-decided-twice');
  });

  it('catch a fallback decided before the deadline', () => {
    const outcome = sound();
    outcome.events[6] = { ...outcome.events[6]!, decidedAt: '2026-11-29T14:09:59.999Z' };
    expect(rules(outcome)).toContain('decided-early');
  });

  it('catch a state change without its log entry', () => {
    const outcome = sound();
    const events = outcome.events.slice(0, -2);
    expect(rules({ ...outcome, events, hash: { ...outcome.hash!, seq: String(events.length) } })).toContain('state-without-entry');
  });

  it('catch a log entry for a send that did not happen', () => {
    const outcome = sound();
    outcome.events[8] = { ...outcome.events[8]!, providerMessageId: 'SM-phantom' };
    expect(rules(outcome)).toContain('entry-without-send');
  });

  it('catch a delivery observed that the provider never made', () => {
    const outcome = sound();
    outcome.events[4] = { ...outcome.events[4]!, status: 'delivered' };
    expect(rules(outcome)).toContain('entry-without-send');
  });

  describe('when an email status is recorded after the email was delivered (a webhook, or a check already running)', () => {
    const delivered = (after: Record<string, unknown>): NoticeOutcome => {
      const events = log(
        { type: 'notice.accepted' },
        { type: 'policy.checked', channel: 'email' },
        { type: 'email.requested', attemptId: 'a1' },
        { type: 'email.accepted', attemptId: 'a1', providerMessageId: 'pm-1' },
        { type: 'email.observed', status: 'delivered', observedAt: DEADLINE, source: 'poll' },
        { type: 'notice.completed', state: 'email_delivered' },
        { type: 'email.observed', status: 'delivered', observedAt: DEADLINE, ...after },
      );
      const deliveredEmail = { ...email, status: 'Delivered', events: [{ type: 'Delivered', at: 0 }] } as unknown as SandboxEmail;
      return {
        ...sound(),
        plan: { ...plan, emailBehaviour: 'delivered', email: 'delivered+n0@example.com' },
        hash: { state: 'email_delivered', seq: String(events.length), emailProviderMessageId: 'pm-1' },
        events,
        emails: [deliveredEmail],
        sms: [],
      };
    };

    it('accept it recorded without `late` (no fallback was decided)', () => {
      expect(rules(delivered({ source: 'webhook', event: 'e1' }))).not.toContain('log-replay');
      expect(rules(delivered({ source: 'poll' }))).not.toContain('log-replay');
    });

    it('catch it marked late', () => {
      expect(rules(delivered({ source: 'webhook', event: 'e1', late: true }))).toContain('log-replay');
      expect(rules(delivered({ source: 'poll', late: true }))).toContain('log-replay');
    });
  });

  it('catch a transition the state machine does not allow', () => {
    const outcome = sound();
    // An SMS requested before any fallback was decided.
    const events = log(...outcome.events.slice(0, 5), outcome.events[7]!, ...outcome.events.slice(5, 7), ...outcome.events.slice(8));
    expect(rules({ ...outcome, events })).toContain('log-replay');
  });

  it('catch a gap in the log', () => {
    const outcome = sound();
    outcome.events.splice(4, 1);
    expect(rules(outcome)).toContain('log-seq');
  });

  it('catch an accepted notice that is gone', () => {
    expect(rules({ ...sound(), hash: null, events: [] })).toEqual(['accepted-notice-lost']);
  });

  it('catch a notice left short of a terminal state', () => {
    const outcome = sound();
    const events = outcome.events.slice(0, 9);
    expect(rules({ ...outcome, events, hash: { ...outcome.hash!, state: 'sms_sent', seq: '9' } })).toContain('not-terminal');
  });

  it('accept sms_sent once the SMS checks ran out (sms.unconfirmed) for a number that never confirms, and only for it', () => {
    const outcome = sound();
    const events = log(...outcome.events.slice(0, 9), { type: 'sms.observed', status: 'pending' }, { type: 'sms.unconfirmed' });
    const unconfirmed = { ...outcome, events, hash: { ...outcome.hash!, state: 'sms_sent', seq: String(events.length) } };
    expect(rules({ ...unconfirmed, plan: { ...plan, smsBehaviour: '05' } })).toEqual([]);
    expect(rules(unconfirmed)).toEqual(['wrong-end']);
  });

  it('accept sms_sending only once the search for its SMS in doubt ended (sms.unconfirmed, sms_send_unconfirmed)', () => {
    expect(settled('sms_sending', log({ type: 'sms.unconfirmed', reason: 'sms_send_unconfirmed' }))).toBe(true);
    expect(settled('sms_sending', log({ type: 'sms.requested' }))).toBe(false);
    expect(settled('sms_sending', log({ type: 'sms.unconfirmed', reason: 'sms_plan_ended' }))).toBe(false);
    expect(settled('sms_pending', log({ type: 'sms.unconfirmed', reason: 'sms_send_unconfirmed' }))).toBe(false);
  });

  it('catch a retired notice whose content was not purged first', () => {
    expect(rules({ ...sound(), retired: true })).toEqual(['retired-without-purge']);
  });

  it('catch a never-delivered email that did not fall back', () => {
    const outcome = sound();
    const events = log(...outcome.events.slice(0, 4), { type: 'notice.completed', state: 'email_delivered' });
    const hash = { state: 'email_delivered', seq: '5', emailProviderMessageId: 'pm-1' };
    expect(rules({ ...outcome, events, hash, sms: [] })).toEqual(expect.arrayContaining(['fallback-missing', 'wrong-end']));
  });

  describe('when a notice ends failed (its content gone)', () => {
    const failedBeforeSend = (stateBefore: string, prefix: Record<string, unknown>[]): NoticeOutcome => {
      const events = log(
        ...prefix,
        { type: 'notice.failed', reason: 'content_unavailable', stateBefore },
        { type: 'notice.completed', state: 'failed' },
      );
      return {
        plan: { ...plan, email: 'delivered@example.com', emailBehaviour: 'delivered' },
        id: ID,
        hash: { state: 'failed', seq: String(events.length) },
        events,
        emails: [],
        sms: [],
      };
    };
    const accepted = [{ type: 'notice.accepted' }, { type: 'policy.checked', channel: 'email' }];

    it('replay it as a terminal state reached from a step that needs the content', () => {
      expect(rules(failedBeforeSend('accepted', accepted))).toEqual([]);
    });

    it('catch a failure from a state where no step needs the content', () => {
      const outcome = failedBeforeSend('email_sent', [
        ...accepted,
        { type: 'email.requested', attemptId: 'a1' },
        { type: 'email.accepted', attemptId: 'a1', providerMessageId: 'pm-1' },
      ]);
      expect(
        rules({ ...outcome, emails: [{ ...email, behaviour: 'delivered' }], hash: { ...outcome.hash!, emailProviderMessageId: 'pm-1' } }),
      ).toContain('log-replay');
    });

    it('catch a failed notice without its notice.failed entry', () => {
      const events = log(...accepted);
      expect(rules({ ...failedBeforeSend('accepted', accepted), events, hash: { state: 'failed', seq: '2' } })).toContain(
        'state-without-entry',
      );
    });

    it('catch a send after it failed', () => {
      const outcome = failedBeforeSend('accepted', accepted);
      const events = log(...outcome.events.map(({ type, ...rest }) => ({ type, ...rest })), { type: 'email.requested', attemptId: 'a9' });
      expect(rules({ ...outcome, events, hash: { state: 'failed', seq: String(events.length) } })).toContain('change-after-terminal');
    });
  });

  it('catch an SMS to a number no accepted notice has', () => {
    expect(checkRun([sound()], [email], [sms, { ...sms, sid: 'SM9', to: '+12995550100' }]).map((v) => v.rule)).toContain(
      'send-without-notice',
    );
  });
});
