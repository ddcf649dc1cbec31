/**
 * A notice as the domain sees it: what its Redis hash stores (src/store/notices.ts), with the
 * plans and keys derived from the stored numbers. The store keeps numbers; the rules that turn
 * them into checks and keys are the domain's, here and in the planner.
 */
import type { ChannelRecord, NoticeStore, StoredContentRead, StoredNotice } from '../store/notices.js';
import { layoutChecks, planSmsChecks } from './planner.js';

export interface Notice extends StoredNotice {
  /** The email checks, the deadline last. */
  pollPlan: number[];
  /** The SMS checks after the SMS was accepted; empty before. */
  smsPlan: number[];
  emailChannel: ChannelRecord & { idempotencyKey: string };
}

/** Herald's idempotency key of a notice's email: Postmark's `Metadata.herald_key`, what a send in doubt is looked up by. */
export function emailIdempotencyKey(noticeId: string): string {
  return `${noticeId}-email`;
}

/** Herald's idempotency key of a notice's fallback SMS, recorded with the decision. */
export function smsIdempotencyKey(noticeId: string): string {
  return `${noticeId}-sms`;
}

/** The notice with its plans laid out and its email key derived from what the hash stores. */
export function noticeOf(stored: StoredNotice): Notice {
  return {
    ...stored,
    pollPlan: layoutChecks(stored.createdAt, stored.deadline, stored.pollFirstMs, stored.pollIntervalMs),
    smsPlan:
      stored.smsPlanAt === undefined
        ? []
        : planSmsChecks(stored.smsPlanAt, { minPollIntervalMs: Number(stored.smsPlanFloorMs), maxChecks: Number(stored.smsPlanMax) }),
    emailChannel: { ...stored.emailChannel, idempotencyKey: emailIdempotencyKey(stored.id) },
  };
}

/** Reads a notice from the store; null when Redis does not hold it (never created, or retired). */
export async function readNotice(store: NoticeStore, id: string): Promise<Notice | null> {
  const stored = await store.get(id);
  return stored && noticeOf(stored);
}

/**
 * Reads a notice and, in the same round trip, its stored content (opened only if a step asks for
 * it): a run of the notice's job that sends needs both, and a second round trip costs Redis far
 * more than the few hundred bytes read for nothing by a run that does not.
 */
export async function readNoticeWithContent(
  store: NoticeStore,
  id: string,
): Promise<{ notice: Notice | null; content: StoredContentRead }> {
  const { notice, content } = await store.getWithContent(id);
  return { notice: notice && noticeOf(notice), content };
}
