/**
 * How the Postmark emulator treats an address, chosen by its local part:
 * `<behaviour>[+<delay>][+<label>...]@domain`, e.g. `bounce+500ms@example.com` or
 * `delivered+3s+player42@example.com`. A delay tag is `<N>s` or `<N>ms`; any other tag is a
 * label that only makes the address unique (flaky counters are kept per address). Unknown
 * behaviours are `delivered`. Timelines are fixed at creation, so reads are deterministic.
 */

export const EMAIL_BEHAVIOURS = [
  'delivered',
  'never',
  'bounce',
  'softbounce',
  'deferred',
  'deferred-delivered',
  'opened',
  'flaky',
  'slow',
  'hang-status',
  'timeout',
  'rejected',
  'inactive',
] as const;

export type EmailBehaviour = (typeof EMAIL_BEHAVIOURS)[number];

export const DEFAULT_EMAIL_DELAY_MS = 2000;

export interface EmailPlan {
  behaviour: EmailBehaviour;
  /** When the behaviour's event happens, after creation. */
  delayMs: number;
}

export type EmailEventType = 'Delivered' | 'Bounced' | 'Transient' | 'Opened' | 'LinkClicked';

/** An event of a message's timeline, `afterMs` after creation. */
export interface PlannedEmailEvent {
  type: EmailEventType;
  afterMs: number;
  bounceType?: 'HardBounce' | 'SoftBounce';
}

/** Reads the behaviour and delay from an address (`Name <addr>` forms accepted). */
export function planEmail(address: string): EmailPlan {
  const bare = emailAddress(address).toLowerCase();
  const at = bare.lastIndexOf('@');
  const [name = '', ...tags] = (at >= 0 ? bare.slice(0, at) : bare).split('+');
  let delayMs = DEFAULT_EMAIL_DELAY_MS;
  for (const tag of tags) {
    const delay = /^(\d+)(ms|s)$/.exec(tag);
    if (delay) delayMs = Number(delay[1]) * (delay[2] === 's' ? 1000 : 1);
  }
  const behaviour = (EMAIL_BEHAVIOURS as readonly string[]).includes(name) ? (name as EmailBehaviour) : 'delivered';
  return { behaviour, delayMs };
}

/** The events a message will have, relative to its creation. */
export function plannedEmailEvents(plan: EmailPlan): PlannedEmailEvent[] {
  const d = plan.delayMs;
  switch (plan.behaviour) {
    case 'delivered':
    case 'flaky':
    case 'slow':
      return [{ type: 'Delivered', afterMs: d }];
    case 'bounce':
      return [{ type: 'Bounced', afterMs: d, bounceType: 'HardBounce' }];
    case 'softbounce':
      return [{ type: 'Bounced', afterMs: d, bounceType: 'SoftBounce' }];
    case 'deferred':
      return [{ type: 'Transient', afterMs: d }];
    case 'deferred-delivered':
      return [
        { type: 'Transient', afterMs: d },
        { type: 'Delivered', afterMs: 2 * d },
      ];
    case 'opened':
      return [
        { type: 'Opened', afterMs: d },
        { type: 'LinkClicked', afterMs: 2 * d },
      ];
    case 'never':
    case 'hang-status':
    case 'timeout':
    case 'rejected':
    case 'inactive':
      return [];
  }
}

/** True when status reads (details, bounce) about this message never get an answer. */
export function statusHangs(behaviour: EmailBehaviour): boolean {
  return behaviour === 'hang-status' || behaviour === 'timeout';
}

/** The bare address of `Name <addr>` or `addr`. */
export function emailAddress(value: string): string {
  const angle = /<([^>]*)>/.exec(value);
  return (angle?.[1] ?? value).trim();
}
