import { iso } from '../clock.js';
import type { Notice } from './notice.js';

const time = (ms: number | undefined) => (ms === undefined ? null : iso(ms));

/** The public view of a notice (`GET /v1/notices/:id`). */
export type NoticeView = ReturnType<typeof noticeView>;

export function noticeView(notice: Notice) {
  const email = notice.emailChannel;
  const sms = notice.smsChannel;
  return {
    id: notice.id,
    tenant: notice.tenant,
    state: notice.state,
    category: notice.category,
    recipientId: notice.recipientId,
    createdAt: iso(notice.createdAt),
    deadline: iso(notice.deadline),
    policyVersion: notice.policyVersion,
    plannedChecks: notice.pollPlan.map(iso),
    email: {
      status: email.status ?? null,
      providerMessageId: email.providerMessageId ?? null,
      lastObservedAt: time(email.lastObservedAt),
      nextCheckAt: time(email.nextCheckAt),
    },
    fallback: notice.fallbackReason === undefined ? null : { reason: notice.fallbackReason, decidedAt: time(notice.fallbackDecidedAt) },
    sms:
      notice.fallbackReason === undefined || notice.state === 'blocked'
        ? null
        : { status: sms.status ?? null, providerMessageId: sms.providerMessageId ?? null },
  };
}
