import { spawn } from 'node:child_process';
import { CreateQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_ACCOUNT_ID, SANDBOX_QUEUE_NAMES, SANDBOX_TOPIC_ARNS, startSandbox, type Sandbox } from '@herald/sandbox';
import { REDIS_URL, TEST_API_KEY, TEST_ARCHIVE_KEY, testArchiveUrl, testPrefix } from '../helpers/env.js';
import { runHerald } from '../helpers/archive.js';
import { RedisServer } from '../helpers/redis-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(() => sandbox.close());

/** A healthy live configuration whose providers are the emulators (allowed outside production). */
const healthy = () => ({
  REDIS_URL,
  HERALD_PREFIX: testPrefix('doctor'),
  HERALD_API_KEYS: TEST_API_KEY,
  HERALD_ARCHIVE_URL: testArchiveUrl(),
  HERALD_PROVIDERS: 'live',
  HERALD_ARCHIVE_KEY: TEST_ARCHIVE_KEY,
  POSTMARK_SERVER_TOKEN: 'doctor-token',
  POSTMARK_FROM: 'notices@example.com',
  POSTMARK_API_URL: sandbox.url,
  TWILIO_ACCOUNT_SID: 'AC00000000000000000000000000000001',
  TWILIO_AUTH_TOKEN: 'doctor-auth',
  TWILIO_FROM: '+15005550006',
  TWILIO_API_URL: sandbox.url,
});
const line = (out: string, area: string) => out.split('\n').find((l) => l.slice(6).startsWith(area)) ?? '';

describe('herald doctor', () => {
  it('fails a live configuration holding a sandbox secret or the published dev archive key', async () => {
    const devKey = `dev:${Buffer.from('herald-dev-archive-key-unsafe!!!').toString('base64')}`;
    const { code, stdout } = await runHerald(['doctor'], {
      ...healthy(),
      TWILIO_AUTH_TOKEN: 'sandbox-auth-token',
      HERALD_ARCHIVE_KEY: devKey,
    });
    expect(code).toBe(1);
    expect(stdout).toMatch(/^FAIL +configuration +TWILIO_AUTH_TOKEN holds the sandbox's published value: set the live one$/m);
    expect(stdout).toMatch(/^FAIL +configuration +HERALD_ARCHIVE_KEY holds the published dev key/m);
    const { stdout: unset } = await runHerald(['doctor'], { ...healthy(), HERALD_ARCHIVE_KEY: '' });
    expect(unset).toMatch(/^FAIL +configuration +HERALD_ARCHIVE_KEY must be set when HERALD_PROVIDERS=live$/m);
  });

  it('warns of the careless defaults of a live configuration outside production', async () => {
    const { code, stdout } = await runHerald(['doctor'], {
      ...healthy(),
      HERALD_ADMIN_TOKEN: 'an-admin-token-of-the-doctor',
      HERALD_ADMIN_READ_ONLY: 'false',
      MAILGUN_WEBHOOK_SIGNING_KEY: 'a-mailgun-signing-key-not-used',
    });
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /^WARN +configuration +live providers with NODE_ENV=development: the production checks[^\n]*\n +fix: set NODE_ENV=production/m,
    );
    expect(stdout).toMatch(/^WARN +configuration +Bull Board's retry, remove and promote buttons are on/m);
    expect(stdout).toMatch(/^WARN +configuration +\/metrics is open on the web listener/m);
    expect(stdout).toMatch(
      /^WARN +webhooks +MAILGUN_WEBHOOK_SIGNING_KEY is set, but its route is off: HERALD_EMAIL_PROVIDER is postmark, not mailgun/m,
    );
    const { stdout: careful } = await runHerald(['doctor'], {
      ...healthy(),
      NODE_ENV: 'production',
      HERALD_CONTENT_TTL: '7d',
      HERALD_AUDIT_RETENTION: '400d',
      HERALD_METRICS_TOKEN: 'a-metrics-token-of-the-doctor',
      HERALD_ALLOW_INSECURE_PROVIDER_URLS: '1',
    });
    expect(careful).not.toMatch(/^WARN +(configuration|webhooks)/m);
  });

  it('passes a healthy configuration: Redis, the clock, an archive round trip, and an authenticated call to each provider that sends nothing', async () => {
    const { code, stdout } = await runHerald(['doctor'], healthy());
    expect(code).toBe(0);
    expect(line(stdout, 'configuration')).toMatch(/^ok +configuration +live providers/);
    expect(stdout).toMatch(/^ok +redis +Redis \d+\.\d+\.\d+ \(standalone, master\)/m);
    expect(line(stdout, 'clock')).toMatch(/^ok +clock +this machine's clock is \d+ ms/);
    expect(line(stdout, 'archive')).toMatch(/^ok +archive +wrote, read back and deleted an object at file:\/\//);
    expect(line(stdout, 'postmark')).toMatch(/^ok +postmark +server "Herald sandbox"/);
    expect(line(stdout, 'twilio')).toMatch(/^ok +twilio +account "Herald sandbox" \(active\)/);
    expect(stdout).toMatch(/^Herald can run here/m);
    // The probes sent nothing.
    expect(sandbox.emails()).toEqual([]);
    expect(sandbox.sms()).toEqual([]);
    expect(
      sandbox
        .requests()
        .map((r) => r.operation)
        .sort(),
    ).toEqual(expect.arrayContaining(['postmark.server', 'twilio.account']));
  });

  it('names an unreachable Redis and a broken archive URL, says what to fix, and exits 1 from the installed binary', async () => {
    const env = { ...healthy(), REDIS_URL: 'redis://:s3cret@127.0.0.1:1', HERALD_ARCHIVE_URL: 'file:///etc/hostname/archive' };
    const child = spawn(process.execPath, ['dist/src/cli.js', 'doctor'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(stdout).toMatch(
      /^FAIL +redis +no answer at redis:\/\/\[credentials\]@127\.0\.0\.1:1 within 3 s\n +fix: start Redis, or point REDIS_URL at it/m,
    );
    expect(stdout).toMatch(
      /^FAIL +archive +cannot write and read file:\/\/\/etc\/hostname\/archive: ENOTDIR[^\n]*\n +fix: check HERALD_ARCHIVE_URL/m,
    );
    expect(stdout).not.toContain('s3cret');
    expect(stdout).toMatch(/^2 problems to fix\.$/m);
  });

  it('names refused provider credentials', async () => {
    const { code, stdout } = await runHerald(['doctor'], {
      ...healthy(),
      POSTMARK_SERVER_TOKEN: 'bad-token',
      TWILIO_AUTH_TOKEN: 'bad-token',
    });
    expect(code).toBe(1);
    expect(stdout).toMatch(/^FAIL +postmark +\S+ refused the credentials \(HTTP 401\)\n +fix: check POSTMARK_SERVER_TOKEN/m);
    expect(stdout).toMatch(
      /^FAIL +twilio +\S+ refused the credentials \(HTTP 401\)\n +fix: check TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN/m,
    );
  });

  it('reports a bad configuration as what to fix instead of stopping at it', async () => {
    const { code, stdout } = await runHerald(['doctor'], { ...healthy(), HERALD_CONTENT_TTL: 'a while', POSTMARK_FROM: '' });
    expect(code).toBe(1);
    expect(stdout).toMatch(/^FAIL +configuration +HERALD_CONTENT_TTL/m);
    expect(stdout).toMatch(/^FAIL +configuration +POSTMARK_FROM must be set/m);
  });
});

describe("the Procfile's release phase", () => {
  /** The Procfile's `release:` command, run as a platform runs it: through a shell, in the app's directory. */
  const release = async (env: Record<string, string>): Promise<{ code: number | null; stdout: string }> => {
    const procfile = await readFile(new URL('Procfile', `file://${ROOT}`), 'utf8');
    const command = /^release:\s*(.+)$/m.exec(procfile)?.[1];
    expect(command).toBe('node dist/src/cli.js doctor');
    const child = spawn('sh', ['-c', command!], {
      cwd: ROOT,
      env: { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, ...env },
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    return { code, stdout };
  };

  it('passes a healthy configuration and fails the release on a bad one', async () => {
    expect((await release(healthy())).code).toBe(0);
    const bad = await release({ ...healthy(), HERALD_CONTENT_TTL: 'a while' });
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/^FAIL +configuration +HERALD_CONTENT_TTL/m);
  });
});

describe("herald doctor and the feed providers' events queues", () => {
  /** A live SES configuration whose services are the emulators; its events queue as given. */
  const liveSes = (queueUrl: string) => ({
    ...healthy(),
    HERALD_EMAIL_PROVIDER: 'ses',
    SES_FROM: 'notices@example.com',
    SES_CONFIGURATION_SET: 'herald',
    SES_EVENTS_QUEUE_URL: queueUrl,
    SES_EVENTS_TOPIC_ARN: SANDBOX_TOPIC_ARNS.ses,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'AKIADOCTOR',
    AWS_SECRET_ACCESS_KEY: 'doctor-secret',
    AWS_ENDPOINT_URL: sandbox.url,
  });

  it('passes an events queue with a redrive policy, and fails one without (a warning outside live mode)', async () => {
    const sqs = new SQSClient({
      region: 'us-east-1',
      credentials: { accessKeyId: 'AKIADOCTOR', secretAccessKey: 'doctor-secret' },
      endpoint: sandbox.url,
      maxAttempts: 1,
    });
    const bare = (await sqs.send(new CreateQueueCommand({ QueueName: 'doctor-no-redrive' }))).QueueUrl!;
    sqs.destroy();

    const guarded = await runHerald(['doctor'], liveSes(`${sandbox.url}/${SANDBOX_ACCOUNT_ID}/${SANDBOX_QUEUE_NAMES.ses}`));
    expect(guarded.code).toBe(0);
    expect(guarded.stdout).toMatch(/^ok +events queue +ses events at \S+herald-ses-events: \d+ waiting, redrive policy set$/m);

    const live = await runHerald(['doctor'], liveSes(bare));
    expect(live.code).toBe(1);
    expect(live.stdout).toMatch(
      /^FAIL +events queue +ses events at \S+doctor-no-redrive: \d+ waiting, no RedrivePolicy: a message Herald cannot read is received 5 times, then deleted unread\n +fix: give the queue a dead-letter queue/m,
    );

    const sandboxMode = await runHerald(['doctor'], { ...liveSes(bare), HERALD_PROVIDERS: 'sandbox' });
    expect(sandboxMode.stdout).toMatch(/^WARN +events queue +ses events at \S+doctor-no-redrive: \d+ waiting, no RedrivePolicy/m);
  });
});

describe('herald doctor on Redis memory settings', () => {
  it('warns when hash-max-listpack-value keeps BullMQ jobs out of listpacks, and is content at 128', async () => {
    const small = await RedisServer.start({ args: ['--hash-max-listpack-value', '64'] });
    const fitting = await RedisServer.start({ args: ['--hash-max-listpack-value', '128'] });
    try {
      const warned = await runHerald(['doctor'], { ...healthy(), REDIS_URL: small.url });
      expect(warned.code).toBe(0);
      expect(warned.stdout).toMatch(
        /^WARN +redis +hash-max-listpack-value 64: each pending notice's delayed jobs take about 750 B more[^\n]*\n +fix: CONFIG SET hash-max-listpack-value 128/m,
      );
      const content = await runHerald(['doctor'], { ...healthy(), REDIS_URL: fitting.url });
      expect(content.stdout).toMatch(/^ok +redis +hash-max-listpack-value 128$/m);
    } finally {
      await small.stop();
      await fitting.stop();
    }
  });
});
