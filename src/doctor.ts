/**
 * `herald doctor`: checks what a Herald process needs before it can be trusted with notices —
 * its configuration, Redis (reachable, its topology, settings that lose notices), the clock
 * against Redis `TIME`, the archive (a write, a read back and a delete), and the providers (the
 * sandbox, or an authenticated call that sends nothing) — and says what to fix.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { RedisClient } from './store/redis.js';
import { ConfigError, loadConfig, withoutCredentials, type Config } from './config.js';
import { openObjectStorage } from './archive/open.js';
import { checkFeedQueues, POISON_RECEIVES } from './providers/feed.js';
import { createEmailProvider, createSmsProvider, credentialVariables, emailUrl, feedSources, smsUrl } from './providers/registry.js';
import { ProviderError } from './providers/types.js';
import { connectRedis, describeRedisTarget, waitReady } from './store/redis.js';
import { timeLimit } from './time-limit.js';
import { idleWebhookSecrets } from './webhooks/index.js';

export type Verdict = 'ok' | 'warn' | 'fail';

export interface Finding {
  verdict: Verdict;
  /** What was checked: `configuration`, `redis`, `clock`, `archive`, `postmark`, `twilio`. */
  area: string;
  what: string;
  /** What to do about it, for `warn` and `fail`. */
  fix?: string;
}

/** How far this machine's clock may be from Redis's before decisions taken here could come early. */
export const CLOCK_SKEW_WARN_MS = 250;
export const CLOCK_SKEW_FAIL_MS = 1_000;
const REDIS_WAIT_MS = 3_000;
const ARCHIVE_WAIT_MS = 20_000;

/** Runs every check; never throws. */
export async function diagnose(env: Record<string, string | undefined>, now: () => number = Date.now): Promise<Finding[]> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.problems.map((problem) => ({ verdict: 'fail', area: 'configuration', what: problem, fix: 'set the variable it names' }));
  }
  const findings: Finding[] = [
    {
      verdict: 'ok',
      area: 'configuration',
      what: `${config.providers} providers, prefix "${config.prefix}", ${config.nodeEnv}${config.apiKeys.length === 0 ? ', no API key (the web will refuse to start)' : ''}`,
      ...(config.apiKeys.length === 0 ? { verdict: 'warn' as const, fix: 'set HERALD_API_KEYS for the web process' } : {}),
    },
  ];
  findings.push(...checkCarelessDefaults(config));
  findings.push(...(await checkRedis(config, now)));
  findings.push(await checkArchive(config));
  findings.push(...(await checkProviders(config)));
  return findings;
}

/**
 * What a configuration that starts may still get wrong with live providers: the checks that only
 * production turns on, Bull Board's buttons, an open /metrics, a webhook secret that opens no route.
 * (A published sandbox value as a live secret, or the dev archive key, does not start at all.)
 */
export function checkCarelessDefaults(config: Config): Finding[] {
  const findings: Finding[] = [];
  const live = config.providers === 'live';
  if (live && config.nodeEnv !== 'production') {
    findings.push({
      verdict: 'warn',
      area: 'configuration',
      what: `live providers with NODE_ENV=${config.nodeEnv}: the production checks (retention set explicitly, https provider and public URLs) are off`,
      fix: 'set NODE_ENV=production',
    });
  }
  if (live && config.adminToken !== undefined && !config.adminReadOnly) {
    findings.push({
      verdict: 'warn',
      area: 'configuration',
      what: "Bull Board's retry, remove and promote buttons are on: the admin token can change the queues of live notices",
      fix: 'unset HERALD_ADMIN_READ_ONLY (read-only is the default with live providers) unless an operator needs them',
    });
  }
  if (live && config.metrics.port === undefined && config.metrics.token === undefined) {
    findings.push({
      verdict: 'warn',
      area: 'configuration',
      what: '/metrics is open on the web listener: whoever reaches the web reads the queues and the outcomes',
      fix: 'set HERALD_METRICS_TOKEN, or HERALD_METRICS_PORT for a listener of its own',
    });
  }
  for (const { variable, why } of idleWebhookSecrets(config)) {
    findings.push({
      verdict: 'warn',
      area: 'webhooks',
      what: `${variable} is set, but its route is off: ${why}`,
      fix: `unset ${variable}, or choose its provider`,
    });
  }
  return findings;
}

async function checkRedis(config: Config, now: () => number): Promise<Finding[]> {
  const where = describeRedisTarget(config.redis);
  const redis = connectRedis(config.redis, 'web', 'herald-doctor');
  redis.on('error', () => undefined);
  try {
    try {
      await waitReady(redis, REDIS_WAIT_MS);
    } catch {
      return [
        {
          verdict: 'fail',
          area: 'redis',
          what: `no answer at ${where} within ${REDIS_WAIT_MS / 1000} s`,
          fix: 'start Redis, or point REDIS_URL at it',
        },
      ];
    }
    const info = parseInfo(await redis.info());
    const findings: Finding[] = [];
    const mode = info.cluster_enabled === '1' ? 'cluster node' : (info.redis_mode ?? 'standalone');
    const role = info.role ?? 'unknown';
    findings.push({
      verdict: role === 'master' ? 'ok' : 'fail',
      area: 'redis',
      what: `Redis ${info.redis_version ?? '?'} (${mode}, ${role}) at ${where}`,
      ...(role === 'master' ? {} : { fix: 'point REDIS_URL at the master: a replica refuses writes' }),
    });
    const policy = info.maxmemory_policy ?? 'noeviction';
    findings.push(
      policy === 'noeviction'
        ? { verdict: 'ok', area: 'redis', what: 'maxmemory-policy noeviction' }
        : {
            verdict: 'fail',
            area: 'redis',
            what: `maxmemory-policy ${policy}: Redis may evict notices and their log`,
            fix: 'CONFIG SET maxmemory-policy noeviction (and in redis.conf)',
          },
    );
    const aof = info.aof_enabled === '1';
    findings.push(
      aof
        ? { verdict: 'ok', area: 'redis', what: 'append-only file on' }
        : {
            verdict: 'warn',
            area: 'redis',
            what: 'no append-only file: a crash of Redis loses every notice it held',
            fix: 'appendonly yes, with appendfsync always (or everysec, which may lose the last second)',
          },
    );
    const listpack = await checkListpackValue(redis);
    if (listpack) findings.push(listpack);
    findings.push(await checkClock(redis, now));
    return findings;
  } finally {
    redis.disconnect();
  }
}

/**
 * BullMQ keeps a job in a hash whose `opts` field (the job ID, the delay) is longer than Redis's
 * default 64-byte `hash-max-listpack-value`, so each of a pending notice's delayed jobs is a
 * hash table (about 720 B) instead of a listpack (about 340 B). At 128 both fit: some 750 B less
 * per pending notice. Undefined where CONFIG is not allowed (a managed Redis): nothing to say.
 */
export const LISTPACK_VALUE_WANTED = 128;

async function checkListpackValue(redis: RedisClient): Promise<Finding | undefined> {
  let value: number;
  try {
    const reply = (await redis.config('GET', 'hash-max-listpack-value')) as string[];
    value = Number(reply[1]);
  } catch {
    return undefined;
  }
  if (!Number.isFinite(value)) return undefined;
  if (value >= LISTPACK_VALUE_WANTED) return { verdict: 'ok', area: 'redis', what: `hash-max-listpack-value ${value}` };
  return {
    verdict: 'warn',
    area: 'redis',
    what: `hash-max-listpack-value ${value}: each pending notice's delayed jobs take about 750 B more than they need`,
    fix: `CONFIG SET hash-max-listpack-value ${LISTPACK_VALUE_WANTED} (and in redis.conf)`,
  };
}

async function checkClock(redis: RedisClient, now: () => number): Promise<Finding> {
  const before = now();
  const [seconds, micros] = await redis.time();
  const after = now();
  const redisMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const skew = Math.round(redisMs - (before + after) / 2);
  const what = `this machine's clock is ${Math.abs(skew)} ms ${skew >= 0 ? 'behind' : 'ahead of'} Redis TIME`;
  if (Math.abs(skew) <= CLOCK_SKEW_WARN_MS) return { verdict: 'ok', area: 'clock', what };
  return {
    verdict: Math.abs(skew) > CLOCK_SKEW_FAIL_MS ? 'fail' : 'warn',
    area: 'clock',
    what: `${what}: a worker's deadlines are checked against its own clock`,
    fix: 'synchronise the clocks (NTP, chrony) of every Herald machine',
  };
}

async function checkArchive(config: Config): Promise<Finding> {
  const where = withoutCredentials(config.archiveUrl);
  const storage = openObjectStorage(config);
  const key = `${config.prefix}/doctor/probe-${randomBytes(6).toString('hex')}`;
  const body = Buffer.from(`herald doctor ${new Date().toISOString()}\n`);
  const sha = createHash('sha256').update(body).digest('hex');
  try {
    await timeLimit(
      (async () => {
        await storage.put(key, body, sha, 'doctor-probe');
        const read = await storage.get(key);
        if (!read || !read.body.equals(body)) throw new Error('the object read back differs from the one written');
        await storage.delete([key]);
      })(),
      ARCHIVE_WAIT_MS,
      `no answer within ${ARCHIVE_WAIT_MS / 1000} s`,
    );
    return { verdict: 'ok', area: 'archive', what: `wrote, read back and deleted an object at ${where}` };
  } catch (error) {
    return {
      verdict: 'fail',
      area: 'archive',
      what: `cannot write and read ${where}: ${(error as Error).message}`,
      fix: 'check HERALD_ARCHIVE_URL (a writable directory, or an existing bucket), S3_ENDPOINT and the AWS credentials',
    };
  } finally {
    await storage.close().catch(() => undefined);
  }
}

async function checkProviders(config: Config): Promise<Finding[]> {
  const urls = { email: emailUrl(config), sms: smsUrl(config) };
  if (urls.email === undefined || urls.sms === undefined) {
    return [
      { verdict: 'ok', area: 'providers', what: 'sandbox: the worker runs its own emulators; nothing reaches a real inbox or phone' },
    ];
  }
  const deps = { sandboxUrl: undefined };
  const email = createEmailProvider(config, deps);
  const sms = createSmsProvider(config, deps);
  const credentials = credentialVariables(config);
  const sandboxNote = config.providers === 'sandbox' ? ' (sandbox emulator)' : '';
  const probe = async (area: string, url: string, verify: () => Promise<string>, credentials: string): Promise<Finding> => {
    try {
      return { verdict: 'ok', area, what: `${await verify()} at ${withoutCredentials(url)}${sandboxNote}` };
    } catch (error) {
      const kind = error instanceof ProviderError ? error.kind : 'error';
      const refused = error instanceof ProviderError && (error.httpStatus === 401 || error.httpStatus === 403);
      return {
        verdict: 'fail',
        area,
        what: `${withoutCredentials(url)} ${refused ? 'refused the credentials' : `answered ${kind}`}${error instanceof ProviderError && error.httpStatus ? ` (HTTP ${error.httpStatus})` : ''}`,
        fix: refused ? `check ${credentials}` : `check that ${withoutCredentials(url)} is reachable from here`,
      };
    }
  };
  const findings = await Promise.all([
    probe(config.emailProvider, urls.email, () => email.verify(), credentials.email),
    probe(config.smsProvider, urls.sms, () => sms.verify(), credentials.sms),
  ]);
  return [...findings, ...(await checkEventQueues(config))];
}

/** The feed providers' events queues (SES, AWS SMS): without them Herald never learns a delivery. */
async function checkEventQueues(config: Config): Promise<Finding[]> {
  let feeds: ReturnType<typeof feedSources>;
  try {
    feeds = feedSources(config, { sandboxUrl: undefined });
  } catch (error) {
    return [
      { verdict: 'fail', area: 'events queue', what: (error as Error).message, fix: 'set the events queue URL or AWS_ENDPOINT_URL_SQS' },
    ];
  }
  if (!feeds) return [];
  try {
    const queues = await checkFeedQueues(feeds.sources, feeds.sqs);
    return queues.map((q): Finding => {
      const what = `${q.provider} events at ${withoutCredentials(q.queueUrl)}: ${q.waiting} waiting`;
      if (q.redrivePolicy) return { verdict: 'ok', area: 'events queue', what: `${what}, redrive policy set` };
      // Without one, a message Herald cannot read comes back every visibility timeout until Herald deletes it.
      return {
        verdict: config.providers === 'live' ? 'fail' : 'warn',
        area: 'events queue',
        what: `${what}, no RedrivePolicy: a message Herald cannot read is received ${POISON_RECEIVES} times, then deleted unread`,
        fix: 'give the queue a dead-letter queue (an SQS RedrivePolicy) to keep such messages for a look',
      };
    });
  } catch (error) {
    const kind = error instanceof ProviderError ? error.kind : 'error';
    return [
      {
        verdict: 'fail',
        area: 'events queue',
        what: `${feeds.sources.map((s) => withoutCredentials(s.queueUrl)).join(', ')} answered ${kind}: ${(error as Error).message}`,
        fix: 'check SES_EVENTS_QUEUE_URL / AWS_SMS_EVENTS_QUEUE_URL, AWS_ENDPOINT_URL_SQS and that the credentials may read the queue',
      },
    ];
  }
}

/** The report as lines: one per finding, with its fix. */
export function formatFindings(findings: readonly Finding[]): string[] {
  const label: Record<Verdict, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' };
  const lines = findings.map(
    (f) => `${label[f.verdict]}  ${f.area.padEnd(13)} ${f.what}${f.fix ? `\n      ${''.padEnd(13)} fix: ${f.fix}` : ''}`,
  );
  const failed = findings.filter((f) => f.verdict === 'fail').length;
  const warned = findings.filter((f) => f.verdict === 'warn').length;
  lines.push(
    failed === 0
      ? `Herald can run here${warned ? ` (${warned} warning${warned > 1 ? 's' : ''})` : ''}.`
      : `${failed} problem${failed > 1 ? 's' : ''} to fix.`,
  );
  return lines;
}

function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1).trim();
  }
  return fields;
}
