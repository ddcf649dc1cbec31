import { describe, expect, it } from 'vitest';
import { idempotencyTagValue, noticeOfEmailTag, readSesMessage, readSmsMessage } from '../../src/providers/feed-events.js';
import { loadConfig, ConfigError } from '../../src/config.js';

const NOW = Date.parse('2026-12-01T10:00:00Z');
const TOPIC = 'arn:aws:sns:us-east-1:123456789012:herald-ses-events';
const sns = (message: unknown, topicArn = TOPIC) =>
  JSON.stringify({
    Type: 'Notification',
    MessageId: 'm',
    TopicArn: topicArn,
    Message: JSON.stringify(message),
    Timestamp: '2026-12-01T10:00:00Z',
  });
const mail = { timestamp: '2026-12-01T09:59:00.000Z', messageId: 'ses-1', destination: ['a@example.com'], tags: { herald_key: ['k-1'] } };
const ses = (record: Record<string, unknown>) => readSesMessage(sns({ mail, ...record }), NOW, TOPIC);

describe('SES event records → observations (the README mapping)', () => {
  it.each([
    [
      { eventType: 'Send', send: {} },
      { rank: 1, status: 'pending', providerStatus: 'Send' },
    ],
    [
      { eventType: 'DeliveryDelay', deliveryDelay: { delayType: 'MailboxFull', timestamp: '2026-12-01T09:59:30Z' } },
      { rank: 2, status: 'deferred' },
    ],
    [
      { eventType: 'Delivery', delivery: { timestamp: '2026-12-01T09:59:40Z' } },
      { rank: 5, status: 'delivered', at: Date.parse('2026-12-01T09:59:40Z') },
    ],
    [
      { eventType: 'Bounce', bounce: { bounceType: 'Permanent', bounceSubType: 'General' } },
      { rank: 5, status: 'bounced', suppressed: true },
    ],
    [
      { eventType: 'Bounce', bounce: { bounceType: 'Permanent', bounceSubType: 'OnAccountSuppressionList' } },
      { rank: 5, status: 'failed', suppressed: true },
    ],
    [
      { eventType: 'Bounce', bounce: { bounceType: 'Transient', bounceSubType: 'MailboxFull' } },
      { rank: 2, status: 'deferred' },
    ],
    [
      { eventType: 'Bounce', bounce: { bounceType: 'Undetermined', bounceSubType: 'Undetermined' } },
      { rank: 4, status: 'unknown' },
    ],
    [
      { eventType: 'Reject', reject: { reason: 'Bad content' } },
      { rank: 5, status: 'failed', providerStatus: 'Reject(Bad content)' },
    ],
    [
      { eventType: 'Rendering Failure', failure: {} },
      { rank: 5, status: 'failed' },
    ],
    [
      { eventType: 'Open', open: {} },
      { rank: 0, engagement: 'opened' },
    ],
    [
      { eventType: 'Click', click: {} },
      { rank: 0, engagement: 'clicked' },
    ],
    [
      { eventType: 'Complaint', complaint: { complainedRecipients: [{ emailAddress: 'a@example.com' }] } },
      { rank: 0, engagement: 'complained', suppressed: true },
    ],
  ])('%j', (record, expected) => {
    const read = ses(record);
    expect(read.kind).toBe('event');
    if (read.kind !== 'event') return;
    expect(read.event).toMatchObject({ messageId: 'ses-1', ...expected });
    expect(read.tag).toEqual({ value: 'k-1', sentAt: Date.parse(mail.timestamp) });
  });

  it('opens, clicks and complaints are never delivery, and only permanent bounces and complaints suppress', () => {
    for (const type of ['Open', 'Click', 'Complaint']) {
      const read = ses({ eventType: type });
      expect(read.kind === 'event' && read.event.status).not.toBe('delivered');
    }
    const complaint = ses({
      eventType: 'Complaint',
      complaint: { complainedRecipients: [{ emailAddress: 'a@example.com' }], complaintFeedbackType: 'abuse' },
    });
    expect(complaint).toMatchObject({ suppress: { address: 'a@example.com', source: 'ses_complaint' } });
    expect(ses({ eventType: 'Bounce', bounce: { bounceType: 'Transient' } })).not.toHaveProperty('suppress');
  });

  it('takes only envelopes of the pinned topic: raw delivery, EventBridge and other topics are foreign', () => {
    // Raw message delivery and EventBridge name no topic: nothing could tell whose they are.
    expect(readSesMessage(JSON.stringify({ eventType: 'Send', mail }), NOW, TOPIC)).toMatchObject({ kind: 'foreign', outcome: 'not_sns' });
    expect(readSesMessage(JSON.stringify({ 'detail-type': 'Email Sent', detail: { eventType: 'Send', mail } }), NOW, TOPIC)).toMatchObject({
      kind: 'foreign',
      outcome: 'not_sns',
    });
    const other = 'arn:aws:sns:us-east-1:123456789012:someone-else';
    expect(readSesMessage(sns({ eventType: 'Delivery', mail }, other), NOW, TOPIC)).toMatchObject({
      kind: 'foreign',
      outcome: 'foreign_topic',
      topicArn: other,
    });
    // Another topic's subscription confirmation is foreign too; the pinned topic's is ignored.
    expect(readSesMessage(JSON.stringify({ Type: 'SubscriptionConfirmation', TopicArn: other }), NOW, TOPIC)).toMatchObject({
      kind: 'foreign',
    });
    expect(readSesMessage(JSON.stringify({ Type: 'SubscriptionConfirmation', TopicArn: TOPIC }), NOW, TOPIC)).toMatchObject({
      kind: 'ignored',
    });
  });

  it('says what it cannot read', () => {
    expect(readSesMessage('not json', NOW, TOPIC)).toMatchObject({ kind: 'unreadable' });
    expect(readSesMessage(sns({ eventType: 'Send' }), NOW, TOPIC)).toMatchObject({ kind: 'unreadable' });
    expect(ses({ eventType: 'Subscription' })).toMatchObject({ kind: 'ignored' });
  });

  it('refuses an event past a bound before anything of it is stored', () => {
    const long = `${'a'.repeat(250)}@example.com`;
    expect(ses({ eventType: 'Bounce', bounce: { bounceType: 'Permanent', bouncedRecipients: [{ emailAddress: long }] } })).toMatchObject({
      kind: 'refused',
    });
    expect(ses({ eventType: 'Complaint', complaint: { complainedRecipients: [{ emailAddress: long }] } })).toMatchObject({
      kind: 'refused',
    });
    expect(readSesMessage(sns({ eventType: 'Send', mail: { ...mail, destination: [long] } }), NOW, TOPIC)).toMatchObject({
      kind: 'refused',
    });
    expect(readSesMessage(sns({ eventType: 'Send', mail: { ...mail, messageId: 'x'.repeat(300) } }), NOW, TOPIC)).toMatchObject({
      kind: 'refused',
    });
    expect(readSesMessage(sns({ eventType: 'Send', mail: { ...mail, tags: { herald_key: ['a b'] } } }), NOW, TOPIC)).toMatchObject({
      kind: 'refused',
    });
    // 254 characters is the bound itself; labels are cut, not refused.
    const longest = `${'a'.repeat(242)}@example.com`;
    expect(longest).toHaveLength(254);
    const bounce = ses({
      eventType: 'Bounce',
      bounce: { bounceType: 'Permanent', bounceSubType: 'G'.repeat(500), bouncedRecipients: [{ emailAddress: longest }] },
    });
    expect(bounce).toMatchObject({ kind: 'event', suppress: { address: longest } });
    expect(bounce.kind === 'event' && bounce.event.providerStatus.length).toBeLessThan(100);
  });

  it("names the notice of Herald's key beside the address a bounce names, for the sweep to check", () => {
    const id = `ntc_0a${'01j'.padEnd(26, '0')}`;
    const read = readSesMessage(
      sns({
        eventType: 'Bounce',
        bounce: { bounceType: 'Permanent', bounceSubType: 'General' },
        mail: { ...mail, tags: { herald_key: [`${id}-email`] } },
      }),
      NOW,
      TOPIC,
    );
    expect(read).toMatchObject({ kind: 'event', suppress: { address: 'a@example.com', source: 'ses_hard_bounce', noticeId: id } });
    expect(noticeOfEmailTag('k-1')).toBeUndefined();
    expect(noticeOfEmailTag(`${id}-sms`)).toBeUndefined();
  });

  it('encodes a key SES tags cannot hold', () => {
    expect(idempotencyTagValue('ntc_abc-email')).toBe('ntc_abc-email');
    expect(idempotencyTagValue('a:b')).toMatch(/^sha256_[0-9a-f]{64}$/);
  });
});

describe('End User Messaging SMS events → observations', () => {
  const SMS_TOPIC = 'arn:aws:sns:us-east-1:123456789012:herald-aws-sms-events';
  const smsEvent = (eventType: string, extra: Record<string, unknown> = {}) =>
    readSmsMessage(
      sns(
        {
          eventType,
          messageId: 'sms-1',
          eventTimestamp: NOW - 1000,
          messageRequestTimestamp: NOW - 5000,
          destinationPhoneNumber: '+12025550100',
          context: { herald_key: 'n-sms' },
          ...extra,
        },
        SMS_TOPIC,
      ),
      NOW,
      SMS_TOPIC,
    );
  const sms = (eventType: string) => smsEvent(eventType);
  it.each([
    ['TEXT_QUEUED', 1, 'pending'],
    ['TEXT_PENDING', 2, 'pending'],
    ['TEXT_CARRIER_UNREACHABLE', 2, 'pending'],
    ['TEXT_SUCCESSFUL', 3, 'pending'],
    ['TEXT_UNKNOWN', 4, 'unknown'],
    ['TEXT_DELIVERED', 5, 'delivered'],
    ['TEXT_BLOCKED', 5, 'failed'],
    ['TEXT_SPAM', 5, 'failed'],
    ['TEXT_INVALID', 5, 'failed'],
    ['TEXT_UNREACHABLE', 5, 'failed'],
    ['TEXT_TTL_EXPIRED', 5, 'failed'],
  ])('%s → rank %i, %s', (type, rank, status) => {
    expect(sms(type)).toMatchObject({
      kind: 'event',
      event: { rank, status, providerStatus: type, at: NOW - 1000 },
      tag: { value: 'n-sms', sentAt: NOW - 5000 },
    });
  });
  it('ignores event types it does not know', () => {
    expect(sms('VOICE_ANSWERED')).toMatchObject({ kind: 'ignored' });
  });
  it('takes only its own topic, and refuses a destination that is no E.164 number', () => {
    expect(readSmsMessage(sns({ eventType: 'TEXT_DELIVERED', messageId: 'x' }), NOW, SMS_TOPIC)).toMatchObject({
      kind: 'foreign',
      outcome: 'foreign_topic',
    });
    expect(smsEvent('TEXT_DELIVERED', { destinationPhoneNumber: `+1${'2'.repeat(40)}` })).toMatchObject({ kind: 'refused' });
    expect(smsEvent('TEXT_DELIVERED', { context: { herald_key: 'k'.repeat(300) } })).toMatchObject({ kind: 'refused' });
  });
});

describe('configuration of the feed providers', () => {
  const live = {
    HERALD_PROVIDERS: 'live',
    HERALD_API_KEYS: 'a-key-of-sixteen-chars',
    HERALD_ARCHIVE_URL: 'file:///tmp/x',
    HERALD_ARCHIVE_KEY: `k1:${Buffer.alloc(32, 3).toString('base64')}`,
  };
  const problems = (env: Record<string, string>): string => {
    try {
      loadConfig(env);
      return '';
    } catch (error) {
      if (error instanceof ConfigError) return error.message;
      throw error;
    }
  };
  it('names every variable a live SES / AWS SMS deployment must set, and only for the chosen provider', () => {
    const message = problems({ ...live, HERALD_EMAIL_PROVIDER: 'ses', HERALD_SMS_PROVIDER: 'aws-sms', POSTMARK_SERVER_TOKEN: 'x' });
    for (const name of [
      'AWS_REGION',
      'SES_FROM',
      'SES_CONFIGURATION_SET',
      'SES_EVENTS_QUEUE_URL',
      'SES_EVENTS_TOPIC_ARN',
      'AWS_SMS_ORIGINATION_IDENTITY',
      'AWS_SMS_CONFIGURATION_SET',
      'AWS_SMS_EVENTS_QUEUE_URL',
      'AWS_SMS_EVENTS_TOPIC_ARN',
    ]) {
      expect(message).toContain(name);
    }
    expect(message).not.toContain('POSTMARK_FROM');
    expect(message).not.toContain('TWILIO_AUTH_TOKEN');
  });
  it('takes the region endpoints live, and the service variables before AWS_ENDPOINT_URL', () => {
    const config = loadConfig({
      ...live,
      HERALD_EMAIL_PROVIDER: 'ses',
      HERALD_SMS_PROVIDER: 'aws-sms',
      AWS_REGION: 'eu-west-1',
      SES_FROM: 'h@example.com',
      SES_CONFIGURATION_SET: 'herald',
      SES_EVENTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/1/ses',
      AWS_SMS_ORIGINATION_IDENTITY: '+15555550100',
      AWS_SMS_CONFIGURATION_SET: 'herald',
      AWS_SMS_EVENTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/1/sms',
      SES_EVENTS_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:herald-ses',
      AWS_SMS_EVENTS_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:herald-sms',
      AWS_ENDPOINT_URL_SQS: 'https://proxy.example/sqs',
    });
    expect(config.ses).toMatchObject({ apiUrl: 'https://email.eu-west-1.amazonaws.com', sqsUrl: 'https://proxy.example/sqs' });
    expect(config.awsSms.apiUrl).toBe('https://sms-voice.eu-west-1.amazonaws.com');
    expect(config.aws.credentials).toBeUndefined();
    expect(problems({ ...live, HERALD_EMAIL_PROVIDER: 'ses', AWS_ACCESS_KEY_ID: 'AKIA' })).toContain(
      'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together',
    );
  });
  it("pins each feed to an SNS topic ARN: required live, the emulator's in sandbox mode", () => {
    expect(
      loadConfig({
        ...live,
        HERALD_EMAIL_PROVIDER: 'ses',
        SES_FROM: 'h@example.com',
        SES_CONFIGURATION_SET: 'herald',
        SES_EVENTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/1/ses',
        SES_EVENTS_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:herald-ses',
        AWS_REGION: 'eu-west-1',
        TWILIO_ACCOUNT_SID: 'AC1',
        TWILIO_AUTH_TOKEN: 't',
        TWILIO_FROM: '+15555550100',
      }).ses.eventsTopicArn,
    ).toBe('arn:aws:sns:eu-west-1:123456789012:herald-ses');
    expect(problems({ ...live, HERALD_EMAIL_PROVIDER: 'ses', SES_EVENTS_TOPIC_ARN: 'herald-ses' })).toContain(
      'SES_EVENTS_TOPIC_ARN="herald-ses" must be an SNS topic ARN',
    );
    expect(loadConfig({ HERALD_EMAIL_PROVIDER: 'ses' }).ses.eventsTopicArn).toBeUndefined();
  });
  it('reads HERALD_FEED_ABSENCE_MS, two minutes unless set, at least a second', () => {
    expect(loadConfig({}).ses.feedAbsenceMs).toBe(120_000);
    expect(loadConfig({ HERALD_FEED_ABSENCE_MS: '5000' }).ses.feedAbsenceMs).toBe(5_000);
    expect(problems({ HERALD_FEED_ABSENCE_MS: '10' })).toContain('HERALD_FEED_ABSENCE_MS="10" must be a whole number from 1000');
  });
});
