/**
 * How the Twilio emulator treats a number, chosen by the last two digits of numbers in the
 * fictional +1 NPA 555-01XX range (any area code, e.g. +12025550103 → `03`). Every other
 * number behaves like `00`. Timelines are fixed at creation, so reads are deterministic.
 */

export type SmsBehaviour = 'delivered' | 'undelivered' | 'failed' | 'opted_out' | 'flaky' | 'stays_sent' | 'slow' | 'hang_status';

const BY_SUFFIX: Record<string, SmsBehaviour> = {
  '00': 'delivered',
  '01': 'undelivered',
  '02': 'failed',
  '03': 'opted_out',
  '04': 'flaky',
  '05': 'stays_sent',
  '06': 'slow',
  '07': 'hang_status',
};

export type TwilioStatus = 'accepted' | 'scheduled' | 'queued' | 'sending' | 'sent' | 'delivered' | 'undelivered' | 'failed' | 'canceled';

/** One status of a message's timeline, from `at` (epoch ms) on. */
export interface StatusStep {
  status: TwilioStatus;
  at: number;
  errorCode?: number;
}

/** Twilio's texts for the error codes the emulator produces. */
export const TWILIO_ERROR_MESSAGES: Record<number, string> = {
  30003: 'Unreachable destination handset',
  30006: 'Landline or unreachable carrier',
};

/** Offsets of the usual progression, in ms after the message leaves the queue's start. */
const SENDING_AFTER = 300;
const SENT_AFTER = 600;
const FINAL_AFTER = 1000;
/** With a Messaging Service a message is `accepted` briefly before `queued`. */
const ACCEPTED_FOR = 100;

/** The behaviour of a destination number. */
export function smsBehaviour(to: string): SmsBehaviour {
  const match = /^\+1\d{3}55501(\d\d)$/.exec(to.trim());
  return (match && BY_SUFFIX[match[1] ?? '']) || 'delivered';
}

/**
 * The status timeline of a new message: `scheduled` until `sendAt` when scheduled, then
 * (`accepted` →) `queued` → `sending` → `sent` → final, per behaviour.
 */
export function plannedSteps(behaviour: SmsBehaviour, opts: { createdAt: number; sendAt?: number; viaService: boolean }): StatusStep[] {
  const steps: StatusStep[] = [];
  let start = opts.createdAt;
  if (opts.sendAt !== undefined) {
    steps.push({ status: 'scheduled', at: opts.createdAt });
    start = opts.sendAt;
  }
  if (opts.viaService) {
    steps.push({ status: 'accepted', at: start });
    start += ACCEPTED_FOR;
  }
  steps.push({ status: 'queued', at: start }, { status: 'sending', at: start + SENDING_AFTER });
  switch (behaviour) {
    case 'failed':
      steps.push({ status: 'failed', at: start + SENT_AFTER, errorCode: 30006 });
      break;
    case 'undelivered':
      steps.push({ status: 'sent', at: start + SENT_AFTER }, { status: 'undelivered', at: start + FINAL_AFTER, errorCode: 30003 });
      break;
    case 'stays_sent':
      steps.push({ status: 'sent', at: start + SENT_AFTER });
      break;
    default:
      steps.push({ status: 'sent', at: start + SENT_AFTER }, { status: 'delivered', at: start + FINAL_AFTER });
  }
  return steps;
}

/** The step in force at `now` (the first step before the message existed). */
export function stepAt(steps: readonly StatusStep[], now: number): StatusStep {
  let current = steps[0];
  if (!current) throw new Error('a message timeline has at least one step');
  for (const step of steps) if (step.at <= now) current = step;
  return current;
}

/** When the message reached `sent`, if it has by `now`: Twilio's `date_sent`, empty while queued. */
export function sentAt(steps: readonly StatusStep[], now: number): number | null {
  const sent = steps.find((s) => s.status === 'sent' && s.at <= now);
  return sent ? sent.at : null;
}
