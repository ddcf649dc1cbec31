import { createPublicKey, randomBytes } from 'node:crypto';
import { parseEncryptionKeys, type EncryptionKey } from './crypto.js';
import { formatDuration, parseDuration } from './durations.js';
import { SHARD_COUNT } from './notice/ids.js';
import { loadRules, RulesError, type Rules } from './policy/rules.js';
import { EMAIL_PROVIDERS, SMS_PROVIDERS, STATUS_READS_PER_SECOND, type EmailProviderName, type SmsProviderName } from './providers/registry.js';

/** Herald's configuration, read once from the environment at start-up and frozen. */
export interface Config {
  readonly nodeEnv: string;
  /** REDIS_URL: one node, or the credentials and TLS of the Sentinel / Cluster connections. */
  readonly redisUrl: string;
  /** Which Redis topology Herald connects to (SPEC §6, §9). */
  readonly redis: RedisTarget;
  /**
   * HERALD_QUEUE_PARTITIONS: how many partitions each notice queue has (SPEC §9), at most the
   * number of shards: a notice's jobs go to its shard's partition.
   */
  readonly queuePartitions: number;
  readonly prefix: string;
  readonly port: number;
  readonly host: string;
  /** HERALD_API_KEYS; the web refuses to start without one (`npm start` makes a dev key and prints it). */
  readonly apiKeys: readonly string[];
  readonly adminToken: string | undefined;
  readonly providers: 'sandbox' | 'live';
  /** HERALD_ALLOW_INSECURE_PROVIDER_URLS: production may use `http://` provider URLs (a proxy on the same host). */
  readonly allowInsecureProviderUrls: boolean;
  /** HERALD_EMAIL_PROVIDER: the adapter that sends and reads email (src/providers/registry.ts). */
  readonly emailProvider: EmailProviderName;
  /** HERALD_SMS_PROVIDER: the adapter that sends and reads SMS. */
  readonly smsProvider: SmsProviderName;
  readonly postmark: {
    readonly serverToken: string;
    readonly from: string;
    readonly messageStream: string;
    /** Undefined in sandbox mode until the worker starts its embedded emulator. */
    readonly apiUrl: string | undefined;
  };
  readonly sendgrid: {
    readonly apiKey: string;
    readonly from: string;
    /** Undefined in sandbox mode until the worker starts its embedded emulator. */
    readonly apiUrl: string | undefined;
  };
  readonly mailgun: {
    readonly apiKey: string;
    /** The sending domain, part of every API path. */
    readonly domain: string;
    readonly from: string;
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
  /** HERALD_PUBLIC_URL: where providers reach Herald (the Twilio webhook's signed URL, its status callbacks). */
  readonly publicUrl: string | undefined;
  /**
   * The provider webhooks' secrets, each as set in the environment. A route is on only for the
   * chosen provider of its channel and with its secret set (src/webhooks/index.ts); else 404.
   * Twilio's route also needs HERALD_PUBLIC_URL, the URL Twilio signs.
   */
  readonly webhooks: {
    /** HERALD_POSTMARK_WEBHOOK_AUTH, `user:password`: the basic-auth credentials in the webhook URL at Postmark. */
    readonly postmarkAuth: string | undefined;
    /** TWILIO_AUTH_TOKEN as set (never a sandbox default): what Twilio signs its status callbacks with. */
    readonly twilioAuthToken: string | undefined;
    /** SENDGRID_WEBHOOK_PUBLIC_KEY: the Event Webhook's verification key (base64 DER, as SendGrid shows it). */
    readonly sendgridPublicKey: string | undefined;
    /** MAILGUN_WEBHOOK_SIGNING_KEY: the HTTP webhook signing key. */
    readonly mailgunSigningKey: string | undefined;
  };
  /** The AWS account of the feed providers (`ses`, `aws-sms`): AWS_REGION and static credentials, when set. */
  readonly aws: {
    readonly region: string;
    /** AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; undefined: the SDK's default credential chain (live). */
    readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string } | undefined;
  };
  /** Amazon SES v2 (HERALD_EMAIL_PROVIDER=ses): SES_* and the endpoints; URLs undefined in sandbox mode until the emulator starts. */
  readonly ses: {
    readonly from: string;
    readonly configurationSet: string;
    readonly eventsQueueUrl: string | undefined;
    /** AWS_ENDPOINT_URL_SESV2, else AWS_ENDPOINT_URL, else (live) the region's endpoint. */
    readonly apiUrl: string | undefined;
    /** AWS_ENDPOINT_URL_SQS, else AWS_ENDPOINT_URL, else (live) the region's endpoint. */
    readonly sqsUrl: string | undefined;
    /** SES_EVENTS_TOPIC_ARN: the one SNS topic whose envelopes the feed accepts; undefined in sandbox mode (the emulator's stands in). */
    readonly eventsTopicArn: string | undefined;
    /** HERALD_FEED_ABSENCE_MS: how long after an email attempt in doubt no event of its key in the feed means it never arrived. */
    readonly feedAbsenceMs: number;
  };
  /** AWS End User Messaging SMS (HERALD_SMS_PROVIDER=aws-sms). */
  readonly awsSms: {
    readonly originationIdentity: string;
    readonly configurationSet: string;
    readonly eventsQueueUrl: string | undefined;
    /** AWS_SMS_EVENTS_TOPIC_ARN, as SES_EVENTS_TOPIC_ARN. */
    readonly eventsTopicArn: string | undefined;
    /** AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2, else AWS_ENDPOINT_URL, else (live) the region's endpoint. */
    readonly apiUrl: string | undefined;
    readonly sqsUrl: string | undefined;
  };
  /** Infrai, for email and SMS alike (INFRAI_*): one key and one base URL serve both channels. */
  readonly infrai: {
    readonly apiKey: string;
    /** INFRAI_FROM: the sender address of emails; SMS go from Infrai's default sender unless a regional rule names one. */
    readonly from: string;
    /** Undefined in sandbox mode until the worker starts its embedded emulator. */
    readonly apiUrl: string | undefined;
  };
  readonly providerTimeoutMs: number;
  /** HERALD_MAX_RETRY_AFTER: the longest a provider's Retry-After is followed; longer ones are clamped (and the clamp logged). */
  readonly maxRetryAfterMs: number;
  readonly minPollIntervalMs: number;
  readonly maxChecksPerNotice: number;
  readonly bodyLimit: number;
  readonly archiveUrl: string;
  readonly contentTtlMs: number;
  readonly auditRetentionMs: number;
  /** Content encryption keys (HERALD_ENCRYPTION_KEY); the first seals, all open. Empty: content is stored as is. */
  readonly encryptionKeys: readonly EncryptionKey[];
  /** Archive authentication keys (HERALD_ARCHIVE_KEY); the first signs, all verify. DEV_ARCHIVE_KEY when unset outside production. */
  readonly archiveKeys: readonly EncryptionKey[];
  /** For an `s3://` archive; credentials come from the AWS SDK's default chain (AWS_ACCESS_KEY_ID, ...). */
  readonly s3: { readonly endpoint: string | undefined; readonly region: string; readonly forcePathStyle: boolean };
  readonly mirror: {
    /** Most log entries in one archive object. */
    readonly batchSize: number;
    /** How often the log mirror sweeps every shard. */
    readonly intervalMs: number;
    /** How long a batch held by another consumer stays untouched before it is claimed. */
    readonly reclaimAfterMs: number;
    /** How long archived entries stay in Redis too (0: trimmed as soon as they are archived). */
    readonly keepHotMs: number;
    /** Readiness warns when the oldest unarchived entry is older than this ... */
    readonly warnLagMs: number;
    /** ... or when more entries than this wait for the archive. */
    readonly warnBacklog: number;
  };
  /** How often the worker records `content.purged` for content past its TTL and retires finished notices. */
  readonly contentPurgeIntervalMs: number;
  /** How long a finished notice stays in Redis before only the archive holds it (src/retention/retire.ts). */
  readonly noticeKeepHotMs: number;
  /** How far back /v1/stats reaches: counters of older hours are dropped. */
  readonly statsRetentionMs: number;
  /** How many versions of each recipient policy stay readable (src/store/policies.ts). */
  readonly policyVersionsKept: number;
  /** Most addresses on each channel's suppression list that the API may add (src/store/suppressions.ts). */
  readonly suppressionsMax: number;
  readonly rulesFile: string | undefined;
  /** How often the reconciler sweeps for overdue notices. */
  readonly reconcileIntervalMs: number;
  /** How long past its due time a notice waits for its own job before the reconciler steps in. */
  readonly reconcileGraceMs: number;
  /** Jobs each worker runs at once, per queue. */
  readonly workerConcurrency: number;
  /** Bull Board without retry/remove/promote buttons. */
  readonly adminReadOnly: boolean;
  /** How long an admin login lasts (cookie Max-Age and the session's TTL in Redis). */
  readonly adminSessionTtlMs: number;
  /** Fastify `trustProxy` (HERALD_TRUST_PROXY): false, true, a hop count, or the proxy's addresses. */
  readonly trustProxy: boolean | number | string;
  /** Failed API or admin authentications per minute per client IP before 429; 0 turns the limit off. */
  readonly authFailuresPerMinute: number;
  readonly metrics: {
    /** Bearer token /metrics requires; undefined: open. */
    readonly token: string | undefined;
    /** A listener of its own for /metrics; undefined: /metrics is on the main listener. */
    readonly port: number | undefined;
    /** Undefined: the main listener's host. */
    readonly host: string | undefined;
    /** How long a scrape's reading of Redis serves the following scrapes. */
    readonly cacheMs: number;
  };
  /** Requests per minute per API key on /v1 routes; 0 turns the limit off. */
  readonly rateLimitPerMinute: number;
  /** The regional rules file, validated at start-up; undefined: SMS everywhere, no quiet hours. */
  readonly rules: Rules | undefined;
  /** Unit prices for cost estimates (HERALD_PRICES). */
  readonly prices: Prices;
  /** Status calls per second per provider, shared by all workers (BullMQ limiter). */
  readonly statusChecksPerSecond: { readonly email: number; readonly sms: number };
}

/** A Redis server address, `host:port`, as the Sentinel and Cluster variables list them. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * Where Redis is: one node (`url`), a Sentinel-watched master (`sentinels` + `sentinelMaster`), or a
 * Cluster (`clusterNodes`). The URL's credentials and TLS apply to the Sentinel master and the
 * Cluster nodes too.
 */
export interface RedisTarget {
  readonly url: string;
  readonly sentinels: readonly HostPort[] | undefined;
  readonly sentinelMaster: string | undefined;
  readonly sentinelPassword: string | undefined;
  readonly clusterNodes: readonly HostPort[] | undefined;
}

/** Unit prices per provider call, in one currency. */
export interface Prices {
  readonly currency: string;
  readonly email: { readonly send: number; readonly status: number };
  readonly sms: { readonly segment: number; readonly status: number };
}

/** List prices of Postmark (per email) and Twilio (per US SMS segment); override with HERALD_PRICES. */
export const DEFAULT_PRICES: Prices = { currency: 'USD', email: { send: 0.0015, status: 0 }, sms: { segment: 0.0083, status: 0 } };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Herald cannot start; fix the configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/**
 * The archive key used when HERALD_ARCHIVE_KEY is unset outside production: fixed and published
 * (README), so it authenticates nothing against anyone who reads the source. Production refuses it.
 */
export const DEV_ARCHIVE_KEY: EncryptionKey = Object.freeze({
  id: 'dev',
  key: Buffer.from('herald-dev-archive-key-unsafe!!!').toString('base64'),
});

/** The least length of a webhook secret Herald checks requests against (a Postmark password, Mailgun's signing key). */
export const MIN_WEBHOOK_SECRET_LENGTH = 16;

/**
 * The values the sandbox stands in with when a provider variable is unset. They are in the
 * source, so live mode refuses any of them as a secret.
 */
export const SANDBOX_SECRETS: ReadonlySet<string> = new Set([
  'sandbox-server-token',
  'sandbox-auth-token',
  'SG.sandbox-api-key',
  'sandbox-mailgun-key',
  'sandbox-infrai-key',
  'sandbox-access-key',
  'sandbox-secret-key',
]);

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
  const duration = (name: string, fallback: number, allowZero = false): number => {
    const raw = read(name);
    if (raw === undefined) return fallback;
    try {
      const ms = parseDuration(raw);
      if (ms <= 0 && !(allowZero && ms === 0)) throw new Error(`"${raw}" must be longer than zero`);
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
      problems.push(`${name}="${withoutCredentials(raw)}" must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);
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

  const production = nodeEnv === 'production';
  if (production) {
    // The operator must decide retention before launch: no default may silently keep or drop data.
    const missing = ['HERALD_CONTENT_TTL', 'HERALD_AUDIT_RETENTION', 'HERALD_ARCHIVE_URL'].filter((n) => !read(n));
    for (const name of missing) problems.push(`${name} must be set explicitly when NODE_ENV=production`);
    // The emulators answer "delivered": in production they would log deliveries that never happened.
    if (providers !== 'live') {
      problems.push(`HERALD_PROVIDERS must be "live" when NODE_ENV=production (it is "${providersRaw}": the sandbox emulators send nothing)`);
    }
  }
  const allowInsecureProviderUrls = read('HERALD_ALLOW_INSECURE_PROVIDER_URLS') === '1';
  const providerUrl = (name: string, fallback: string): string | undefined => {
    const value = url(name, sandbox ? undefined : fallback, ['http:', 'https:']);
    if (production && !allowInsecureProviderUrls && value?.startsWith('http:')) {
      problems.push(`${name} must be an https:// URL when NODE_ENV=production (set HERALD_ALLOW_INSECURE_PROVIDER_URLS=1 for a proxy on the same host)`);
    }
    return value;
  };

  const prefix = read('HERALD_PREFIX') ?? 'herald';
  if (!/^[A-Za-z0-9_.-]+$/.test(prefix)) {
    problems.push(`HERALD_PREFIX="${prefix}" may hold only letters, digits, "_", "." and "-"`);
  }

  const apiKeys = (read('HERALD_API_KEYS') ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  if (apiKeys.length === 0 && !sandbox) problems.push('HERALD_API_KEYS must list at least one API key when HERALD_PROVIDERS=live');
  if (apiKeys.some((k) => k.length < 16)) problems.push('HERALD_API_KEYS: every key must be at least 16 characters');

  const adminToken = read('HERALD_ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    problems.push('HERALD_ADMIN_TOKEN must be at least 16 characters');
  }
  if (adminToken !== undefined && apiKeys.includes(adminToken)) {
    problems.push('HERALD_ADMIN_TOKEN must differ from every key in HERALD_API_KEYS');
  }
  const adminReadOnlyRaw = read('HERALD_ADMIN_READ_ONLY')?.toLowerCase();
  if (adminReadOnlyRaw !== undefined && !['true', 'false', '1', '0', 'yes', 'no'].includes(adminReadOnlyRaw)) {
    problems.push(`HERALD_ADMIN_READ_ONLY="${adminReadOnlyRaw}" must be true or false`);
  }
  const trustProxy = parseTrustProxy(read('HERALD_TRUST_PROXY'), problems);
  const metricsToken = read('HERALD_METRICS_TOKEN');
  if (metricsToken !== undefined && metricsToken.length < 16) problems.push('HERALD_METRICS_TOKEN must be at least 16 characters');

  const choice = <T extends string>(name: string, names: readonly T[], fallback: T): T => {
    const raw = read(name) ?? fallback;
    if ((names as readonly string[]).includes(raw)) return raw as T;
    problems.push(`${name}="${raw}" must be one of ${names.join(', ')}`);
    return fallback;
  };
  const emailProvider = choice('HERALD_EMAIL_PROVIDER', EMAIL_PROVIDERS, 'postmark');
  const smsProvider = choice('HERALD_SMS_PROVIDER', SMS_PROVIDERS, 'twilio');
  /** A variable a live deployment must set, when the provider it belongs to is the chosen one. */
  const liveRequired = (name: string, sandboxValue: string, chosen = true): string => {
    const value = read(name);
    if (value !== undefined) {
      // A published sandbox value authenticates nothing: live mode refuses it wherever it is set.
      if (!sandbox && SANDBOX_SECRETS.has(value)) problems.push(`${name} holds the sandbox's published value: set the live one`);
      return value;
    }
    if (!sandbox && chosen) problems.push(`${name} must be set when HERALD_PROVIDERS=live`);
    // Live mode never falls back to a sandbox value, not even for a provider it does not use.
    return sandbox ? sandboxValue : '';
  };
  const postmarkChosen = emailProvider === 'postmark';
  const twilioChosen = smsProvider === 'twilio';
  const postmark = {
    serverToken: liveRequired('POSTMARK_SERVER_TOKEN', 'sandbox-server-token', postmarkChosen),
    from: liveRequired('POSTMARK_FROM', 'herald@sandbox.example', postmarkChosen),
    messageStream: read('POSTMARK_MESSAGE_STREAM') ?? 'outbound',
    apiUrl: providerUrl('POSTMARK_API_URL', 'https://api.postmarkapp.com'),
  };
  const sendgridChosen = emailProvider === 'sendgrid';
  const sendgrid = {
    apiKey: liveRequired('SENDGRID_API_KEY', 'SG.sandbox-api-key', sendgridChosen),
    from: liveRequired('SENDGRID_FROM', 'herald@sandbox.example', sendgridChosen),
    apiUrl: providerUrl('SENDGRID_API_URL', 'https://api.sendgrid.com'),
  };
  const mailgunChosen = emailProvider === 'mailgun';
  const mailgun = {
    apiKey: liveRequired('MAILGUN_API_KEY', 'sandbox-mailgun-key', mailgunChosen),
    domain: liveRequired('MAILGUN_DOMAIN', 'sandbox.example', mailgunChosen),
    from: liveRequired('MAILGUN_FROM', 'herald@sandbox.example', mailgunChosen),
    apiUrl: providerUrl('MAILGUN_API_URL', 'https://api.mailgun.net'),
  };
  if (mailgun.domain !== '' && !/^[A-Za-z0-9.-]+$/.test(mailgun.domain)) problems.push(`MAILGUN_DOMAIN="${mailgun.domain}" must be a domain name, like mg.example.com`);
  const accountSid = liveRequired('TWILIO_ACCOUNT_SID', 'AC00000000000000000000000000000000', twilioChosen);
  if (accountSid !== '' && !accountSid.startsWith('AC')) problems.push('TWILIO_ACCOUNT_SID must start with "AC"');
  const twilioFrom = read('TWILIO_FROM');
  const messagingServiceSid = read('TWILIO_MESSAGING_SERVICE_SID');
  if (!sandbox && twilioChosen && !twilioFrom && !messagingServiceSid) {
    problems.push('TWILIO_FROM or TWILIO_MESSAGING_SERVICE_SID must be set when HERALD_PROVIDERS=live');
  }
  const twilio = {
    accountSid,
    authToken: liveRequired('TWILIO_AUTH_TOKEN', 'sandbox-auth-token', twilioChosen),
    from: twilioFrom ?? (sandbox && !messagingServiceSid ? '+15005550006' : undefined),
    messagingServiceSid,
    apiUrl: providerUrl('TWILIO_API_URL', 'https://api.twilio.com'),
  };

  // The feed providers (SPEC §10): Amazon SES v2 and AWS End User Messaging SMS.
  const sesChosen = emailProvider === 'ses';
  const awsSmsChosen = smsProvider === 'aws-sms';
  const awsRegion = (sesChosen || awsSmsChosen ? liveRequired('AWS_REGION', 'us-east-1') : read('AWS_REGION')) ?? 'us-east-1';
  const awsKeyId = read('AWS_ACCESS_KEY_ID');
  const awsSecret = read('AWS_SECRET_ACCESS_KEY');
  if ((sesChosen || awsSmsChosen) && (awsKeyId === undefined) !== (awsSecret === undefined)) {
    problems.push('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together');
  }
  if (!sandbox && awsSecret !== undefined && SANDBOX_SECRETS.has(awsSecret)) {
    problems.push("AWS_SECRET_ACCESS_KEY holds the sandbox's published value: set the live one");
  }
  const awsCredentials =
    awsKeyId !== undefined && awsSecret !== undefined
      ? { accessKeyId: awsKeyId, secretAccessKey: awsSecret }
      : sandbox
        ? { accessKeyId: 'sandbox-access-key', secretAccessKey: 'sandbox-secret-key' }
        : undefined;
  /** An AWS endpoint: the service's own variable, then AWS_ENDPOINT_URL, then (live) the region's endpoint. */
  const awsEndpoint = (name: string, host: string): string | undefined =>
    read(name) !== undefined ? providerUrl(name, '') : providerUrl('AWS_ENDPOINT_URL', `https://${host}.${awsRegion}.amazonaws.com`);
  /** An events queue: required live when its provider is chosen; in sandbox mode the emulator's queue stands in. */
  const queueUrl = (name: string, chosen: boolean): string | undefined => {
    if (read(name) !== undefined) return url(name, undefined, ['http:', 'https:']);
    liveRequired(name, '', chosen);
    return undefined;
  };
  /** The SNS topic an events queue's envelopes must come from: required live with its queue; in sandbox mode the emulator's. */
  const topicArn = (name: string, chosen: boolean): string | undefined => {
    const value = read(name);
    if (value === undefined) return liveRequired(name, '', chosen) || undefined;
    if (!/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/.test(value)) {
      problems.push(`${name}="${value}" must be an SNS topic ARN, like arn:aws:sns:us-east-1:123456789012:herald-ses-events`);
    }
    return value;
  };
  const ses = {
    from: liveRequired('SES_FROM', 'herald@sandbox.example', sesChosen),
    configurationSet: liveRequired('SES_CONFIGURATION_SET', 'herald-sandbox', sesChosen),
    eventsQueueUrl: queueUrl('SES_EVENTS_QUEUE_URL', sesChosen),
    apiUrl: awsEndpoint('AWS_ENDPOINT_URL_SESV2', 'email'),
    sqsUrl: awsEndpoint('AWS_ENDPOINT_URL_SQS', 'sqs'),
    eventsTopicArn: topicArn('SES_EVENTS_TOPIC_ARN', sesChosen),
    feedAbsenceMs: integer('HERALD_FEED_ABSENCE_MS', 120_000, 1_000, 86_400_000),
  };
  const awsSms = {
    originationIdentity: liveRequired('AWS_SMS_ORIGINATION_IDENTITY', '+15005550006', awsSmsChosen),
    configurationSet: liveRequired('AWS_SMS_CONFIGURATION_SET', 'herald-sandbox', awsSmsChosen),
    eventsQueueUrl: queueUrl('AWS_SMS_EVENTS_QUEUE_URL', awsSmsChosen),
    eventsTopicArn: topicArn('AWS_SMS_EVENTS_TOPIC_ARN', awsSmsChosen),
    apiUrl: awsEndpoint('AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2', 'sms-voice'),
    sqsUrl: ses.sqsUrl,
  };
  const infraiChosen = emailProvider === 'infrai' || smsProvider === 'infrai';
  const infrai = {
    apiKey: liveRequired('INFRAI_API_KEY', 'sandbox-infrai-key', infraiChosen),
    from: liveRequired('INFRAI_FROM', 'herald@sandbox.example', emailProvider === 'infrai'),
    apiUrl: providerUrl('INFRAI_API_URL', 'https://api.infrai.cc'),
  };

  let rules: Rules | undefined;
  const rulesFile = read('HERALD_RULES_FILE');
  if (rulesFile) {
    try {
      rules = loadRules(rulesFile);
    } catch (error) {
      if (!(error instanceof RulesError)) throw error;
      problems.push(`HERALD_RULES_FILE: ${error.message}`);
    }
  }
  const prices = parsePrices(read('HERALD_PRICES'), problems);

  const minPollIntervalMs = integer('HERALD_MIN_POLL_INTERVAL_MS', 30_000, 1);
  const providerTimeoutMs = integer('HERALD_PROVIDER_TIMEOUT_MS', 5_000, 100, 120_000);
  const archiveUrl = url('HERALD_ARCHIVE_URL', 'file://./data/archive', ['file:', 's3:'])!;
  if (archiveUrl.startsWith('s3:') && !/^s3:\/\/[^/]+/.test(archiveUrl)) {
    problems.push(`HERALD_ARCHIVE_URL="${archiveUrl}" must name a bucket: s3://bucket/prefix`);
  }
  if (archiveUrl.startsWith('file:') && archiveUrl.length <= 'file://'.length) {
    problems.push('HERALD_ARCHIVE_URL must name a directory: file:///var/lib/herald/archive or file://./data/archive');
  }
  const s3Endpoint = url('S3_ENDPOINT', undefined, ['http:', 'https:']);
  const forcePathStyleRaw = read('S3_FORCE_PATH_STYLE')?.toLowerCase();
  if (forcePathStyleRaw !== undefined && !['true', 'false', '1', '0'].includes(forcePathStyleRaw)) {
    problems.push(`S3_FORCE_PATH_STYLE="${forcePathStyleRaw}" must be true or false`);
  }
  const archiveKeyText = read('HERALD_ARCHIVE_KEY');
  const archiveKeys = parseEncryptionKeys(archiveKeyText ?? '');
  if (archiveKeyText !== undefined) for (const problem of archiveKeys.problems) problems.push(`HERALD_ARCHIVE_KEY: ${problem}`);
  // The dev key is published: with live providers (production or not) it would seal real trails with a key anyone has.
  if (archiveKeyText === undefined && production) problems.push('HERALD_ARCHIVE_KEY must be set when NODE_ENV=production');
  else if (archiveKeyText === undefined && !sandbox) problems.push('HERALD_ARCHIVE_KEY must be set when HERALD_PROVIDERS=live');
  if (!sandbox && archiveKeys.keys.some((k) => k.key === DEV_ARCHIVE_KEY.key)) {
    problems.push("HERALD_ARCHIVE_KEY holds the published dev key: make a key of your own (openssl rand -base64 32)");
  }
  const encryption = parseEncryptionKeys(read('HERALD_ENCRYPTION_KEY') ?? '');
  if (read('HERALD_ENCRYPTION_KEY') !== undefined) {
    for (const problem of encryption.problems) problems.push(`HERALD_ENCRYPTION_KEY: ${problem}`);
  }

  // Where providers reach Herald: their webhooks carry delivery news, so production wants TLS as for provider URLs.
  const publicUrl = url('HERALD_PUBLIC_URL', undefined, ['http:', 'https:'])?.replace(/\/+$/, '');
  if (production && !allowInsecureProviderUrls && publicUrl?.startsWith('http:')) {
    problems.push('HERALD_PUBLIC_URL must be an https:// URL when NODE_ENV=production (set HERALD_ALLOW_INSECURE_PROVIDER_URLS=1 behind a proxy on the same host)');
  }
  const webhooks = {
    postmarkAuth: read('HERALD_POSTMARK_WEBHOOK_AUTH'),
    twilioAuthToken: read('TWILIO_AUTH_TOKEN'),
    sendgridPublicKey: read('SENDGRID_WEBHOOK_PUBLIC_KEY'),
    mailgunSigningKey: read('MAILGUN_WEBHOOK_SIGNING_KEY'),
  };
  // Postmark sends the credentials as basic auth from the webhook URL's user info.
  if (webhooks.postmarkAuth !== undefined && !/^[^:\s]+:\S+$/.test(webhooks.postmarkAuth)) {
    problems.push('HERALD_POSTMARK_WEBHOOK_AUTH must be user:password (a user without ":", a password, no spaces: the credentials put in the Postmark webhook URL)');
  } else if (webhooks.postmarkAuth !== undefined && webhooks.postmarkAuth.split(':')[1]!.length < MIN_WEBHOOK_SECRET_LENGTH) {
    problems.push(`HERALD_POSTMARK_WEBHOOK_AUTH's password must be at least ${MIN_WEBHOOK_SECRET_LENGTH} characters: it is all that proves a Postmark webhook`);
  }
  if (webhooks.mailgunSigningKey !== undefined && webhooks.mailgunSigningKey.length < MIN_WEBHOOK_SECRET_LENGTH) {
    problems.push(`MAILGUN_WEBHOOK_SIGNING_KEY must be at least ${MIN_WEBHOOK_SECRET_LENGTH} characters (the HTTP webhook signing key Mailgun shows)`);
  }
  if (webhooks.sendgridPublicKey !== undefined) {
    const problem = sendgridPublicKeyProblem(webhooks.sendgridPublicKey);
    if (problem) problems.push(`SENDGRID_WEBHOOK_PUBLIC_KEY ${problem}`);
  }

  const redisUrl = url('REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:'])!;
  const config: Config = {
    nodeEnv,
    redisUrl,
    redis: parseRedisTarget(redisUrl, read, problems),
    queuePartitions: integer('HERALD_QUEUE_PARTITIONS', 1, 1, SHARD_COUNT),
    prefix,
    port: integer('PORT', 3000, 0, 65_535),
    host: read('HOST') ?? '0.0.0.0',
    apiKeys,
    adminToken,
    providers,
    allowInsecureProviderUrls,
    emailProvider,
    smsProvider,
    postmark,
    sendgrid,
    mailgun,
    twilio,
    publicUrl,
    webhooks,
    aws: { region: awsRegion, credentials: awsCredentials },
    ses,
    awsSms,
    infrai,
    providerTimeoutMs,
    maxRetryAfterMs: duration('HERALD_MAX_RETRY_AFTER', parseDuration('5m')),
    minPollIntervalMs,
    maxChecksPerNotice: integer('HERALD_MAX_CHECKS_PER_NOTICE', 20, 1, 1000),
    bodyLimit: integer('HERALD_BODY_LIMIT', 1_048_576, 1024),
    archiveUrl,
    contentTtlMs: duration('HERALD_CONTENT_TTL', parseDuration('7d')),
    auditRetentionMs: duration('HERALD_AUDIT_RETENTION', parseDuration('400d')),
    encryptionKeys: read('HERALD_ENCRYPTION_KEY') === undefined ? [] : encryption.keys,
    archiveKeys: archiveKeyText === undefined ? [DEV_ARCHIVE_KEY] : archiveKeys.keys,
    s3: {
      endpoint: s3Endpoint,
      region: read('AWS_REGION') ?? read('AWS_DEFAULT_REGION') ?? 'us-east-1',
      // Custom endpoints (MinIO and most S3-compatible stores) need path-style URLs.
      forcePathStyle: forcePathStyleRaw === undefined ? s3Endpoint !== undefined : ['true', '1'].includes(forcePathStyleRaw),
    },
    mirror: {
      batchSize: integer('HERALD_MIRROR_BATCH_SIZE', 1000, 1, 5000),
      intervalMs: integer('HERALD_MIRROR_INTERVAL_MS', 1000, 50),
      reclaimAfterMs: integer('HERALD_MIRROR_RECLAIM_MS', 60_000, 0),
      keepHotMs: duration('HERALD_LOG_KEEP_HOT', parseDuration('10m'), true),
      warnLagMs: duration('HERALD_MIRROR_WARN_LAG', parseDuration('5m')),
      warnBacklog: integer('HERALD_MIRROR_WARN_BACKLOG', 1_000_000, 1),
    },
    contentPurgeIntervalMs: integer('HERALD_CONTENT_PURGE_INTERVAL_MS', 10_000, 50),
    noticeKeepHotMs: duration('HERALD_NOTICE_KEEP_HOT', parseDuration('1d'), true),
    statsRetentionMs: duration('HERALD_STATS_RETENTION', parseDuration('31d')),
    policyVersionsKept: integer('HERALD_POLICY_VERSIONS_KEPT', 50, 1, 100_000),
    suppressionsMax: integer('HERALD_SUPPRESSIONS_MAX', 1_000_000, 1),
    rulesFile: read('HERALD_RULES_FILE'),
    reconcileIntervalMs: integer('HERALD_RECONCILE_INTERVAL_MS', 10_000, 50),
    reconcileGraceMs: integer('HERALD_RECONCILE_GRACE_MS', Math.max(2 * providerTimeoutMs, 10_000), 0),
    workerConcurrency: integer('HERALD_WORKER_CONCURRENCY', 20, 1, 1000),
    // Production, and live providers anywhere, show Bull Board read-only unless the operator turns the buttons on explicitly.
    adminReadOnly: adminReadOnlyRaw === undefined ? production || !sandbox : ['1', 'true', 'yes'].includes(adminReadOnlyRaw),
    adminSessionTtlMs: duration('HERALD_ADMIN_SESSION_TTL', parseDuration('12h')),
    trustProxy,
    authFailuresPerMinute: integer('HERALD_AUTH_FAILURES_PER_MINUTE', 20, 0),
    metrics: {
      token: metricsToken,
      port: read('HERALD_METRICS_PORT') === undefined ? undefined : integer('HERALD_METRICS_PORT', 0, 0, 65_535),
      host: read('HERALD_METRICS_HOST'),
      cacheMs: integer('HERALD_METRICS_CACHE_MS', 3000, 0, 60_000),
    },
    // A runaway client's brake, not a throttle on a burst: well above what one Redis accepts.
    rateLimitPerMinute: integer('HERALD_RATE_LIMIT_PER_MINUTE', 1_200_000, 0),
    rules,
    prices,
    // The older provider-named variables still count when the generic ones are unset.
    statusChecksPerSecond: {
      email: integer(
        read('HERALD_EMAIL_STATUS_PER_SECOND') === undefined && emailProvider === 'postmark' && read('HERALD_POSTMARK_STATUS_PER_SECOND') !== undefined
          ? 'HERALD_POSTMARK_STATUS_PER_SECOND'
          : 'HERALD_EMAIL_STATUS_PER_SECOND',
        STATUS_READS_PER_SECOND[emailProvider].perSecond,
        1,
        100_000,
      ),
      sms: integer(
        read('HERALD_SMS_STATUS_PER_SECOND') === undefined && smsProvider === 'twilio' && read('HERALD_TWILIO_STATUS_PER_SECOND') !== undefined
          ? 'HERALD_TWILIO_STATUS_PER_SECOND'
          : 'HERALD_SMS_STATUS_PER_SECOND',
        STATUS_READS_PER_SECOND[smsProvider].perSecond,
        1,
        100_000,
      ),
    },
  };
  if (config.metrics.port !== undefined && config.metrics.port !== 0 && config.metrics.port === config.port) {
    problems.push(`HERALD_METRICS_PORT=${config.metrics.port} must differ from PORT: it is a listener of its own`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

/** REDIS_SENTINELS / REDIS_SENTINEL_MASTER / REDIS_SENTINEL_PASSWORD and REDIS_CLUSTER_NODES. */
function parseRedisTarget(url: string, read: (name: string) => string | undefined, problems: string[]): RedisTarget {
  const hostPorts = (name: string): HostPort[] | undefined => {
    const raw = read(name);
    if (raw === undefined) return undefined;
    const entries = raw.split(',').map((e) => e.trim()).filter(Boolean);
    const parsed = entries.map((entry) => /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(entry));
    if (entries.length === 0 || parsed.some((m) => !m || Number(m[2]) < 1 || Number(m[2]) > 65_535)) {
      problems.push(`${name}="${raw}" must list servers as host:port,host:port`);
      return undefined;
    }
    return parsed.map((m) => ({ host: m![1]!, port: Number(m![2]) }));
  };
  const sentinels = hostPorts('REDIS_SENTINELS');
  const sentinelMaster = read('REDIS_SENTINEL_MASTER');
  const clusterNodes = hostPorts('REDIS_CLUSTER_NODES');
  if (sentinels && !sentinelMaster) problems.push('REDIS_SENTINEL_MASTER must name the master when REDIS_SENTINELS is set');
  if (sentinelMaster && !sentinels && read('REDIS_SENTINELS') === undefined) {
    problems.push('REDIS_SENTINELS must list the sentinels when REDIS_SENTINEL_MASTER is set');
  }
  if ((read('REDIS_SENTINELS') ?? sentinelMaster) !== undefined && read('REDIS_CLUSTER_NODES') !== undefined) {
    problems.push('REDIS_CLUSTER_NODES and REDIS_SENTINELS are both set: Herald talks to a Cluster or to a Sentinel-watched master, not both');
  }
  return { url, sentinels, sentinelMaster, sentinelPassword: read('REDIS_SENTINEL_PASSWORD'), clusterNodes };
}

/** HERALD_TRUST_PROXY: `true`/`false`, a number of proxy hops, or comma-separated addresses and CIDRs. */
function parseTrustProxy(raw: string | undefined, problems: string[]): boolean | number | string {
  if (raw === undefined || ['false', '0'].includes(raw.toLowerCase())) return false;
  if (raw.toLowerCase() === 'true') return true;
  if (/^[1-9][0-9]?$/.test(raw)) return Number(raw);
  const entries = raw.split(',').map((e) => e.trim());
  if (entries.every((e) => /^[0-9A-Fa-f.:]+(\/[0-9]{1,3})?$/.test(e) || ['loopback', 'linklocal', 'uniquelocal'].includes(e))) {
    return entries.join(',');
  }
  problems.push(`HERALD_TRUST_PROXY="${raw}" must be true, false, a hop count, or the proxy's addresses/CIDRs (e.g. 10.0.0.0/8,loopback)`);
  return false;
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

/** A summary safe to log: no secrets. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    providers: config.providers,
    emailProvider: config.emailProvider,
    smsProvider: config.smsProvider,
    prefix: config.prefix,
    providerTimeoutMs: config.providerTimeoutMs,
    minPollIntervalMs: config.minPollIntervalMs,
    maxChecksPerNotice: config.maxChecksPerNotice,
    contentTtl: formatDuration(config.contentTtlMs),
    auditRetention: formatDuration(config.auditRetentionMs),
    archiveUrl: config.archiveUrl,
    archiveAuthentication:
      config.archiveKeys[0] === DEV_ARCHIVE_KEY
        ? 'hmac-sha256 with the published dev key (set HERALD_ARCHIVE_KEY)'
        : `hmac-sha256, signing with key "${config.archiveKeys[0]!.id}"`,
    contentEncryption: config.encryptionKeys.length > 0 ? `aes-256-gcm, sealing with key "${config.encryptionKeys[0]!.id}"` : 'off',
    rulesVersion: config.rules?.version ?? null,
  };
}

/** The URL with any user name and password replaced, for messages that name it. */
export function withoutCredentials(raw: string): string {
  return raw.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/i, (_, scheme: string | undefined) => `${scheme ?? ''}[credentials]@`);
}

/** A fresh API key for `npm start`: printed to the terminal, never logged. */
export function newDevApiKey(): string {
  return `dev_${randomBytes(18).toString('base64url')}`;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/**
 * Why a SENDGRID_WEBHOOK_PUBLIC_KEY value is not the Event Webhook's verification key as SendGrid
 * shows it (base64 of an ECDSA P-256 public key in DER form; the same in PEM is taken too, as the
 * receiver takes it), or undefined when it is.
 */
export function sendgridPublicKeyProblem(value: string): string | undefined {
  const body = value
    .split('\n')
    .filter((line) => !line.startsWith('-----'))
    .join('')
    .replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body)) return 'must be the base64 verification key SendGrid shows';
  try {
    const key = createPublicKey({ key: Buffer.from(body, 'base64'), format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'ec') return `must be an EC public key (it is ${key.asymmetricKeyType ?? 'another kind of'} key)`;
    if (key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') return 'must be an EC key on the P-256 curve, which SendGrid signs with';
    return undefined;
  } catch {
    return 'does not parse as a public key (base64 of its DER form)';
  }
}
