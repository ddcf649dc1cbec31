import { randomBytes } from 'node:crypto';
import { formatDuration, parseDuration } from './durations.js';

/** Herald's configuration, read once from the environment at start-up and frozen. */
export interface Config {
  readonly nodeEnv: string;
  readonly redisUrl: string;
  readonly prefix: string;
  readonly port: number;
  readonly host: string;
  readonly apiKeys: readonly string[];
  /** Set when no HERALD_API_KEYS was given in sandbox mode: the key printed for local use. */
  readonly devApiKey: string | undefined;
  readonly adminToken: string | undefined;
  readonly providers: 'sandbox' | 'live';
  readonly postmark: {
    readonly serverToken: string;
    readonly from: string;
    readonly messageStream: string;
    /** Undefined in sandbox mode until the worker starts its embedded emulator. */
    readonly apiUrl: string | undefined;
  };
  readonly twilio: {
    readonly accountSid: string;
    readonly authToken: string;
    readonly from: string | undefined;
    readonly messagingServiceSid: string | undefined;
    readonly apiUrl: string | undefined;
  };
  readonly providerTimeoutMs: number;
  readonly minPollIntervalMs: number;
  readonly maxChecksPerNotice: number;
  readonly bodyLimit: number;
  readonly archiveUrl: string;
  readonly contentTtlMs: number;
  readonly auditRetentionMs: number;
  readonly encryptionKey: string | undefined;
  readonly rulesFile: string | undefined;
  /** How often the reconciler sweeps for overdue notices. */
  readonly reconcileIntervalMs: number;
  /** How long past its due time a notice waits for its own job before the reconciler steps in. */
  readonly reconcileGraceMs: number;
  /** Jobs each worker runs at once, per queue. */
  readonly workerConcurrency: number;
  /** Bull Board without retry/remove/promote buttons. */
  readonly adminReadOnly: boolean;
  /** Requests per minute per API key on /v1 routes; 0 turns the limit off. */
  readonly rateLimitPerMinute: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Herald cannot start; fix the configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Reads and validates the configuration; throws ConfigError naming every bad or missing variable. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = (name: string): string | undefined => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  };
  const integer = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name}="${raw}" must be a whole number from ${min} to ${max}`);
      return fallback;
    }
    return value;
  };
  const duration = (name: string, fallback: number): number => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    try {
      const ms = parseDuration(raw);
      if (ms <= 0) throw new Error(`"${raw}" must be longer than zero`);
      return ms;
    } catch (error) {
      problems.push(`${name}: ${(error as Error).message}`);
      return fallback;
    }
  };
  const url = (name: string, fallback: string | undefined, protocols: string[]): string | undefined => {
    const raw = read(name) ?? fallback;
    if (raw === undefined) return undefined;
    try {
      const parsed = new URL(raw);
      if (!protocols.includes(parsed.protocol)) throw new Error();
    } catch {
      problems.push(`${name}="${raw}" must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);
    }
    return raw;
  };

  const nodeEnv = read('NODE_ENV') ?? 'development';
  const providersRaw = read('HERALD_PROVIDERS') ?? 'sandbox';
  if (providersRaw !== 'sandbox' && providersRaw !== 'live') {
    problems.push(`HERALD_PROVIDERS="${providersRaw}" must be "sandbox" or "live"`);
  }
  const providers = providersRaw === 'live' ? 'live' : 'sandbox';
  const sandbox = providers === 'sandbox';

  if (nodeEnv === 'production') {
    // The operator must decide retention before launch (SPEC §5).
    const missing = ['HERALD_CONTENT_TTL', 'HERALD_AUDIT_RETENTION', 'HERALD_ARCHIVE_URL'].filter((n) => !read(n));
    for (const name of missing) problems.push(`${name} must be set explicitly when NODE_ENV=production`);
  }

  const prefix = read('HERALD_PREFIX') ?? 'herald';
  if (!/^[A-Za-z0-9_.-]+$/.test(prefix)) {
    problems.push(`HERALD_PREFIX="${prefix}" may hold only letters, digits, "_", "." and "-"`);
  }

  let apiKeys = (read('HERALD_API_KEYS') ?? '').split(',').map((k) => k.trim()).filter(Boolean);
  let devApiKey: string | undefined;
  if (apiKeys.length === 0) {
    if (sandbox) {
      devApiKey = `dev_${randomBytes(18).toString('base64url')}`;
      apiKeys = [devApiKey];
    } else {
      problems.push('HERALD_API_KEYS must list at least one API key when HERALD_PROVIDERS=live');
    }
  }
  if (apiKeys.some((k) => k.length < 16)) problems.push('HERALD_API_KEYS: every key must be at least 16 characters');

  const adminToken = read('HERALD_ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    problems.push('HERALD_ADMIN_TOKEN must be at least 16 characters');
  }

  const liveRequired = (name: string, sandboxValue: string): string => {
    const value = read(name);
    if (value !== undefined) return value;
    if (!sandbox) problems.push(`${name} must be set when HERALD_PROVIDERS=live`);
    return sandboxValue;
  };
  const postmark = {
    serverToken: liveRequired('POSTMARK_SERVER_TOKEN', 'sandbox-server-token'),
    from: liveRequired('POSTMARK_FROM', 'herald@sandbox.example'),
    messageStream: read('POSTMARK_MESSAGE_STREAM') ?? 'outbound',
    apiUrl: url('POSTMARK_API_URL', sandbox ? undefined : 'https://api.postmarkapp.com', ['http:', 'https:']),
  };
  const accountSid = liveRequired('TWILIO_ACCOUNT_SID', 'AC00000000000000000000000000000000');
  if (!accountSid.startsWith('AC')) problems.push('TWILIO_ACCOUNT_SID must start with "AC"');
  const twilioFrom = read('TWILIO_FROM');
  const messagingServiceSid = read('TWILIO_MESSAGING_SERVICE_SID');
  if (!sandbox && !twilioFrom && !messagingServiceSid) {
    problems.push('TWILIO_FROM or TWILIO_MESSAGING_SERVICE_SID must be set when HERALD_PROVIDERS=live');
  }
  const twilio = {
    accountSid,
    authToken: liveRequired('TWILIO_AUTH_TOKEN', 'sandbox-auth-token'),
    from: twilioFrom ?? (sandbox && !messagingServiceSid ? '+15005550006' : undefined),
    messagingServiceSid,
    apiUrl: url('TWILIO_API_URL', sandbox ? undefined : 'https://api.twilio.com', ['http:', 'https:']),
  };

  const minPollIntervalMs = integer('HERALD_MIN_POLL_INTERVAL_MS', 30_000, 1);
  const providerTimeoutMs = integer('HERALD_PROVIDER_TIMEOUT_MS', 5_000, 100, 120_000);
  const config: Config = {
    nodeEnv,
    redisUrl: url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:'])!,
    prefix,
    port: integer('PORT', 3000, 0, 65_535),
    host: read('HOST') ?? '0.0.0.0',
    apiKeys,
    devApiKey,
    adminToken,
    providers,
    postmark,
    twilio,
    providerTimeoutMs,
    minPollIntervalMs,
    maxChecksPerNotice: integer('HERALD_MAX_CHECKS_PER_NOTICE', 20, 1, 1000),
    bodyLimit: integer('HERALD_BODY_LIMIT', 1_048_576, 1024),
    archiveUrl: url('HERALD_ARCHIVE_URL', 'file://./data/archive', ['file:', 's3:'])!,
    contentTtlMs: duration('HERALD_CONTENT_TTL', parseDuration('7d')),
    auditRetentionMs: duration('HERALD_AUDIT_RETENTION', parseDuration('400d')),
    encryptionKey: read('HERALD_ENCRYPTION_KEY'),
    rulesFile: read('HERALD_RULES_FILE'),
    reconcileIntervalMs: integer('HERALD_RECONCILE_INTERVAL_MS', 10_000, 50),
    reconcileGraceMs: integer('HERALD_RECONCILE_GRACE_MS', Math.max(2 * providerTimeoutMs, 10_000), 0),
    workerConcurrency: integer('HERALD_WORKER_CONCURRENCY', 20, 1, 1000),
    adminReadOnly: ['1', 'true', 'yes'].includes((read('HERALD_ADMIN_READ_ONLY') ?? '').toLowerCase()),
    rateLimitPerMinute: integer('HERALD_RATE_LIMIT_PER_MINUTE', 6000, 0),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** A summary safe to log: no secrets. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    providers: config.providers,
    prefix: config.prefix,
    providerTimeoutMs: config.providerTimeoutMs,
    minPollIntervalMs: config.minPollIntervalMs,
    maxChecksPerNotice: config.maxChecksPerNotice,
    contentTtl: formatDuration(config.contentTtlMs),
    auditRetention: formatDuration(config.auditRetentionMs),
    archiveUrl: config.archiveUrl,
  };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
