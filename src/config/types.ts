/** The shape of Herald's configuration (src/config.ts reads it from the environment). */
import type { EncryptionKey } from '../crypto.js';
import type { Rules } from '../policy/rules.js';
import type { EmailProviderName, SmsProviderName } from '../providers/names.js';

/** Herald's configuration, read once from the environment at start-up and frozen. */
export interface Config {
  readonly nodeEnv: string;
  /** REDIS_URL: one node, or the credentials and TLS of the Sentinel / Cluster connections. */
  readonly redisUrl: string;
  /** Which Redis topology Herald connects to. */
  readonly redis: RedisTarget;
  /**
   * HERALD_QUEUE_PARTITIONS: how many partitions each notice queue has, at most the
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
  /** `POST /v1/notices/batch`: HERALD_BATCH_MAX notices at most, HERALD_BATCH_BODY_LIMIT bytes at most. */
  readonly batch: { readonly max: number; readonly bodyLimit: number };
  readonly archiveUrl: string;
  readonly contentTtlMs: number;
  readonly auditRetentionMs: number;
  /** Content encryption keys (HERALD_ENCRYPTION_KEY); the first seals, all open. Empty: content is stored as is. */
  readonly encryptionKeys: readonly EncryptionKey[];
  /** Archive authentication keys (HERALD_ARCHIVE_KEY); the first signs, all verify. DEV_ARCHIVE_KEY when unset outside production. */
  readonly archiveKeys: readonly EncryptionKey[];
  /**
   * Keys of the address lookup's HMAC (HERALD_ADDRESS_KEY; derived from each archive key when
   * unset, src/notice/address-lookup.ts); the first indexes, all are looked up.
   */
  readonly addressKeys: readonly EncryptionKey[];
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
  /** The worker's own listener (on `host`) for its /metrics and /healthz; undefined: none. */
  readonly workerMetricsPort: number | undefined;
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
  /** Events to callers (src/events/): retries and which endpoint URLs are allowed. */
  readonly events: {
    /** HERALD_EVENT_RETRY_FOR: how long after the event a failing delivery is still retried. */
    readonly retryForMs: number;
    /** HERALD_EVENT_RETRY_BASE_MS: the first retry's delay; the n-th waits about this × 2^(n−1), at most an hour. */
    readonly retryBaseMs: number;
    /** HERALD_ALLOW_PRIVATE_EVENT_URLS: endpoints may resolve to loopback, link-local or private addresses. */
    readonly allowPrivateUrls: boolean;
    /** Production takes `https://` endpoints only. */
    readonly httpsOnly: boolean;
  };
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
  /** A rediss:// URL's TLS: REDIS_TLS_CA_FILE's certificates and REDIS_TLS_REJECT_UNAUTHORIZED; undefined without TLS. */
  readonly tls?: RedisTls | undefined;
}

export interface RedisTls {
  readonly ca: string | undefined;
  readonly rejectUnauthorized: boolean;
}

/** Unit prices per provider call, in one currency. */
export interface Prices {
  readonly currency: string;
  readonly email: { readonly send: number; readonly status: number };
  readonly sms: { readonly segment: number; readonly status: number };
}
