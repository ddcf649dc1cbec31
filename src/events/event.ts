/**
 * What a caller hears of a notice: the event a decision-log entry makes (`notice.completed`,
 * `fallback.decided`, `notice.failed`), with the notice's outcome and never its content or its
 * addresses. Its ID is the entry's (the notice and its `seq`), so that every retry of a delivery,
 * and a delivery queued twice after a crash, carries the same `webhook-id`.
 */
import type { StoredEntry } from '../notice/entries.js';
import type { StoredNotice } from '../store/notices.js';
import { CALLER_EVENT_TYPES, type CallerEventType } from '../store/event-endpoints.js';

/** The body POSTed to an endpoint (Standard Webhooks: `type`, `timestamp`, `data`). */
export interface CallerEvent {
  type: CallerEventType;
  /** When the entry was written (ISO 8601). */
  timestamp: string;
  data: {
    noticeId: string;
    tenant: string;
    state: string;
    fallbackReason: string | null;
    deadline: string | null;
    decidedAt: string | null;
    completedAt: string | null;
    checks: { email: number; sms: number } | null;
    estimatedCost: { currency: string; total: number; byChannel: { email: number; sms: number } } | null;
    metadata: Record<string, string>;
  };
}

/** True for an entry callers may hear of. */
export function isCallerEvent(entry: { type: string }): entry is StoredEntry & { type: CallerEventType } {
  return (CALLER_EVENT_TYPES as readonly string[]).includes(entry.type);
}

/** The event's ID: stable for the entry, whatever delivers it how often. */
export function callerEventId(entry: Pick<StoredEntry, 'noticeId' | 'seq'>): string {
  return `evt_${entry.noticeId}_${entry.seq}`;
}

/**
 * The event of `entry`, from the entry itself, the notice as Redis holds it (undefined once it
 * has left Redis: the entry's own fields then) and the notice's `notice.accepted` entry (its
 * metadata).
 */
export function callerEvent(
  entry: StoredEntry & { type: CallerEventType },
  notice: StoredNotice | undefined,
  accepted: StoredEntry | undefined,
  tenant: string,
): CallerEvent {
  const fields = entry as unknown as Record<string, unknown>;
  const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
  const deadline = typeof fields.deadline === 'string' ? fields.deadline : iso(notice?.deadline);
  const decidedAt = typeof fields.decidedAt === 'string' ? fields.decidedAt : iso(notice?.fallbackDecidedAt);
  const metadata = (accepted as { metadata?: Record<string, string> } | undefined)?.metadata ?? {};
  const data: CallerEvent['data'] = {
    noticeId: entry.noticeId,
    tenant,
    state: entry.type === 'notice.completed' ? String(fields.state) : entry.type === 'notice.failed' ? 'failed' : 'sms_pending',
    fallbackReason: entry.type === 'fallback.decided' ? String(fields.reason) : (notice?.fallbackReason ?? null),
    deadline,
    decidedAt,
    completedAt: entry.type === 'notice.completed' ? entry.at : null,
    checks:
      (fields.checks as CallerEvent['data']['checks'] | undefined) ??
      (notice ? { email: notice.emailChannel.checksDone, sms: notice.smsChannel.checksDone } : null),
    estimatedCost: (fields.cost as CallerEvent['data']['estimatedCost'] | undefined) ?? null,
    metadata,
  };
  return { type: entry.type, timestamp: entry.at, data };
}
