/** How notices are worked: provider timeouts, the poll floor and budget, the reconciler, the workers, the rules and prices. */
import { loadRules, RulesError, type Rules } from '../policy/rules.js';
import { duration, integer, optionalInteger, readSection, text } from './schema.js';
import type { Config, Prices } from './types.js';

/** List prices of Postmark (per email) and Twilio (per US SMS segment); override with HERALD_PRICES. */
export const DEFAULT_PRICES: Prices = { currency: 'USD', email: { send: 0.0015, status: 0 }, sms: { segment: 0.0083, status: 0 } };

type EngineConfig = Pick<
  Config,
  | 'providerTimeoutMs'
  | 'maxRetryAfterMs'
  | 'minPollIntervalMs'
  | 'maxChecksPerNotice'
  | 'reconcileIntervalMs'
  | 'reconcileGraceMs'
  | 'workerConcurrency'
  | 'workerMetricsPort'
  | 'policyVersionsKept'
  | 'suppressionsMax'
  | 'rulesFile'
  | 'rules'
  | 'prices'
>;

export const SCHEMA = {
  HERALD_PROVIDER_TIMEOUT_MS: integer(5_000, 100, 120_000),
  HERALD_MAX_RETRY_AFTER: duration(5 * 60_000),
  HERALD_MIN_POLL_INTERVAL_MS: integer(30_000, 1),
  HERALD_MAX_CHECKS_PER_NOTICE: integer(20, 1, 1000),
  HERALD_RECONCILE_INTERVAL_MS: integer(10_000, 50),
  // Default: twice the provider timeout, at least 10 s (below).
  HERALD_RECONCILE_GRACE_MS: optionalInteger(0),
  HERALD_WORKER_CONCURRENCY: integer(20, 1, 1000),
  HERALD_WORKER_METRICS_PORT: optionalInteger(0, 65_535),
  HERALD_POLICY_VERSIONS_KEPT: integer(50, 1, 100_000),
  HERALD_SUPPRESSIONS_MAX: integer(1_000_000, 1),
  HERALD_RULES_FILE: text(undefined),
  HERALD_PRICES: text(undefined),
};

export function readEngine(env: Record<string, string>, problems: string[]): EngineConfig {
  const read = readSection(env, SCHEMA, problems);
  let rules: Rules | undefined;
  if (read.HERALD_RULES_FILE) {
    try {
      rules = loadRules(read.HERALD_RULES_FILE);
    } catch (error) {
      if (!(error instanceof RulesError)) throw error;
      problems.push(`HERALD_RULES_FILE: ${error.message}`);
    }
  }
  const providerTimeoutMs = read.HERALD_PROVIDER_TIMEOUT_MS;
  return {
    providerTimeoutMs,
    maxRetryAfterMs: read.HERALD_MAX_RETRY_AFTER,
    minPollIntervalMs: read.HERALD_MIN_POLL_INTERVAL_MS,
    maxChecksPerNotice: read.HERALD_MAX_CHECKS_PER_NOTICE,
    reconcileIntervalMs: read.HERALD_RECONCILE_INTERVAL_MS,
    reconcileGraceMs: read.HERALD_RECONCILE_GRACE_MS ?? Math.max(2 * providerTimeoutMs, 10_000),
    workerConcurrency: read.HERALD_WORKER_CONCURRENCY,
    workerMetricsPort: read.HERALD_WORKER_METRICS_PORT,
    policyVersionsKept: read.HERALD_POLICY_VERSIONS_KEPT,
    suppressionsMax: read.HERALD_SUPPRESSIONS_MAX,
    rulesFile: read.HERALD_RULES_FILE,
    rules,
    prices: parsePrices(read.HERALD_PRICES, problems),
  };
}

function parsePrices(raw: string | undefined, problems: string[]): Prices {
  if (raw === undefined) return DEFAULT_PRICES;
  try {
    const given = JSON.parse(raw) as Partial<{ currency: string; email: Partial<Prices['email']>; sms: Partial<Prices['sms']> }>;
    const prices: Prices = {
      currency: given.currency ?? DEFAULT_PRICES.currency,
      email: { ...DEFAULT_PRICES.email, ...given.email },
      sms: { ...DEFAULT_PRICES.sms, ...given.sms },
    };
    const numbers = [prices.email.send, prices.email.status, prices.sms.segment, prices.sms.status];
    if (!/^[A-Z]{3}$/.test(prices.currency) || numbers.some((n) => typeof n !== 'number' || !(n >= 0))) throw new Error();
    return prices;
  } catch {
    problems.push(
      'HERALD_PRICES must be JSON like {"currency":"USD","email":{"send":0.0015,"status":0},"sms":{"segment":0.0083,"status":0}}',
    );
    return DEFAULT_PRICES;
  }
}
