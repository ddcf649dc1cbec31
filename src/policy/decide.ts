import type { BlockReason, PolicyOutcome } from '../notice/states.js';
import { quietUntil, ruleFor, type Rules } from './rules.js';

export interface SmsPolicyInput {
  phone: string | undefined;
  /** The notice's region, else the recipient policy's. */
  region: string | undefined;
  consentSms: boolean;
  smsSuppressed: boolean;
  rules: Rules | undefined;
  now: number;
  complianceDeadline: number | undefined;
}

export type SmsPolicyDecision =
  | {
      outcome: 'allowed';
      /** The SMS must not leave before this time (quiet hours). */
      sendNotBefore?: number;
      /** The rule that decided when the SMS leaves, when one had a say. */
      timingRule?: 'quiet_hours' | 'compliance_deadline';
      from?: string;
    }
  | { outcome: Exclude<PolicyOutcome, 'allowed'>; block: BlockReason };

/**
 * Whether a decided fallback may use SMS, and when it may leave. The same function decides
 * live and in `herald policy replay`, so a replay is the policy as it runs.
 */
export function decideSms(input: SmsPolicyInput): SmsPolicyDecision {
  if (!input.phone) return { outcome: 'no_address', block: 'no_phone' };
  if (!input.consentSms) return { outcome: 'no_consent', block: 'sms_consent_missing' };
  if (input.smsSuppressed) return { outcome: 'suppressed', block: 'sms_suppressed' };
  const rule = ruleFor(input.rules, input.region);
  if (rule && !rule.sms) return { outcome: 'region_blocked', block: 'region_blocked' };
  const from = rule?.smsFrom;
  const quietEnd = quietUntil(rule, input.now);
  if (quietEnd === undefined) return { outcome: 'allowed', ...(from ? { from } : {}) };
  if (input.complianceDeadline !== undefined && quietEnd > input.complianceDeadline) {
    // Waiting for the window would miss the time by which the person must have been told.
    return { outcome: 'allowed', timingRule: 'compliance_deadline', ...(from ? { from } : {}) };
  }
  return { outcome: 'allowed', sendNotBefore: quietEnd, timingRule: 'quiet_hours', ...(from ? { from } : {}) };
}
