import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { configProblems } from '../helpers/env.js';
import { formatDuration, parseDuration } from '../../src/durations.js';
import { sendgridWebhookKeys } from '@herald/sandbox/webhook-keys';

const problemsOf = configProblems;

describe('configuration', () => {
  it('defaults to sandbox providers and the SPEC defaults, and invents no API key (only `npm start` does)', () => {
    const config = loadConfig({});
    expect(config.providers).toBe('sandbox');
    expect(config.apiKeys).toEqual([]);
    expect(config).toMatchObject({
      prefix: 'herald',
      port: 3000,
      providerTimeoutMs: 5000,
      minPollIntervalMs: 30_000,
      maxChecksPerNotice: 20,
      bodyLimit: 1_048_576,
    });
    expect(config.contentTtlMs).toBe(7 * 86_400_000);
    expect(Object.isFrozen(config.postmark)).toBe(true);
  });

  it('sets burst-fit limits: status reads per provider from what it publishes, a per-key API limit that only stops a runaway client', () => {
    const postmark = loadConfig({});
    expect(postmark.statusChecksPerSecond).toEqual({ email: 300, sms: 100 });
    expect(postmark.rateLimitPerMinute).toBe(1_200_000);
    // The generic variables win; the older provider-named ones still count for their provider.
    expect(loadConfig({ HERALD_EMAIL_STATUS_PER_SECOND: '7', HERALD_POSTMARK_STATUS_PER_SECOND: '9' }).statusChecksPerSecond.email).toBe(7);
    expect(loadConfig({ HERALD_POSTMARK_STATUS_PER_SECOND: '9', HERALD_TWILIO_STATUS_PER_SECOND: '4' }).statusChecksPerSecond).toEqual({
      email: 9,
      sms: 4,
    });
    expect(problemsOf({ HERALD_SMS_STATUS_PER_SECOND: '0' }).join('\n')).toMatch(/HERALD_SMS_STATUS_PER_SECOND/);
  });

  it('parses the Redis topology and refuses Cluster and Sentinel together', () => {
    const sentinel = loadConfig({ REDIS_SENTINELS: '10.0.0.1:26379, [::1]:26380', REDIS_SENTINEL_MASTER: 'herald' });
    expect(sentinel.redis).toMatchObject({
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      sentinelMaster: 'herald',
      clusterNodes: undefined,
    });
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'a:7000,b:7001', HERALD_QUEUE_PARTITIONS: '6' })).toMatchObject({
      redis: {
        clusterNodes: [
          { host: 'a', port: 7000 },
          { host: 'b', port: 7001 },
        ],
      },
      queuePartitions: 6,
    });
    expect(problemsOf({ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_MASTER: 'm', REDIS_CLUSTER_NODES: 'b:2' }).join('\n')).toMatch(/both set/);
    expect(problemsOf({ REDIS_SENTINELS: 'a:1' }).join('\n')).toMatch(/REDIS_SENTINEL_MASTER/);
    expect(problemsOf({ REDIS_TLS_REJECT_UNAUTHORIZED: '0' }).join('\n')).toMatch(
      /REDIS_TLS_REJECT_UNAUTHORIZED applies to rediss:\/\/ only/,
    );
    expect(loadConfig({ REDIS_URL: 'rediss://r.example:6380', REDIS_TLS_REJECT_UNAUTHORIZED: 'false' }).redis.tls).toEqual({
      ca: undefined,
      rejectUnauthorized: false,
    });
    expect(loadConfig({ REDIS_URL: 'rediss://r.example:6380' }).redis.tls).toEqual({ ca: undefined, rejectUnauthorized: true });
    expect(problemsOf({ REDIS_CLUSTER_NODES: 'nohost' }).join('\n')).toMatch(/REDIS_CLUSTER_NODES/);
    expect(problemsOf({ HERALD_QUEUE_PARTITIONS: '0' }).join('\n')).toMatch(/HERALD_QUEUE_PARTITIONS/);
  });

  it('chooses the providers by name and asks only the chosen ones for credentials in live mode', () => {
    expect(problemsOf({ HERALD_EMAIL_PROVIDER: 'carrier-pigeon' }).join('\n')).toMatch(
      /HERALD_EMAIL_PROVIDER="carrier-pigeon" must be one of postmark, sendgrid/,
    );
    expect(problemsOf({ HERALD_SMS_PROVIDER: 'postmark' }).join('\n')).toMatch(/HERALD_SMS_PROVIDER/);
    const live = problemsOf({ HERALD_PROVIDERS: 'live', HERALD_API_KEYS: 'k'.repeat(20), HERALD_SMS_PROVIDER: 'aws-sms' }).join('\n');
    expect(live).toMatch(/POSTMARK_SERVER_TOKEN/);
    expect(live).not.toMatch(/TWILIO_/);
  });

  it('names every bad variable at once', () => {
    const problems = problemsOf({
      HERALD_PROVIDER_TIMEOUT_MS: 'soon',
      HERALD_CONTENT_TTL: '7 weeks',
      REDIS_URL: 'http://x',
      HERALD_PROVIDERS: 'real',
    });
    expect(problems.join('\n')).toMatch(/HERALD_PROVIDER_TIMEOUT_MS/);
    expect(problems.join('\n')).toMatch(/HERALD_CONTENT_TTL/);
    expect(problems.join('\n')).toMatch(/REDIS_URL/);
    expect(problems.join('\n')).toMatch(/HERALD_PROVIDERS/);
  });

  it('asks for credentials in live mode', () => {
    const problems = problemsOf({ HERALD_PROVIDERS: 'live' }).join('\n');
    for (const name of ['HERALD_API_KEYS', 'POSTMARK_SERVER_TOKEN', 'TWILIO_ACCOUNT_SID', 'TWILIO_FROM']) expect(problems).toContain(name);
  });

  it('refuses to start in production until retention and the archive are decided', () => {
    const problems = problemsOf({ NODE_ENV: 'production', HERALD_CONTENT_TTL: '3d' });
    expect(problems).toEqual(
      expect.arrayContaining([expect.stringMatching(/HERALD_AUDIT_RETENTION/), expect.stringMatching(/HERALD_ARCHIVE_URL/)]),
    );
    expect(problems.join()).not.toMatch(/HERALD_CONTENT_TTL/);
  });

  it('refuses the sandbox providers in production, naming HERALD_PROVIDERS', () => {
    const problems = problemsOf({ NODE_ENV: 'production' }).join('\n');
    expect(problems).toMatch(/HERALD_PROVIDERS must be "live" when NODE_ENV=production/);
    expect(problemsOf({ NODE_ENV: 'production', HERALD_PROVIDERS: 'sandbox' }).join()).toMatch(/HERALD_PROVIDERS/);
  });

  it('refuses plain http:// provider URLs in production unless HERALD_ALLOW_INSECURE_PROVIDER_URLS=1', () => {
    const env = {
      NODE_ENV: 'production',
      HERALD_PROVIDERS: 'live',
      POSTMARK_API_URL: 'http://127.0.0.1:8080',
      TWILIO_API_URL: 'http://127.0.0.1:8081',
    };
    const problems = problemsOf(env).join('\n');
    expect(problems).toMatch(/POSTMARK_API_URL must be an https:\/\/ URL/);
    expect(problems).toMatch(/TWILIO_API_URL must be an https:\/\/ URL/);
    const allowed = problemsOf({ ...env, HERALD_ALLOW_INSECURE_PROVIDER_URLS: '1' }).join('\n');
    expect(allowed).not.toMatch(/_API_URL/);
    // Outside production the emulators' http:// URLs are the normal case.
    expect(problemsOf({ HERALD_PROVIDERS: 'live', POSTMARK_API_URL: 'http://127.0.0.1:8080' }).join()).not.toMatch(/POSTMARK_API_URL/);
  });

  it('HERALD_WORKER_METRICS_PORT gives the worker a listener of its own, and none when unset', () => {
    expect(loadConfig({}).workerMetricsPort).toBeUndefined();
    expect(loadConfig({ HERALD_WORKER_METRICS_PORT: '9464' }).workerMetricsPort).toBe(9464);
    expect(problemsOf({ HERALD_WORKER_METRICS_PORT: 'nine' }).join('\n')).toMatch(
      /HERALD_WORKER_METRICS_PORT="nine" must be a whole number/,
    );
    expect(problemsOf({ HERALD_WORKER_METRICS_PORT: '70000' }).join('\n')).toMatch(/HERALD_WORKER_METRICS_PORT/);
  });

  describe('the webhook variables', () => {
    it('takes HERALD_POSTMARK_WEBHOOK_AUTH only as `user:password`', () => {
      expect(loadConfig({ HERALD_POSTMARK_WEBHOOK_AUTH: 'hooks:s3cret-Pw-of-16+chars' }).webhooks.postmarkAuth).toBe(
        'hooks:s3cret-Pw-of-16+chars',
      );
      for (const bad of ['nocolon', ':password-only', 'user:', 'us er:pw', 'user:pass word']) {
        expect(problemsOf({ HERALD_POSTMARK_WEBHOOK_AUTH: bad }).join('\n'), bad).toMatch(
          /HERALD_POSTMARK_WEBHOOK_AUTH must be user:password/,
        );
      }
    });

    it('takes SENDGRID_WEBHOOK_PUBLIC_KEY only as an EC P-256 public key in base64 DER, as SendGrid shows it (or PEM)', () => {
      const { publicKey: publicKeyBase64 } = sendgridWebhookKeys();
      expect(loadConfig({ SENDGRID_WEBHOOK_PUBLIC_KEY: publicKeyBase64 }).webhooks.sendgridPublicKey).toBe(publicKeyBase64);
      const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
      const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' })
        .publicKey.export({ type: 'spki', format: 'der' })
        .toString('base64');
      // The same key in PEM is taken too.
      const pem = `-----BEGIN PUBLIC KEY-----\n${publicKeyBase64}\n-----END PUBLIC KEY-----`;
      expect(problemsOf({ SENDGRID_WEBHOOK_PUBLIC_KEY: pem })).toEqual([]);
      const cases: [string, RegExp][] = [
        [rsa, /must be an EC public key \(it is rsa key\)/],
        [p384, /P-256/],
        ['not base64!', /must be the base64 verification key SendGrid shows/],
        ['bm90IGEga2V5', /does not parse as a public key/],
      ];
      for (const [value, message] of cases) {
        const problems = problemsOf({ SENDGRID_WEBHOOK_PUBLIC_KEY: value }).join('\n');
        expect(problems).toMatch(/^SENDGRID_WEBHOOK_PUBLIC_KEY /m);
        expect(problems).toMatch(message);
      }
    });

    it('refuses a plain http:// HERALD_PUBLIC_URL in production unless HERALD_ALLOW_INSECURE_PROVIDER_URLS=1', () => {
      const env = { NODE_ENV: 'production', HERALD_PROVIDERS: 'live', HERALD_PUBLIC_URL: 'http://herald.example' };
      expect(problemsOf(env).join('\n')).toMatch(/HERALD_PUBLIC_URL must be an https:\/\/ URL when NODE_ENV=production/);
      expect(problemsOf({ ...env, HERALD_PUBLIC_URL: 'https://herald.example/' }).join('\n')).not.toMatch(/HERALD_PUBLIC_URL/);
      expect(problemsOf({ ...env, HERALD_ALLOW_INSECURE_PROVIDER_URLS: '1' }).join('\n')).not.toMatch(/HERALD_PUBLIC_URL/);
      expect(problemsOf({ HERALD_PUBLIC_URL: 'ftp://herald.example' }).join('\n')).toMatch(
        /HERALD_PUBLIC_URL="ftp:\/\/herald.example" must be a URL/,
      );
      // Outside production the sandbox's http:// address is the normal case; the trailing slash goes.
      expect(loadConfig({ HERALD_PUBLIC_URL: 'http://127.0.0.1:3000/' }).publicUrl).toBe('http://127.0.0.1:3000');
    });
  });

  it('never echoes a password given inside a URL', () => {
    const problems = problemsOf({
      REDIS_URL: 'http://admin:s3cret-pw@redis.internal:6379',
      S3_ENDPOINT: 'ftp://key:other-secret@minio',
    }).join('\n');
    expect(problems).toMatch(/REDIS_URL="http:\/\/\[credentials\]@redis.internal:6379"/);
    expect(problems).toMatch(/S3_ENDPOINT/);
    expect(problems).not.toMatch(/s3cret-pw|other-secret|admin/);
  });

  it('reads durations with units', () => {
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('400d')).toBe(400 * 86_400_000);
    expect(formatDuration(parseDuration('12h'))).toBe('12h');
    expect(() => parseDuration('12')).toThrow(/duration/);
  });
});

describe('live mode never stands on a sandbox value', () => {
  const archiveKey = `k1:${Buffer.alloc(32, 5).toString('base64')}`;
  /** A live configuration that starts: Postmark and AWS End User Messaging SMS. */
  const live = (extra: Record<string, string> = {}) => ({
    HERALD_PROVIDERS: 'live',
    HERALD_API_KEYS: 'k'.repeat(20),
    HERALD_ARCHIVE_KEY: archiveKey,
    POSTMARK_SERVER_TOKEN: 'a-live-postmark-token',
    POSTMARK_FROM: 'notices@example.com',
    HERALD_SMS_PROVIDER: 'aws-sms',
    AWS_REGION: 'eu-west-1',
    AWS_SMS_ORIGINATION_IDENTITY: '+15005550006',
    AWS_SMS_CONFIGURATION_SET: 'herald',
    AWS_SMS_EVENTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/herald-sms',
    AWS_SMS_EVENTS_TOPIC_ARN: 'arn:aws:sns:eu-west-1:123456789012:herald-sms',
    ...extra,
  });

  it("leaves a provider it does not use without a secret: Twilio's token is no sandbox default, and its route is off", async () => {
    const { webhookReceivers } = await import('../../src/webhooks/index.js');
    const config = loadConfig(live({ HERALD_PUBLIC_URL: 'https://herald.example' }));
    expect(config.twilio.authToken).toBe('');
    expect(config.webhooks.twilioAuthToken).toBeUndefined();
    expect(webhookReceivers(config).map((r) => r.provider)).toEqual([]);
    // Sandbox mode keeps its stand-ins for the emulators, but a route still needs its secret set.
    const sandbox = loadConfig({ HERALD_PUBLIC_URL: 'https://herald.example' });
    expect(sandbox.twilio.authToken).toBe('sandbox-auth-token');
    expect(webhookReceivers(sandbox).map((r) => r.provider)).toEqual([]);
  });

  it('turns a route on only for the chosen provider of its channel, with its secret set', async () => {
    const { webhookReceivers } = await import('../../src/webhooks/index.js');
    const secrets = {
      HERALD_PUBLIC_URL: 'https://herald.example',
      TWILIO_AUTH_TOKEN: 'an-explicit-twilio-token',
      HERALD_POSTMARK_WEBHOOK_AUTH: 'hooks:a-postmark-password-long-enough',
      SENDGRID_WEBHOOK_PUBLIC_KEY: sendgridWebhookKeys().publicKey,
      MAILGUN_WEBHOOK_SIGNING_KEY: 'a-mailgun-signing-key-0123',
    };
    const routes = (env: Record<string, string>) =>
      webhookReceivers(loadConfig({ ...secrets, ...env }))
        .map((r) => r.provider)
        .sort();
    expect(routes({})).toEqual(['postmark', 'twilio']);
    expect(routes({ HERALD_EMAIL_PROVIDER: 'sendgrid' })).toEqual(['sendgrid', 'twilio']);
    expect(routes({ HERALD_EMAIL_PROVIDER: 'mailgun', HERALD_SMS_PROVIDER: 'aws-sms' })).toEqual(['mailgun']);
    expect(routes({ HERALD_EMAIL_PROVIDER: 'ses', HERALD_SMS_PROVIDER: 'infrai' })).toEqual([]);
  });

  it('refuses a published sandbox value as a live secret, wherever it is set', () => {
    expect(problemsOf(live())).toEqual([]);
    expect(problemsOf(live({ POSTMARK_SERVER_TOKEN: 'sandbox-server-token' }))).toEqual([
      "POSTMARK_SERVER_TOKEN holds the sandbox's published value: set the live one",
    ]);
    expect(problemsOf(live({ TWILIO_AUTH_TOKEN: 'sandbox-auth-token' }))).toEqual([
      "TWILIO_AUTH_TOKEN holds the sandbox's published value: set the live one",
    ]);
    expect(problemsOf(live({ AWS_ACCESS_KEY_ID: 'sandbox-access-key', AWS_SECRET_ACCESS_KEY: 'sandbox-secret-key' }))).toEqual([
      "AWS_SECRET_ACCESS_KEY holds the sandbox's published value: set the live one",
    ]);
  });

  it('requires an archive key of its own with live providers, in production or not', () => {
    const { HERALD_ARCHIVE_KEY: _, ...withoutKey } = live();
    expect(problemsOf(withoutKey)).toEqual(['HERALD_ARCHIVE_KEY must be set when HERALD_PROVIDERS=live']);
    const devKey = `dev:${Buffer.from('herald-dev-archive-key-unsafe!!!').toString('base64')}`;
    expect(problemsOf(live({ HERALD_ARCHIVE_KEY: devKey })).join('\n')).toMatch(/HERALD_ARCHIVE_KEY holds the published dev key/);
    // The sandbox may use the dev key: nothing it seals is a real trail.
    expect(problemsOf({})).toEqual([]);
  });

  it('shows Bull Board read-only by default with live providers', () => {
    expect(loadConfig(live()).adminReadOnly).toBe(true);
    expect(loadConfig(live({ HERALD_ADMIN_READ_ONLY: 'false' })).adminReadOnly).toBe(false);
    expect(loadConfig({}).adminReadOnly).toBe(false);
  });

  it('requires webhook secrets long enough not to be guessed', () => {
    expect(problemsOf({ HERALD_POSTMARK_WEBHOOK_AUTH: 'hooks:x' })).toEqual([
      "HERALD_POSTMARK_WEBHOOK_AUTH's password must be at least 16 characters: it is all that proves a Postmark webhook",
    ]);
    expect(problemsOf({ MAILGUN_WEBHOOK_SIGNING_KEY: 'short' })).toEqual([
      'MAILGUN_WEBHOOK_SIGNING_KEY must be at least 16 characters (the HTTP webhook signing key Mailgun shows)',
    ]);
  });
});
