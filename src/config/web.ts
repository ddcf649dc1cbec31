/** The web process: its listener, the API keys, the admin routes, the limits and /metrics. */
import { duration, flag, integer, optionalInteger, readSection, text } from './schema.js';
import type { Platform } from './platform.js';
import type { Config } from './types.js';

type WebConfig = Pick<
  Config,
  | 'port'
  | 'host'
  | 'apiKeys'
  | 'adminToken'
  | 'adminReadOnly'
  | 'adminSessionTtlMs'
  | 'trustProxy'
  | 'authFailuresPerMinute'
  | 'metrics'
  | 'rateLimitPerMinute'
  | 'bodyLimit'
  | 'batch'
>;

/** The least length of an API key, the admin token or the metrics token. */
const MIN_TOKEN_LENGTH = 16;

export const SCHEMA = {
  PORT: integer(3000, 0, 65_535),
  HOST: text('0.0.0.0'),
  HERALD_API_KEYS: text(''),
  HERALD_ADMIN_TOKEN: text(undefined),
  HERALD_ADMIN_READ_ONLY: flag(),
  HERALD_ADMIN_SESSION_TTL: duration(12 * 3_600_000),
  HERALD_TRUST_PROXY: text(undefined),
  HERALD_AUTH_FAILURES_PER_MINUTE: integer(20, 0),
  HERALD_METRICS_TOKEN: text(undefined),
  HERALD_METRICS_PORT: optionalInteger(0, 65_535),
  HERALD_METRICS_HOST: text(undefined),
  HERALD_METRICS_CACHE_MS: integer(3000, 0, 60_000),
  // A runaway client's brake, not a throttle on a burst: well above what one Redis accepts.
  HERALD_RATE_LIMIT_PER_MINUTE: integer(1_200_000, 0),
  HERALD_BODY_LIMIT: integer(1_048_576, 1024),
  HERALD_BATCH_MAX: integer(1000, 1, 100_000),
  HERALD_BATCH_BODY_LIMIT: integer(16 * 1_048_576, 1024),
};

export function readWeb(env: Record<string, string>, platform: Platform, problems: string[]): WebConfig {
  const read = readSection(env, SCHEMA, problems);
  const apiKeys = read.HERALD_API_KEYS.split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  if (apiKeys.length === 0 && !platform.sandbox) problems.push('HERALD_API_KEYS must list at least one API key when HERALD_PROVIDERS=live');
  if (apiKeys.some((k) => k.length < MIN_TOKEN_LENGTH))
    problems.push(`HERALD_API_KEYS: every key must be at least ${MIN_TOKEN_LENGTH} characters`);

  const adminToken = read.HERALD_ADMIN_TOKEN;
  if (adminToken !== undefined && adminToken.length < MIN_TOKEN_LENGTH)
    problems.push(`HERALD_ADMIN_TOKEN must be at least ${MIN_TOKEN_LENGTH} characters`);
  if (adminToken !== undefined && apiKeys.includes(adminToken))
    problems.push('HERALD_ADMIN_TOKEN must differ from every key in HERALD_API_KEYS');
  const metricsToken = read.HERALD_METRICS_TOKEN;
  if (metricsToken !== undefined && metricsToken.length < MIN_TOKEN_LENGTH)
    problems.push(`HERALD_METRICS_TOKEN must be at least ${MIN_TOKEN_LENGTH} characters`);
  const metricsPort = read.HERALD_METRICS_PORT;
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === read.PORT) {
    problems.push(`HERALD_METRICS_PORT=${metricsPort} must differ from PORT: it is a listener of its own`);
  }
  return {
    port: read.PORT,
    host: read.HOST,
    apiKeys,
    adminToken,
    // Production, and live providers anywhere, show Bull Board read-only unless the operator turns the buttons on explicitly.
    adminReadOnly: read.HERALD_ADMIN_READ_ONLY ?? (platform.production || !platform.sandbox),
    adminSessionTtlMs: read.HERALD_ADMIN_SESSION_TTL,
    trustProxy: parseTrustProxy(read.HERALD_TRUST_PROXY, problems),
    authFailuresPerMinute: read.HERALD_AUTH_FAILURES_PER_MINUTE,
    metrics: { token: metricsToken, port: metricsPort, host: read.HERALD_METRICS_HOST, cacheMs: read.HERALD_METRICS_CACHE_MS },
    rateLimitPerMinute: read.HERALD_RATE_LIMIT_PER_MINUTE,
    bodyLimit: read.HERALD_BODY_LIMIT,
    batch: { max: read.HERALD_BATCH_MAX, bodyLimit: read.HERALD_BATCH_BODY_LIMIT },
  };
}

/** HERALD_TRUST_PROXY: a flag, a number of proxy hops, or comma-separated addresses and CIDRs. */
function parseTrustProxy(raw: string | undefined, problems: string[]): boolean | number | string {
  if (raw === undefined || ['false', '0', 'no', 'off'].includes(raw.toLowerCase())) return false;
  if (['true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
  if (/^[1-9][0-9]?$/.test(raw)) return Number(raw);
  const entries = raw.split(',').map((e) => e.trim());
  if (entries.every((e) => /^[0-9A-Fa-f.:]+(\/[0-9]{1,3})?$/.test(e) || ['loopback', 'linklocal', 'uniquelocal'].includes(e))) {
    return entries.join(',');
  }
  problems.push(`HERALD_TRUST_PROXY="${raw}" must be true, false, a hop count, or the proxy's addresses/CIDRs (e.g. 10.0.0.0/8,loopback)`);
  return false;
}
