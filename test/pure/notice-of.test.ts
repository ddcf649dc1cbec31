import { describe, expect, it } from 'vitest';
import { emailIdempotencyKey, noticeOf } from '../../src/notice/notice.js';
import { planChecks, planSmsChecks } from '../../src/notice/planner.js';
import type { ChannelRecord, StoredNotice } from '../../src/store/notices.js';

const S = 1000;
const limits = { minPollIntervalMs: 30 * S, maxChecks: 20 };

const channel = (idempotencyKey?: string): ChannelRecord => ({
  idempotencyKey,
  attemptId: undefined,
  attempts: 0,
  attemptStartedAt: undefined,
  attemptSettled: false,
  attemptInDoubt: false,
  providerMessageId: undefined,
  status: undefined,
  providerStatus: undefined,
  lastObservedAt: undefined,
  nextCheckAt: undefined,
  checksDone: 0,
  provider: undefined,
});

function stored(overrides: Partial<StoredNotice> = {}): StoredNotice {
  return {
    id: 'ntc_03abcdefghijklmnopqrstuvwxyz',
    state: 'email_sent',
    seq: 3,
    category: 'terms_change',
    recipientId: 'p42',
    email: 'p42@example.com',
    phone: '+819012345678',
    region: undefined,
    createdAt: 1_000_000,
    deadline: 1_000_000 + 600 * S,
    policyVersion: 1,
    emailPolicy: 'allowed',
    providerTimeoutMs: 5 * S,
    pollFirstMs: 120 * S,
    pollIntervalMs: 180 * S,
    smsPlanAt: undefined,
    smsPlanFloorMs: undefined,
    smsPlanMax: undefined,
    contentPurgedAt: undefined,
    idempotencyKey: undefined,
    complianceDeadline: undefined,
    fallbackReason: undefined,
    fallbackDecidedAt: undefined,
    smsSendNotBefore: undefined,
    smsFrom: undefined,
    smsSearchEndedAt: undefined,
    smsSegments: 0,
    lateWebhooks: 0,
    tenant: 'default',
    emailChannel: channel(),
    smsChannel: channel(),
    ...overrides,
  };
}

describe('a notice read from its stored numbers (noticeOf)', () => {
  it('lays out the same email checks the planner planned when the notice was accepted', () => {
    const notice = stored();
    const plan = planChecks(notice.createdAt, notice.deadline, { firstCheckAfterSeconds: 120, minCheckIntervalSeconds: 180 }, limits);
    expect(plan.ok).toBe(true);
    if (!plan.ok) return;
    expect(noticeOf(notice).pollPlan).toEqual(plan.checks);
  });

  it('has no SMS checks until the SMS was accepted, then the plan its stored limits give', () => {
    expect(noticeOf(stored()).smsPlan).toEqual([]);
    const accepted = stored({ smsPlanAt: 2_000_000, smsPlanFloorMs: 30 * S, smsPlanMax: 20 });
    expect(noticeOf(accepted).smsPlan).toEqual(planSmsChecks(2_000_000, limits));
  });

  it("derives the email's idempotency key from the notice ID and keeps the SMS key as stored", () => {
    const notice = noticeOf(stored({ smsChannel: channel('ntc_03abcdefghijklmnopqrstuvwxyz-sms') }));
    expect(notice.emailChannel.idempotencyKey).toBe(emailIdempotencyKey(notice.id));
    expect(notice.emailChannel.idempotencyKey).toBe('ntc_03abcdefghijklmnopqrstuvwxyz-email');
    expect(notice.smsChannel.idempotencyKey).toBe('ntc_03abcdefghijklmnopqrstuvwxyz-sms');
  });
});
