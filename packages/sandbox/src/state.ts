/**
 * The emulators' memory: messages, bounces, the request log, faults and flaky counters.
 * Bounded, because the sandbox can run for days under `npm start`: beyond the limits the
 * oldest entries are dropped.
 */
import { plannedEmailEvents, type EmailEventType, type EmailPlan } from './email-behaviour.js';
import { FaultQueue } from './faults.js';
import { sentAt, stepAt, type SmsBehaviour, type StatusStep } from './sms-behaviour.js';
import type { SandboxEmail, SandboxRequest, SandboxSms } from './types.js';

export interface EmailEvent {
  type: EmailEventType;
  at: number;
  bounceId?: number;
  bounceType?: 'HardBounce' | 'SoftBounce';
}

export interface EmailRecord {
  messageId: string;
  from: string;
  /** The To field as sent. */
  to: string;
  /** The bare addresses of To. */
  recipients: string[];
  subject: string;
  textBody?: string;
  htmlBody?: string;
  tag?: string;
  messageStream: string;
  metadata: Record<string, string>;
  plan: EmailPlan;
  createdAt: number;
  events: EmailEvent[];
}

export interface BounceRecord {
  id: number;
  messageId: string;
  type: 'HardBounce' | 'SoftBounce';
  at: number;
}

export interface SmsRecord {
  sid: string;
  accountSid: string;
  to: string;
  from: string | null;
  messagingServiceSid: string | null;
  body: string;
  behaviour: SmsBehaviour;
  createdAt: number;
  sendAt: number | null;
  steps: StatusStep[];
  /** Creation order, to break ties between messages created in the same millisecond. */
  seq: number;
}

export interface StateLimits {
  maxMessages: number;
  maxRequests: number;
}

export class SandboxState {
  readonly emails = new Map<string, EmailRecord>();
  readonly bounces = new Map<number, BounceRecord>();
  readonly sms = new Map<string, SmsRecord>();
  readonly faults = new FaultQueue();
  /** Send idempotency keys of the providers that have them (Infrai): `<scope>:<key>` → the message created under it. */
  readonly idempotencyKeys = new Map<string, string>();
  private requestLog: SandboxRequest[] = [];
  private attempts = new Map<string, number>();
  private bounceIds = 0;
  private smsSeq = 0;

  constructor(private readonly limits: StateLimits) {}

  /** Stores a new email with its timeline (and the bounces it will have). */
  addEmail(fields: Omit<EmailRecord, 'events'>): EmailRecord {
    const events: EmailEvent[] = plannedEmailEvents(fields.plan).map((planned) => {
      const event: EmailEvent = { type: planned.type, at: fields.createdAt + planned.afterMs };
      if (planned.bounceType) {
        event.bounceId = ++this.bounceIds;
        event.bounceType = planned.bounceType;
        this.bounces.set(event.bounceId, {
          id: event.bounceId,
          messageId: fields.messageId,
          type: planned.bounceType,
          at: event.at,
        });
      }
      return event;
    });
    const record: EmailRecord = { ...fields, events };
    this.emails.set(record.messageId, record);
    while (this.emails.size > this.limits.maxMessages) {
      const oldest = this.emails.values().next().value as EmailRecord;
      this.emails.delete(oldest.messageId);
      for (const event of oldest.events) if (event.bounceId !== undefined) this.bounces.delete(event.bounceId);
    }
    return record;
  }

  addSms(fields: Omit<SmsRecord, 'seq'>): SmsRecord {
    const record: SmsRecord = { ...fields, seq: ++this.smsSeq };
    this.sms.set(record.sid, record);
    while (this.sms.size > this.limits.maxMessages) {
      this.sms.delete(this.sms.keys().next().value as string);
    }
    return record;
  }

  /** Remembers the message a send idempotency key created; the oldest keys are dropped beyond the message limit. */
  rememberIdempotencyKey(scopedKey: string, messageId: string): void {
    this.idempotencyKeys.set(scopedKey, messageId);
    if (this.idempotencyKeys.size > this.limits.maxMessages)
      this.idempotencyKeys.delete(this.idempotencyKeys.keys().next().value as string);
  }

  /** Appends to the request log; the returned entry is updated when the request is answered. */
  logRequest(entry: SandboxRequest): SandboxRequest {
    this.requestLog.push(entry);
    // Trim in batches so that a full log does not cost a copy per request.
    if (this.requestLog.length > this.limits.maxRequests * 1.1) {
      this.requestLog = this.requestLog.slice(-this.limits.maxRequests);
    }
    return entry;
  }

  requests(): SandboxRequest[] {
    return this.requestLog.slice(-this.limits.maxRequests).map((r) => ({ ...r }));
  }

  /** Counts attempts per key (1 for the first): how flaky recipients fail before succeeding. */
  nextAttempt(key: string): number {
    const attempt = (this.attempts.get(key) ?? 0) + 1;
    this.attempts.delete(key);
    this.attempts.set(key, attempt);
    if (this.attempts.size > this.limits.maxMessages) this.attempts.delete(this.attempts.keys().next().value as string);
    return attempt;
  }

  reset(): void {
    this.emails.clear();
    this.bounces.clear();
    this.sms.clear();
    this.faults.clear();
    this.requestLog = [];
    this.attempts.clear();
    this.idempotencyKeys.clear();
  }
}

/** The public view of an email at `now`. */
export function emailView(record: EmailRecord, now: number): SandboxEmail {
  const events = record.events
    .filter((e) => e.at <= now)
    .map((e) => {
      const view: SandboxEmail['events'][number] = { type: e.type, at: e.at };
      if (e.bounceId !== undefined) view.bounceId = e.bounceId;
      if (e.bounceType !== undefined) view.bounceType = e.bounceType;
      return view;
    });
  const view: SandboxEmail = {
    messageId: record.messageId,
    from: record.from,
    to: record.to,
    subject: record.subject,
    messageStream: record.messageStream,
    metadata: { ...record.metadata },
    behaviour: record.plan.behaviour,
    createdAt: record.createdAt,
    status: events.at(-1)?.type ?? 'Sent',
    events,
  };
  if (record.textBody !== undefined) view.textBody = record.textBody;
  if (record.htmlBody !== undefined) view.htmlBody = record.htmlBody;
  if (record.tag !== undefined) view.tag = record.tag;
  return view;
}

/** The public view of an SMS at `now`. */
export function smsView(record: SmsRecord, now: number): SandboxSms {
  const step = stepAt(record.steps, now);
  return {
    sid: record.sid,
    accountSid: record.accountSid,
    to: record.to,
    from: record.from,
    messagingServiceSid: record.messagingServiceSid,
    body: record.body,
    behaviour: record.behaviour,
    createdAt: record.createdAt,
    sendAt: record.sendAt,
    status: step.status,
    statusSince: Math.max(step.at, record.createdAt),
    errorCode: step.errorCode ?? null,
    dateSent: sentAt(record.steps, now),
  };
}
