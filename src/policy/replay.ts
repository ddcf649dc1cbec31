import { iso } from '../clock.js';
import type { StoredEntry } from '../store/notices.js';
import type { RecipientPolicy } from '../store/policies.js';
import { decideSms, type SmsPolicyDecision } from './decide.js';
import type { Rules } from './rules.js';

/** What the log says about one fallback decision: the inputs it had and what it decided. */
export interface RecordedDecision {
  noticeId: string;
  recipientId: string;
  hasPhone: boolean;
  complianceDeadline: number | undefined;
  decidedAt: number;
  region: string | undefined;
  policyVersion: number;
  rulesVersion: string | null;
  outcome: string;
  smsSuppressed: boolean;
  sendNotBefore: number | undefined;
  timingRule: string | undefined;
}

export interface ReplayChange {
  noticeId: string;
  recipientId: string;
  decidedAt: string;
  before: Summary;
  after: Summary;
  why: string;
}

export interface ReplayReport {
  rulesVersion: string;
  /** Decisions replayed. */
  examined: number;
  changed: ReplayChange[];
  /**
   * Decisions not replayed: the recipient policy version they used is no longer kept
   * (HERALD_POLICY_VERSIONS_KEPT). A replay against today's policies (`--current-policies`) takes them.
   */
  policyVersionDropped: { noticeId: string; recipientId: string; policyVersion: number }[];
}

interface Summary {
  outcome: string;
  sendNotBefore: string | null;
  timingRule: string | null;
}

/**
 * Gathers, from decision-log entries in any order (Redis and the archive may overlap), each
 * notice's SMS decision: its `policy.checked` (sms) entry carries the inputs, its
 * `fallback.decided` or `fallback.blocked` entry the result.
 */
export async function collectDecisions(entries: AsyncIterable<StoredEntry> | Iterable<StoredEntry>): Promise<RecordedDecision[]> {
  const checked = new Map<string, Extract<StoredEntry, { type: 'policy.checked' }>>();
  const decided = new Map<string, Extract<StoredEntry, { type: 'fallback.decided' | 'fallback.blocked' }>>();
  for await (const entry of entries) {
    if (entry.type === 'policy.checked' && entry.channel === 'sms') checked.set(entry.noticeId, entry);
    else if (entry.type === 'fallback.decided' || entry.type === 'fallback.blocked') decided.set(entry.noticeId, entry);
  }
  const records: RecordedDecision[] = [];
  for (const [noticeId, decision] of decided) {
    const check = checked.get(noticeId);
    if (!check || typeof check.recipientId !== 'string') continue; // the period cut the decision in two
    records.push({
      noticeId,
      recipientId: check.recipientId,
      hasPhone: check.hasPhone === true,
      complianceDeadline: typeof check.complianceDeadline === 'string' ? Date.parse(check.complianceDeadline) : undefined,
      decidedAt: Date.parse(String(decision.decidedAt)),
      region: typeof check.region === 'string' ? check.region : undefined,
      policyVersion: Number(check.policyVersion ?? 0),
      rulesVersion: typeof check.rulesVersion === 'string' ? check.rulesVersion : null,
      outcome: String(check.outcome),
      smsSuppressed: check.outcome === 'suppressed',
      sendNotBefore:
        decision.type === 'fallback.decided' && typeof decision.sendNotBefore === 'string' ? Date.parse(decision.sendNotBefore) : undefined,
      timingRule: decision.type === 'fallback.decided' && typeof decision.timingRule === 'string' ? decision.timingRule : undefined,
    });
  }
  return records.sort((a, b) => a.decidedAt - b.decidedAt);
}

const summary = (outcome: string, sendNotBefore: number | undefined, timingRule: string | undefined): Summary => ({
  outcome,
  sendNotBefore: sendNotBefore === undefined ? null : iso(sendNotBefore),
  timingRule: timingRule ?? null,
});

function describe(before: Summary, after: Summary, record: RecordedDecision, rules: Rules): string {
  const where = `region ${record.region ?? '(none)'}`;
  if (before.outcome !== after.outcome) return `${where}: SMS ${before.outcome} → ${after.outcome} under rules ${rules.version}`;
  if (before.sendNotBefore !== after.sendNotBefore) {
    const was = before.sendNotBefore ? `waited until ${before.sendNotBefore}` : 'sent at once';
    const now = after.sendNotBefore ? `wait until ${after.sendNotBefore}` : 'send at once';
    return `${where}: ${was}; would ${now}${after.timingRule ? ` (${after.timingRule})` : ''}`;
  }
  return `${where}: timing rule ${before.timingRule ?? 'none'} → ${after.timingRule ?? 'none'}`;
}

/**
 * Decides each recorded fallback again with the same function the engine uses, against the
 * proposed rules and the recipient policies `policyOf` returns (by default the versions the
 * decisions used), and reports the notices whose outcome or timing would change, and why. A
 * decision whose policy `policyOf` no longer has (null) is listed as such, never replayed
 * against a stand-in.
 */
export async function replayDecisions(
  records: readonly RecordedDecision[],
  rules: Rules,
  policyOf: (recipientId: string, version: number) => Promise<RecipientPolicy | null>,
): Promise<ReplayReport> {
  const changed: ReplayChange[] = [];
  const policyVersionDropped: ReplayReport['policyVersionDropped'] = [];
  for (const record of records) {
    const policy = await policyOf(record.recipientId, record.policyVersion);
    if (!policy) {
      policyVersionDropped.push({ noticeId: record.noticeId, recipientId: record.recipientId, policyVersion: record.policyVersion });
      continue;
    }
    const decision: SmsPolicyDecision = decideSms({
      phone: record.hasPhone ? 'recorded' : undefined,
      region: record.region,
      consentSms: policy.consent.sms,
      smsSuppressed: record.smsSuppressed,
      rules,
      now: record.decidedAt,
      complianceDeadline: record.complianceDeadline,
    });
    const before = summary(record.outcome, record.sendNotBefore, record.timingRule);
    const after =
      decision.outcome === 'allowed'
        ? summary('allowed', decision.sendNotBefore, decision.timingRule)
        : summary(decision.outcome, undefined, undefined);
    // What the person experiences decides a change: whether an SMS may go, and when.
    if (before.outcome !== after.outcome || before.sendNotBefore !== after.sendNotBefore) {
      changed.push({
        noticeId: record.noticeId,
        recipientId: record.recipientId,
        decidedAt: iso(record.decidedAt),
        before,
        after,
        why: describe(before, after, record, rules),
      });
    }
  }
  return { rulesVersion: rules.version, examined: records.length - policyVersionDropped.length, changed, policyVersionDropped };
}
