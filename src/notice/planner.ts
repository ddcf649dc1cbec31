/**
 * The poll planner (SPEC §2): plans status checks from the deadline backwards. The last check
 * is the deadline itself; before it, checks spaced by the minimum interval, and a first check
 * shortly after sending. A plan that breaks the floor or the budget is refused, never bent.
 */

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

const DEFAULT_FIRST_CHECK_MS = 120_000;
/** Without a policy, about this many checks are spread before the deadline. */
const DEFAULT_SPREAD = 4;

/** Plans the checks for a notice accepted at `now` with `deadline` (both ms). */
export function planChecks(now: number, deadline: number, policy: PollPolicy | undefined, limits: PlanLimits): PlanResult {
  const floor = limits.minPollIntervalMs;
  const span = deadline - now;
  if (span <= 0) return { ok: false, field: 'deadline', message: 'deadline must be in the future' };

  const explicitFirst = policy?.firstCheckAfterSeconds;
  const explicitInterval = policy?.minCheckIntervalSeconds;
  for (const [field, seconds] of [
    ['policy.firstCheckAfterSeconds', explicitFirst],
    ['policy.minCheckIntervalSeconds', explicitInterval],
  ] as const) {
    if (seconds !== undefined && seconds * 1000 < floor) {
      return { ok: false, field, message: `${field} is ${seconds}s, below the poll floor of ${floor / 1000}s` };
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
  const checks = layoutChecks(now, deadline, first, interval);

  if (checks.length > limits.maxChecks) {
    return {
      ok: false,
      field: 'policy.minCheckIntervalSeconds',
      message: `the plan needs ${checks.length} status checks, more than the budget of ${limits.maxChecks}; widen minCheckIntervalSeconds`,
    };
  }
  return { ok: true, checks, firstCheckAfterMs: first, minCheckIntervalMs: interval };
}

/**
 * The checks of a plan from its two numbers: the first check, then checks every `intervalMs`
 * counted back from the deadline, then the deadline. Without room for two checks, the deadline
 * alone. Notices store only the two numbers and lay the plan out again when read.
 */
export function layoutChecks(start: number, deadline: number, firstMs: number, intervalMs: number): number[] {
  const span = deadline - start;
  if (firstMs >= span || span - firstMs < intervalMs) return [deadline];
  const between: number[] = [];
  for (let at = deadline - intervalMs; at >= start + firstMs + intervalMs; at -= intervalMs) between.push(at);
  return [start + firstMs, ...between.reverse(), deadline];
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

/** The first planned check strictly after `now`, or undefined when only the deadline is left. */
export function nextCheckAfter(checks: readonly number[], now: number): number | undefined {
  return checks.find((at) => at > now);
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(value, min), Math.max(min, max));
}
