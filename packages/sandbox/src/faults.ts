/** Injected faults: validated on the way in, consumed one request at a time. */
import { randomUUID } from 'node:crypto';
import {
  FAULT_MODES,
  FAULT_ROLES,
  OPERATION_ROLES,
  OPERATIONS,
  type ActiveFault,
  type Fault,
  type FaultMode,
  type FaultRole,
  type Operation,
} from './types.js';

/** Checks an untrusted fault description (from the HTTP control API); throws TypeError saying what is wrong. */
export function parseFault(input: unknown): Fault {
  if (typeof input !== 'object' || input === null) throw new TypeError('a fault must be a JSON object');
  const { operation, mode, count, retryAfterSeconds, omitRetryAfter, acceptAfterMs, match } = input as Record<string, unknown>;
  if (!OPERATIONS.includes(operation as Operation) && !FAULT_ROLES.includes(operation as FaultRole)) {
    throw new TypeError(`operation must be one of ${[...OPERATIONS, ...FAULT_ROLES].join(', ')}`);
  }
  if (omitRetryAfter !== undefined && typeof omitRetryAfter !== 'boolean') throw new TypeError('omitRetryAfter must be true or false');
  if (!FAULT_MODES.includes(mode as FaultMode)) throw new TypeError(`mode must be one of ${FAULT_MODES.join(', ')}`);
  if (count !== undefined && !(Number.isInteger(count) && (count as number) >= 1)) {
    throw new TypeError('count must be an integer ≥ 1');
  }
  if (retryAfterSeconds !== undefined && !(Number.isInteger(retryAfterSeconds) && (retryAfterSeconds as number) >= 0)) {
    throw new TypeError('retryAfterSeconds must be an integer ≥ 0');
  }
  if (acceptAfterMs !== undefined && !(Number.isInteger(acceptAfterMs) && (acceptAfterMs as number) >= 0)) {
    throw new TypeError('acceptAfterMs must be an integer ≥ 0');
  }
  if (match !== undefined && (typeof match !== 'string' || match === '')) {
    throw new TypeError('match must be a non-empty string');
  }
  const fault: Fault = { operation: operation as Operation | FaultRole, mode: mode as FaultMode };
  if (omitRetryAfter === true) fault.omitRetryAfter = true;
  if (count !== undefined) fault.count = count as number;
  if (retryAfterSeconds !== undefined) fault.retryAfterSeconds = retryAfterSeconds as number;
  if (acceptAfterMs !== undefined) fault.acceptAfterMs = acceptAfterMs as number;
  if (match !== undefined) fault.match = match as string;
  return fault;
}

/** Faults waiting for requests, applied in the order they were injected. */
export class FaultQueue {
  private active: ActiveFault[] = [];

  add(fault: Fault): ActiveFault {
    const checked = parseFault(fault);
    const active: ActiveFault = {
      id: randomUUID(),
      operation: checked.operation,
      mode: checked.mode,
      remaining: checked.count ?? 1,
      retryAfterSeconds: checked.retryAfterSeconds ?? 1,
      acceptAfterMs: checked.acceptAfterMs ?? 3_000,
    };
    if (checked.match !== undefined) active.match = checked.match;
    if (checked.omitRetryAfter) active.omitRetryAfter = true;
    this.active.push(active);
    return { ...active };
  }

  /** Consumes one use of the first fault for this operation (or its role) whose `match` the recipient contains. */
  take(operation: Operation, recipient: string | undefined): ActiveFault | undefined {
    const role = OPERATION_ROLES[operation];
    const index = this.active.findIndex(
      (f) =>
        (f.operation === operation || (role !== undefined && f.operation === role)) &&
        (f.match === undefined || (recipient ?? '').toLowerCase().includes(f.match.toLowerCase())),
    );
    const fault = this.active[index];
    if (!fault) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.active.splice(index, 1);
    return { ...fault };
  }

  list(): ActiveFault[] {
    return this.active.map((f) => ({ ...f }));
  }

  clear(): void {
    this.active = [];
  }
}
