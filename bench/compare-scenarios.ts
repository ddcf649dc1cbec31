/**
 * The comparison's scenarios and how each run of one is judged. A scenario is written once for
 * every provider: the emulator's behaviour comes from the shared sandbox model only (the
 * behaviour an address or a number chooses, and faults injected by channel role), never from
 * anything provider-specific. A verdict is computed from what the run left behind: the notice's
 * final view and decision log, the messages the emulators hold, and the requests they saw.
 */
import type { Fault, FaultRole, SandboxEmail, SandboxRequest, SandboxSms } from '@herald/sandbox';

export type Row = 'email' | 'sms';

/** One log entry as `GET /v1/notices/{id}/events` returns it. */
export interface Entry {
  type: string;
  at: string;
  [field: string]: unknown;
}

export interface Scenario {
  key: string;
  title: string;
  /** The provider rows it runs on: email providers, SMS providers, or both. */
  rows: readonly Row[];
  /** The address's behaviour and delay (`<behaviour>[+<delay>]`), per row. */
  email(row: Row): string;
  /** The last two digits of the number (its SMS behaviour), per row. */
  phoneSuffix(row: Row): string;
  deadlineSeconds(row: Row): number;
  /** A fault on the send of the row's channel, injected for this notice's address or number. */
  fault?: (row: Row) => Omit<Fault, 'operation' | 'match'> & { role: FaultRole };
  /** What a correct run ends with, per row. */
  expect(row: Row): Expected;
}

export interface Expected {
  /** Final states that are correct. */
  states: readonly string[];
  fallback?: string;
  /** The fallback must be decided before the deadline (an early signal) or at/after it. */
  decided?: 'before_deadline' | 'at_or_after_deadline';
  /** Messages the provider may hold for the notice; more is a duplicate. */
  emails: number;
  sms: number;
  /** The number must end on the SMS suppression list. */
  smsSuppressed?: boolean;
  /** A send in doubt may instead stay in doubt and leave the decision to the deadline. */
  inDoubt?: boolean;
}

/** What one scenario run left behind. */
export interface RunFacts {
  row: Row;
  scenario: Scenario;
  email: string;
  phone: string;
  createdAt: number;
  deadline: number;
  /** Null when the notice never reached an expected or terminal state in time. */
  state: string;
  fallback: { reason?: string; decidedAt?: string } | null;
  events: Entry[];
  emails: SandboxEmail[];
  sms: SandboxSms[];
  /** Requests about this notice's address or number. */
  requests: SandboxRequest[];
  /** Whether the injected fault was used; undefined without a fault. */
  faultApplied: boolean | undefined;
  smsSuppressed: boolean;
}

export interface Verdict {
  correct: boolean;
  /** Why it is not correct, or what is worth saying about a correct run. */
  notes: string[];
  /** Delivery at the emulator → Herald's observation of it, when this run shows one. */
  learnedAfterMs?: number;
  /** For sends in doubt: found by the provider (true), or left to the deadline (false). */
  resolved?: boolean;
  /** What this run shows the provider could not tell Herald. */
  cannotTell: string[];
}

const ofType = (events: readonly Entry[], type: string) => events.filter((e) => e.type === type);
const at = (value: unknown) => Date.parse(String(value));

/** Judges one run against its scenario's expectation. */
export function judge(facts: RunFacts): Verdict {
  const expected = facts.scenario.expect(facts.row);
  const notes: string[] = [];
  const cannotTell: string[] = [];
  if (facts.faultApplied === false) notes.push('the injected send fault never applied (no send role for this emulator in the sandbox)');
  if (!expected.states.includes(facts.state) && !(expected.inDoubt && stayedInDoubt(facts))) {
    notes.push(`ended ${facts.state}, expected ${expected.states.join(' or ')}`);
  }
  if (!expected.states.includes(facts.state) && expected.inDoubt && stayedInDoubt(facts)) {
    // Correct by the rule (never sent again blindly), and a limit of the provider's worth showing.
    cannotTell.push('whether a send it answered with an error reached it');
  }
  if (facts.emails.length > expected.emails) notes.push(`${facts.emails.length} emails at the provider (duplicate)`);
  if (facts.sms.length > expected.sms) notes.push(`${facts.sms.length} SMS at the provider (duplicate)`);
  if (expected.fallback !== undefined && facts.state !== 'email_delivered') {
    if (facts.fallback?.reason !== expected.fallback && !(expected.inDoubt && facts.fallback?.reason === 'email_deadline_elapsed')) {
      notes.push(`fallback ${facts.fallback?.reason ?? 'none'}, expected ${expected.fallback}`);
    }
    const decidedAt = at(facts.fallback?.decidedAt);
    if (expected.decided === 'before_deadline' && !(decidedAt < facts.deadline)) notes.push('fallback not decided before the deadline');
    if (expected.decided === 'at_or_after_deadline' && !(decidedAt >= facts.deadline)) notes.push('fallback decided before the deadline');
  }
  if (expected.fallback === undefined && facts.fallback?.reason !== undefined && !expected.inDoubt) {
    notes.push(`fell back (${facts.fallback.reason}) though nothing called for it`);
  }
  if (expected.smsSuppressed && !facts.smsSuppressed) {
    notes.push('the number was not suppressed');
    cannotTell.push('opt-outs');
  }

  const verdict: Verdict = { correct: notes.length === 0, notes, cannotTell };
  const observed = [...ofType(facts.events, 'email.observed'), ...ofType(facts.events, 'sms.observed')];

  // How soon Herald learned of a delivery the emulator made.
  const channel = facts.row === 'email' && facts.scenario.key !== 'opted_out' ? 'email' : 'sms';
  const deliveredAt =
    channel === 'email'
      ? facts.emails.flatMap((m) => m.events.filter((e) => e.type === 'Delivered').map((e) => e.at))[0]
      : facts.sms.find((m) => m.status === 'delivered')?.statusSince;
  const learned = ofType(facts.events, `${channel}.observed`).find((e) => e.status === 'delivered');
  if (deliveredAt !== undefined && learned) verdict.learnedAfterMs = Math.max(0, at(learned.at) - deliveredAt);
  if (deliveredAt !== undefined && !learned && ['delivered', 'deferred', 'never'].includes(facts.scenario.key)) {
    cannotTell.push(`${channel} delivery`);
  }

  switch (facts.scenario.key) {
    case 'opened':
      if (!observed.some((e) => Array.isArray(e.engagement) && e.engagement.includes('opened'))) cannotTell.push('opens');
      if (observed.some((e) => e.type === 'email.observed' && e.status === 'delivered')) notes.push('an open counted as delivery');
      break;
    case 'deferred':
      if (!observed.some((e) => e.type === 'email.observed' && e.status === 'deferred')) cannotTell.push('deferrals');
      break;
    case 'bounce':
      if (!observed.some((e) => e.type === 'email.observed' && e.status === 'bounced')) cannotTell.push('bounces');
      break;
    case 'in_doubt': {
      const accepted = ofType(facts.events, `${facts.row}.accepted`);
      verdict.resolved = accepted.some((e) => e.resolvedBy === 'provider_search');
      if (!verdict.resolved) cannotTell.push('whether a send in doubt arrived');
      break;
    }
    case 'rate_limited_retry_after': {
      const limited = ofType(facts.events, 'provider.error').find((e) => e.kind === 'rate_limited');
      if (!limited) notes.push('no rate_limited provider.error recorded');
      else if (limited.retryAfterMs === undefined) cannotTell.push('Retry-After');
      break;
    }
    case 'rate_limited_bare': {
      const limited = ofType(facts.events, 'provider.error').find((e) => e.kind === 'rate_limited');
      if (!limited) notes.push('no rate_limited provider.error recorded');
      break;
    }
    default:
      break;
  }
  verdict.correct = notes.length === 0;
  return verdict;
}

/** A send in doubt the provider could not resolve: still in doubt, or decided by the deadline. */
function stayedInDoubt(facts: RunFacts): boolean {
  const accepted = ofType(facts.events, `${facts.row}.accepted`).length > 0;
  if (facts.row === 'sms') return !accepted && facts.sms.length <= 1;
  return facts.fallback?.reason === 'email_deadline_elapsed' && ['sms_delivered', 'sms_sent'].includes(facts.state);
}

const both: readonly Row[] = ['email', 'sms'];
const emailOnly: readonly Row[] = ['email'];
const smsOnly: readonly Row[] = ['sms'];
/** The email row's notices fall back through the default SMS provider; the SMS row's emails are never delivered. */
const quietEmail = (row: Row, behaviour: string) => (row === 'email' ? behaviour : 'never');

export const SCENARIOS: readonly Scenario[] = [
  {
    key: 'delivered',
    title: 'delivered',
    rows: emailOnly,
    email: () => 'delivered+500ms',
    phoneSuffix: () => '00',
    deadlineSeconds: () => 10,
    expect: () => ({ states: ['email_delivered'], emails: 1, sms: 0 }),
  },
  {
    key: 'never',
    title: 'never delivered',
    rows: both,
    email: () => 'never',
    phoneSuffix: () => '00',
    deadlineSeconds: () => 4,
    expect: () => ({ states: ['sms_delivered'], fallback: 'email_deadline_elapsed', decided: 'at_or_after_deadline', emails: 1, sms: 1 }),
  },
  {
    key: 'bounce',
    title: 'hard bounce',
    rows: emailOnly,
    email: () => 'bounce+500ms',
    phoneSuffix: () => '00',
    deadlineSeconds: () => 10,
    expect: () => ({ states: ['sms_delivered'], fallback: 'email_bounced', decided: 'before_deadline', emails: 1, sms: 1 }),
  },
  {
    key: 'opened',
    title: 'opened only',
    rows: emailOnly,
    email: () => 'opened+300ms',
    phoneSuffix: () => '00',
    deadlineSeconds: () => 4,
    expect: () => ({ states: ['sms_delivered'], fallback: 'email_deadline_elapsed', decided: 'at_or_after_deadline', emails: 1, sms: 1 }),
  },
  {
    key: 'deferred',
    title: 'deferred, then delivered',
    rows: emailOnly,
    email: () => 'deferred-delivered+1500ms',
    phoneSuffix: () => '00',
    deadlineSeconds: () => 10,
    expect: () => ({ states: ['email_delivered'], emails: 1, sms: 0 }),
  },
  {
    key: 'flaky',
    title: 'flaky send (500, 429, then accepted)',
    rows: both,
    email: (row) => quietEmail(row, 'flaky+300ms'),
    phoneSuffix: (row) => (row === 'sms' ? '04' : '00'),
    deadlineSeconds: (row) => (row === 'email' ? 12 : 4),
    // A 500 on a send is a send in doubt: a provider that can say the message is not there sends
    // again; one that cannot (an event feed) leaves it in doubt, and the deadline decides.
    expect: (row) =>
      row === 'email'
        ? { states: ['email_delivered'], emails: 1, sms: 1, inDoubt: true }
        : { states: ['sms_delivered'], fallback: 'email_deadline_elapsed', emails: 1, sms: 1, inDoubt: true },
  },
  {
    key: 'in_doubt',
    title: 'send in doubt (accepted, answer lost)',
    rows: both,
    email: (row) => quietEmail(row, 'delivered+300ms'),
    phoneSuffix: () => '00',
    deadlineSeconds: (row) => (row === 'email' ? 12 : 4),
    fault: (row) => ({ role: row === 'email' ? 'email.send' : 'sms.send', mode: 'accept_then_hang' }),
    expect: (row) =>
      row === 'email'
        ? { states: ['email_delivered'], emails: 1, sms: 1, inDoubt: true }
        : { states: ['sms_delivered'], fallback: 'email_deadline_elapsed', emails: 1, sms: 1, inDoubt: true },
  },
  {
    key: 'rate_limited_retry_after',
    title: '429 with Retry-After (2 s)',
    rows: both,
    email: (row) => quietEmail(row, 'delivered+300ms'),
    phoneSuffix: () => '00',
    deadlineSeconds: (row) => (row === 'email' ? 12 : 4),
    fault: (row) => ({ role: row === 'email' ? 'email.send' : 'sms.send', mode: 'status_429', retryAfterSeconds: 2 }),
    expect: (row) =>
      row === 'email'
        ? { states: ['email_delivered'], emails: 1, sms: 0 }
        : { states: ['sms_delivered'], fallback: 'email_deadline_elapsed', emails: 1, sms: 1 },
  },
  {
    key: 'rate_limited_bare',
    title: '429 without Retry-After',
    rows: both,
    email: (row) => quietEmail(row, 'delivered+300ms'),
    phoneSuffix: () => '00',
    deadlineSeconds: (row) => (row === 'email' ? 12 : 4),
    fault: (row) => ({ role: row === 'email' ? 'email.send' : 'sms.send', mode: 'status_429', omitRetryAfter: true }),
    expect: (row) =>
      row === 'email'
        ? { states: ['email_delivered'], emails: 1, sms: 0 }
        : { states: ['sms_delivered'], fallback: 'email_deadline_elapsed', emails: 1, sms: 1 },
  },
  {
    key: 'opted_out',
    title: 'opted-out SMS number',
    rows: smsOnly,
    email: () => 'never',
    phoneSuffix: () => '03',
    deadlineSeconds: () => 4,
    expect: () => ({ states: ['sms_failed'], fallback: 'email_deadline_elapsed', emails: 1, sms: 0, smsSuppressed: true }),
  },
];
