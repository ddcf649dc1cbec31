/**
 * The chaos plan: which notices are created when, with which sandbox behaviours, and which
 * faults happen when. It is a pure function of the seed and the shape, so a seed replays the
 * same inputs and the same fault schedule (the interleaving of processes is the OS's own).
 */
import type { Fault, FaultMode, Operation, WebhookFaultRates } from '@herald/sandbox';
import { Random } from './random.js';

export interface ChaosShape {
  notices: number;
  /** Notices are created during the first this-many ms. */
  creationWindowMs: number;
  /** Faults happen during the first this-many ms; then they stop. */
  faultWindowMs: number;
  /**
   * Also SMS behaviours whose delivery is never confirmed (`05` stays sent, `07` status reads
   * hang): such a notice ends `sms_sent` with `sms.unconfirmed` once its SMS plan runs out,
   * some 50 s after its SMS left, so only the full run has them.
   */
  unconfirmedSms?: boolean;
  /**
   * The email provider the workers use (HERALD_EMAIL_PROVIDER): `postmark` (the default) reads
   * status per message; `ses` reads it from its event feed (SQS), whose operations then take
   * the email faults.
   */
  emailProvider?: 'postmark' | 'ses';
  /**
   * Provider webhooks on (Postmark and Twilio push to the web), the sandbox's outbox losing,
   * repeating and reordering them at these rates: polling must still end every notice right.
   */
  webhookFaults?: WebhookFaultRates;
  workers: number;
  sigkills: number;
  sigterms: number;
  redisRestarts: number;
  providerFaults: number;
  duplicateJobs: number;
}

/**
 * Email behaviours of the mix, by weight (docs/SANDBOX.md). Every one of them ends; the SMS
 * behaviours whose delivery is never confirmed join the SMS mix when the shape asks for them.
 */
const EMAIL_MIX = [
  ['delivered', 30],
  ['never', 18],
  ['bounce', 8],
  ['softbounce', 5],
  ['deferred', 5],
  ['opened', 5],
  ['flaky', 7],
  ['slow', 5],
  ['hang-status', 5],
  ['rejected', 6],
  ['inactive', 6],
] as const;

/** Email behaviours whose message is never delivered: such a notice must fall back. */
export const NEVER_DELIVERED = new Set(['never', 'bounce', 'softbounce', 'deferred', 'opened', 'hang-status', 'rejected', 'inactive']);

const SMS_MIX = [
  ['00', 40],
  ['01', 10],
  ['02', 10],
  ['03', 10],
  ['04', 12],
  ['06', 10],
  [null, 8],
] as const;

/** The SMS mix with the behaviours whose delivery is never confirmed. */
const SMS_MIX_UNCONFIRMED = [...SMS_MIX, ['05', 6], ['07', 6]] as const;

/** SMS behaviours whose delivery the emulator never confirms: the notice ends `sms_sent` with `sms.unconfirmed`. */
export const SMS_UNCONFIRMED = new Set(['05', '07']);

/** SMS behaviours the emulator refuses at creation: nothing is sent. */
export const SMS_REFUSED = new Set(['03']);

export interface NoticePlan {
  index: number;
  /** When it is created, in ms from the start of the run. */
  createAt: number;
  recipientId: string;
  email: string;
  emailBehaviour: string;
  phone: string | undefined;
  smsBehaviour: string | undefined;
  deadlineInSeconds: number;
  /** Ask to cancel it right after it is accepted. */
  cancel: boolean;
  /** Withdraw the recipient's SMS consent right after it is accepted. */
  withdrawSmsConsent: boolean;
}

export type DuplicateQueue = 'emailSend' | 'emailPoll' | 'deadline' | 'smsSend' | 'smsPoll';

export type ChaosEvent =
  | { at: number; kind: 'sigkill'; worker: number; downMs: number }
  | { at: number; kind: 'sigterm'; worker: number; downMs: number }
  | { at: number; kind: 'redis-restart'; downMs: number }
  | { at: number; kind: 'provider-fault'; fault: Fault }
  | { at: number; kind: 'duplicate-job'; notice: number; queue: DuplicateQueue; delayMs: number; sameId: boolean };

export interface ChaosPlan {
  seed: number;
  shape: ChaosShape;
  notices: NoticePlan[];
  /** Ordered by time. */
  events: ChaosEvent[];
}

const EMAIL_OPERATIONS: readonly Operation[] = ['postmark.send', 'postmark.details', 'postmark.search', 'postmark.bounce'];
/** SES: its send, and the events queue its status comes from. */
const SES_OPERATIONS: readonly Operation[] = ['ses.send', 'ses.send', 'sqs.receive', 'sqs.delete'];
const SMS_OPERATIONS: readonly Operation[] = ['twilio.create', 'twilio.fetch', 'twilio.list'];
const FAULT_MODES = [
  ['status_500', 3],
  ['status_503', 2],
  ['status_429', 3],
  ['hang', 3],
  ['accept_then_hang', 2],
  ['accept_then_drop', 2],
] as const satisfies readonly (readonly [FaultMode, number])[];

/** Builds the plan of a run from its seed. */
export function makePlan(seed: number, shape: ChaosShape): ChaosPlan {
  const random = new Random(seed);
  const tag = seed.toString(36);
  if (shape.notices > 700) throw new Error('at most 700 notices: each gets its own fictional area code');

  const notices: NoticePlan[] = [];
  for (let index = 0; index < shape.notices; index += 1) {
    const emailBehaviour = random.weighted(EMAIL_MIX);
    const delay =
      emailBehaviour === 'delivered'
        ? `+${random.int(2, 30) * 100}ms`
        : emailBehaviour === 'bounce' || emailBehaviour === 'softbounce'
          ? `+${random.int(2, 15) * 100}ms`
          : '';
    const smsBehaviour = random.weighted(shape.unconfirmedSms ? SMS_MIX_UNCONFIRMED : SMS_MIX) ?? undefined;
    notices.push({
      index,
      createAt: Math.floor((index / shape.notices) * shape.creationWindowMs) + random.int(0, 200),
      recipientId: `chaos-${tag}-${index}`,
      // The label makes each address its own: flaky counters and fault matches are per address.
      email: `${emailBehaviour}${delay}+n${index}x${tag}@example.com`,
      emailBehaviour,
      phone: smsBehaviour === undefined ? undefined : `+1${201 + index}55501${smsBehaviour}`,
      smsBehaviour,
      deadlineInSeconds: random.int(2, 8),
      cancel: random.chance(0.05),
      withdrawSmsConsent: random.chance(0.05),
    });
  }

  const window = shape.faultWindowMs;
  const events: ChaosEvent[] = [];
  const restarts: { from: number; to: number }[] = [];
  for (let i = 0; i < shape.redisRestarts; i += 1) {
    // Spread over the middle of the window, one slot each, so that restarts never overlap.
    const slot = (window * 0.5) / shape.redisRestarts;
    const at = Math.floor(window * 0.25 + slot * i + random.next() * slot * 0.5);
    const downMs = random.int(800, 2000);
    restarts.push({ from: at, to: at + downMs });
    events.push({ at, kind: 'redis-restart', downMs });
  }
  for (let i = 0; i < shape.sigkills; i += 1) {
    events.push({
      at: random.int(500, window - 1000),
      kind: 'sigkill',
      worker: random.int(0, shape.workers - 1),
      downMs: random.int(200, 1500),
    });
  }
  for (let i = 0; i < shape.sigterms; i += 1) {
    // A graceful shutdown is judged by its exit code, which needs Redis up while it closes.
    let at = 0;
    for (let tries = 0; tries < 100; tries += 1) {
      at = random.int(1000, window - 1000);
      if (restarts.every((r) => at < r.from - 5000 || at > r.to + 3000)) break;
    }
    events.push({ at, kind: 'sigterm', worker: random.int(0, shape.workers - 1), downMs: random.int(200, 1200) });
  }
  for (let i = 0; i < shape.providerFaults; i += 1) {
    const sms = random.chance(0.45);
    const operation = random.pick(sms ? SMS_OPERATIONS : shape.emailProvider === 'ses' ? SES_OPERATIONS : EMAIL_OPERATIONS);
    const mode = random.weighted(FAULT_MODES);
    const fault: Fault = { operation, mode, count: random.int(1, 3) };
    if (mode === 'status_429') fault.retryAfterSeconds = random.int(0, 2);
    // A queue's requests are about no one recipient: its faults hit whatever the sweep reads.
    if (random.chance(0.5) && !operation.startsWith('sqs.')) {
      const target = random.pick(notices);
      fault.match = sms ? (target.phone ?? target.email) : target.email;
    }
    events.push({ at: random.int(200, window - 500), kind: 'provider-fault', fault });
  }
  const queues: readonly DuplicateQueue[] = ['emailSend', 'emailPoll', 'deadline', 'smsSend', 'smsPoll'];
  for (let i = 0; i < shape.duplicateJobs; i += 1) {
    const at = random.int(500, window - 500);
    const created = notices.filter((n) => n.createAt < at);
    if (created.length === 0) continue;
    events.push({
      at,
      kind: 'duplicate-job',
      notice: random.pick(created).index,
      queue: random.pick(queues),
      delayMs: random.int(0, 3000),
      sameId: random.chance(0.3),
    });
  }
  events.sort((a, b) => a.at - b.at);
  return { seed, shape, notices, events };
}
