/**
 * The poll planner: plans status checks from the deadline backwards. The last check
 * is the deadline itself; before it, checks spaced by the minimum interval, and a first check
 * shortly after sending. A plan that breaks the floor or the budget is refused, never bent.
 */
import { DAY } from '../clock.js';

export interface PollPolicy {
  /** Delay of the first status check after acceptance, in seconds. */
  firstCheckAfterSeconds?: number;
  /** Least spacing between two checks, in seconds. */
  minCheckIntervalSeconds?: number;
}

export interface PlanLimits {
  minPollIntervalMs: number;
  maxChecks: number;
}

export type PlanResult =
  { ok: true; checks: number[]; firstCheckAfterMs: number; minCheckIntervalMs: number } | { ok: false; field: string; message: string };

/**
 * How far ahead a deadline, a compliance deadline or a poll-policy delay may reach.
 * Beyond it a request is refused: it bounds every plan, job delay and content expiry Herald
 * derives from those times.
 */
export const MAX_HORIZON_MS = 366 * DAY;
/** No plan is ever laid out with more checks than this (the highest HERALD_MAX_CHECKS_PER_NOTICE). */
export const MAX_LAID_OUT_CHECKS = 1000;

const DEFAULT_FIRST_CHECK_MS = 120_000;
/** Without a policy, about this many checks are spread before the deadline. */
const DEFAULT_SPREAD = 4;

/** Plans the checks for a notice accepted at `now` with `deadline` (both ms). */
export function planChecks(now: number, deadline: number, policy: PollPolicy | undefined, limits: PlanLimits): PlanResult {
  const floor = limits.minPollIntervalMs;
  const span = deadline - now;
  if (span <= 0) return { ok: false, field: 'deadline', message: 'deadline must be in the future' };
  if (span > MAX_HORIZON_MS) return { ok: false, field: 'deadline', message: 'deadline must be at most 366 days ahead' };

  const explicitFirst = policy?.firstCheckAfterSeconds;
  const explicitInterval = policy?.minCheckIntervalSeconds;
  for (const [field, seconds] of [
    ['policy.firstCheckAfterSeconds', explicitFirst],
    ['policy.minCheckIntervalSeconds', explicitInterval],
  ] as const) {
    if (seconds !== undefined && seconds * 1000 < floor) {
      return { ok: false, field, message: `${field} is ${seconds}s, below the poll floor of ${floor / 1000}s` };
    }
    if (seconds !== undefined && !(seconds * 1000 <= MAX_HORIZON_MS)) {
      return { ok: false, field, message: `${field} must be at most ${MAX_HORIZON_MS / 1000}s (366 days)` };
    }
  }

  const first =
    explicitFirst !== undefined ? explicitFirst * 1000 : clamp(Math.floor(span / DEFAULT_SPREAD), floor, DEFAULT_FIRST_CHECK_MS);
  const interval = explicitInterval !== undefined ? explicitInterval * 1000 : Math.max(floor, Math.floor((span - first) / DEFAULT_SPREAD));

  if (first < span && span - first < interval && (explicitFirst !== undefined || explicitInterval !== undefined)) {
    return {
      ok: false,
      field: 'policy',
      message: `the first check (${first / 1000}s) and the deadline check (${span / 1000}s) would be closer than minCheckIntervalSeconds (${interval / 1000}s)`,
    };
  }
  // Counted before it is laid out: a far deadline with a short interval would otherwise build
  // an array of millions of checks only to refuse it (a year-9999 deadline took the process down).
  const needed = countChecks(span, first, interval);
  if (needed > limits.maxChecks) {
    return {
      ok: false,
      field: 'policy.minCheckIntervalSeconds',
      message: `the plan needs ${needed} status checks, more than the budget of ${limits.maxChecks}; widen minCheckIntervalSeconds`,
    };
  }
  return { ok: true, checks: layoutChecks(now, deadline, first, interval), firstCheckAfterMs: first, minCheckIntervalMs: interval };
}

/**
 * The checks of a plan from its two numbers: the first check, then checks every `intervalMs`
 * counted back from the deadline, then the deadline. Without room for two checks, the deadline
 * alone. Notices store only the two numbers and lay the plan out again when read.
 */
export function layoutChecks(start: number, deadline: number, firstMs: number, intervalMs: number): number[] {
  const span = deadline - start;
  const count = countChecks(span, firstMs, intervalMs);
  if (count > MAX_LAID_OUT_CHECKS) throw new RangeError(`a poll plan of ${count} checks is beyond any budget`);
  if (count === 1) return [deadline];
  const between: number[] = [];
  for (let at = deadline - intervalMs; at >= start + firstMs + intervalMs; at -= intervalMs) between.push(at);
  return [start + firstMs, ...between.reverse(), deadline];
}

/** How many checks `layoutChecks` lays out for these numbers, without laying them out. */
export function countChecks(spanMs: number, firstMs: number, intervalMs: number): number {
  if (firstMs >= spanMs || spanMs - firstMs < intervalMs) return 1;
  return 2 + Math.max(0, Math.floor((spanMs - firstMs - 2 * intervalMs) / intervalMs) + 1);
}

/** The SMS status checks after the SMS was accepted: the floor, then doubling, within the budget. */
export function planSmsChecks(acceptedAt: number, limits: PlanLimits): number[] {
  const checks: number[] = [];
  let offset = limits.minPollIntervalMs;
  for (let i = 0; i < Math.min(limits.maxChecks, 8); i += 1) {
    checks.push(acceptedAt + offset);
    offset += limits.minPollIntervalMs * 2 ** (i + 1);
  }
  return checks;
}

/**
 * Until when an SMS in doubt is looked for while the provider cannot tell whether it has it (its
 * search throws: AWS SMS, whose event feed has not shown Herald's key): the attempt's start plus
 * the span of the SMS plan. Had the provider accepted the SMS when the attempt started, its last
 * planned check would come then, and with no final status by then it would end `sms.unconfirmed`
 * (`sms_plan_ended`). An SMS in doubt gets that same time for its first event to reach the feed
 * (events lag the send by seconds to minutes), and ends the same way past it. The content the
 * search needs is kept at least that long (`lastSmsCheckBy`).
 */
export function smsSearchEndsAt(attemptStartedAt: number, limits: PlanLimits): number {
  return attemptStartedAt + (planSmsChecks(0, limits).at(-1) ?? 0);
}

/** The longest an SMS may wait for the end of quiet hours once the fallback is decided (a window is shorter than a day). */
const QUIET_HOURS_MAX_WAIT_MS = DAY;
/** Room for a fallback decided late (a backlog behind the deadline) and for SMS sends retried after provider errors. */
const SMS_SEND_SLACK_MS = 60 * 60_000;

/**
 * The latest time the last planned SMS check of a notice can come: the deadline, the longest
 * wait for quiet hours when the rules have any (never past the compliance deadline), some
 * slack, then the SMS plan. Content is kept until then at least while the notice may still
 * send: the SMS send needs it, and an SMS sent in doubt is looked for by its body. Once nothing
 * more is sent (`notice.completed`, `sms.unconfirmed`), the transition that says so brings the
 * expiry back to HERALD_CONTENT_TTL after creation (src/store/lua/transition-8.lua).
 */
export function lastSmsCheckBy(
  deadline: number,
  complianceDeadline: number | undefined,
  limits: PlanLimits,
  opts: { quietHours: boolean },
): number {
  const longestWait = opts.quietHours ? QUIET_HOURS_MAX_WAIT_MS : 0;
  const waitUntil =
    complianceDeadline === undefined ? deadline + longestWait : Math.min(deadline + longestWait, Math.max(deadline, complianceDeadline));
  return waitUntil + SMS_SEND_SLACK_MS + (planSmsChecks(0, limits).at(-1) ?? 0);
}

/** The first planned check strictly after `now`, or undefined when only the deadline is left. */
export function nextCheckAfter(checks: readonly number[], now: number): number | undefined {
  return checks.find((at) => at > now);
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(value, min), Math.max(min, max));
}
