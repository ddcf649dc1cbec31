import { rmSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { deleteKeys, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { makeTlsFiles, RedisServer, type TlsFiles } from '../helpers/redis-server.js';
import { WorkerProcess } from '../helpers/stack.js';
import { runCliProcess, WebProcess } from '../helpers/web-process.js';

/**
 * REDIS_URL `rediss://user:password@host:port`: a `redis-server` that speaks only TLS, with its
 * certificate signed by a CA the test made (trusted through REDIS_TLS_CA_FILE, as a Heroku-style
 * self-signed server is), and an ACL user (the default user off). Every connection Herald opens
 * must use both, or it gets nothing at all.
 */
describe('REDIS_URL rediss:// with an ACL user', () => {
  const prefix = testPrefix('tls');
  const ADMIN = 'tls-admin-token-0123456789';
  let tls: TlsFiles;
  let server: RedisServer;
  let sandbox: Sandbox;
  let web: WebProcess;
  let worker: WorkerProcess;
  let redis: Redis;
  let env: Record<string, string>;

  beforeAll(async () => {
    tls = makeTlsFiles();
    server = await RedisServer.start({ tls, user: { name: 'herald-app', password: 'p@ss/word:1' } });
    redis = server.client({ maxRetriesPerRequest: null });
    sandbox = await startSandbox({ port: 0 });
    env = testEnv(prefix, {
      REDIS_URL: server.url,
      REDIS_TLS_CA_FILE: tls.ca,
      POSTMARK_API_URL: sandbox.url,
      TWILIO_API_URL: sandbox.url,
      HERALD_ADMIN_TOKEN: ADMIN,
    });
    web = await new WebProcess(env).start();
    worker = new WorkerProcess(env).start();
  }, 120_000);
  afterAll(async () => {
    await worker?.stop('SIGKILL');
    await web?.stop();
    await sandbox?.close();
    if (redis) {
      await deleteKeys(redis, prefix).catch(() => undefined);
      redis.disconnect();
    }
    await server?.stop();
    if (tls) rmSync(tls.dir, { recursive: true, force: true });
  });

  it('the URL carries TLS and credentials (the password percent-encoded)', () => {
    expect(server.url).toMatch(/^rediss:\/\/herald-app:p%40ss%2Fword%3A1@127\.0\.0\.1:\d+$/);
  });

  it('runs a notice end to end through web and worker processes: one fallback, one SMS', async () => {
    const phone = '+12025550123';
    const created = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({ recipient: { id: 'tls-1', email: 'never@example.com', phone }, deadlineInSeconds: 3 }),
    );
    expect(created.status, created.text).toBe(202);
    const id = created.json.id as string;
    const view = await waitFor(
      async () => {
        const res = await web.call('GET', `/v1/notices/${id}`);
        return res.json?.state === 'sms_delivered' ? res.json : undefined;
      },
      60_000,
      'the notice to end sms_delivered',
    );
    expect(view.fallback.reason).toBe('email_deadline_elapsed');
    const events = (await web.call('GET', `/v1/notices/${id}/events`)).json.events as { type: string }[];
    expect(events.filter((e) => e.type === 'fallback.decided')).toHaveLength(1);
    expect(sandbox.sms().filter((m) => m.to === phone)).toHaveLength(1);
  }, 120_000);

  it('every connection of the web, the worker and BullMQ is the ACL user over TLS', async () => {
    const clients = (await redis.client('LIST')) as string;
    const named = clients
      .split('\n')
      .filter((line) => / name=herald/.test(line))
      .map((line) => ({ name: / name=(\S*)/.exec(line)![1]!, user: / user=(\S*)/.exec(line)![1]! }));
    const names = new Set(named.map((c) => c.name));
    for (const expected of ['herald-web', 'herald-worker', 'herald-worker-steps']) expect([...names]).toContain(expected);
    // BullMQ's own duplicated connections (its workers' blocking reads) are named after their queue, under the prefix.
    expect(named.filter((c) => c.name.startsWith(`${prefix}:`)).length).toBeGreaterThanOrEqual(5);
    expect(named.every((c) => c.user === 'herald-app')).toBe(true);
    // The server has no plain port: a connection that reached it spoke TLS.
    expect(await redis.config('GET', 'port')).toEqual(['port', '0']);
  });

  it('Bull Board, /metrics, the CLI and the doctor reach it too', async () => {
    const basic = `Basic ${Buffer.from(`ops:${ADMIN}`).toString('base64')}`;
    const board = await web.call('GET', '/admin/queues/api/queues', undefined, { headers: { authorization: basic } });
    expect(board.status).toBe(200);
    expect(board.text).toContain('email-send');
    const metrics = await web.call('GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/^herald_notices_accepted_total 1$/m);

    const list = await runCliProcess(['notices', 'list', '--json'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout.trim().split('\n')).toHaveLength(1);
    const doctor = await runCliProcess(['doctor'], env);
    expect(doctor.stdout + doctor.stderr).toMatch(/Redis 7[^\n]*\(standalone, master\) at rediss:\/\/\[credentials\]@127\.0\.0\.1/);
  }, 60_000);

  it('without REDIS_TLS_CA_FILE the server is not trusted; REDIS_TLS_REJECT_UNAUTHORIZED=0 skips the check; an unreadable CA file is a configuration problem', async () => {
    const { REDIS_TLS_CA_FILE: _ca, ...untrusted } = env;
    const refused = await runCliProcess(['doctor'], untrusted);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^FAIL +redis +no answer at rediss:/m);
    const unverified = await runCliProcess(['doctor'], { ...untrusted, REDIS_TLS_REJECT_UNAUTHORIZED: '0' });
    expect(unverified.stdout).toMatch(/^ok +redis +Redis 7[^\n]*\(standalone, master\)/m);
    const missing = await runCliProcess(['doctor'], { ...env, REDIS_TLS_CA_FILE: `${tls.dir}/absent.crt` });
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/^FAIL +configuration +REDIS_TLS_CA_FILE=\S+absent\.crt cannot be read \(ENOENT\)/m);
  }, 60_000);
});
