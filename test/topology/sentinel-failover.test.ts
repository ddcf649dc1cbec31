import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { UNDECIDED_STATES } from '../../src/notice/states.js';
import { NoticeStore } from '../../src/store/notices.js';
import { connectRedis, type RedisClient } from '../../src/store/redis.js';
import { checkRun, settled, type NoticeOutcome } from '../chaos/invariants.js';
import { NEVER_DELIVERED, type NoticePlan } from '../chaos/plan.js';
import { deleteKeys, sleep, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { SentinelSetup } from '../helpers/sentinel.js';
import { WorkerProcess } from '../helpers/stack.js';
import { runCliProcess, WebProcess } from '../helpers/web-process.js';

/**
 * Redis Sentinel: the master is killed (SIGKILL) with notices mid-flight — before
 * their deadline, with an email or an SMS in flight, with an SMS due — while real web and
 * worker processes run. While no master is reachable the web answers 503 at once; once a
 * replica is promoted everything goes on, and every notice accepted with 202 exists and ends
 * with at most one fallback decision and exactly one SMS where it needs one (the chaos
 * invariants, test/chaos/invariants.ts).
 */
describe('a Sentinel failover with notices in flight', () => {
  const prefix = testPrefix('failover');
  let setup: SentinelSetup;
  let sandbox: Sandbox;
  let web: WebProcess;
  let workers: WorkerProcess[] = [];
  let redis: RedisClient;
  let store: NoticeStore;
  let env: Record<string, string>;
  let archiveDir: string;
  const ADMIN = 'failover-admin-token-0123';

  const plans: NoticePlan[] = [];
  const ids = new Map<number, string>();
  /** Every answer the web gave to a create, and how long it took. */
  const answers: { status: number; ms: number; masterDown: boolean }[] = [];
  let masterDown = false;

  beforeAll(async () => {
    setup = await SentinelSetup.start();
    sandbox = await startSandbox({ port: 0 });
    env = testEnv(prefix, {
      ...setup.env,
      POSTMARK_API_URL: sandbox.url,
      TWILIO_API_URL: sandbox.url,
      HERALD_ADMIN_TOKEN: ADMIN,
      // Above the sandbox's 1.5 s `slow` answers, with room for a loaded machine (as the chaos runs).
      HERALD_PROVIDER_TIMEOUT_MS: '2500',
      HERALD_RECONCILE_GRACE_MS: '3000',
      // Info, so that a worker's "running" line says when it is ready.
      LOG_LEVEL: 'info',
    });
    archiveDir = fileURLToPath(env.HERALD_ARCHIVE_URL!);
    redis = connectRedis(loadConfig(env).redis, 'worker', 'herald-test-reader');
    redis.on('error', () => undefined);
    store = new NoticeStore(redis, prefix);
    web = await new WebProcess(env).start();
    workers = [new WorkerProcess(env).start(), new WorkerProcess(env).start()];
    await waitFor(async () => workers.every((w) => w.ready), 90_000, 'the workers to run');
  }, 180_000);
  afterAll(async () => {
    await Promise.allSettled(workers.map((w) => w.stop('SIGKILL')));
    await web?.stop();
    await sandbox?.close();
    if (redis) {
      await deleteKeys(redis, prefix).catch(() => undefined);
      redis.disconnect();
    }
    await setup?.stop();
    if (archiveDir) rmSync(archiveDir, { recursive: true, force: true });
  });

  const tally = (values: string[]) => values.reduce<Record<string, number>>((t, v) => ({ ...t, [v]: (t[v] ?? 0) + 1 }), {});
  let index = 0;
  /** A notice with the given behaviours, created through the API and retried on 503 as a client would (same idempotency key). */
  async function create(emailBehaviour: string, smsBehaviour: string, deadlineInSeconds: number): Promise<void> {
    const i = index++;
    const plan: NoticePlan = {
      index: i,
      createAt: 0,
      recipientId: `failover-${i}`,
      email: `${emailBehaviour}+n${i}@example.com`,
      emailBehaviour: emailBehaviour.replace(/\+.*/, ''),
      phone: `+1${301 + i}55501${smsBehaviour}`,
      smsBehaviour,
      deadlineInSeconds,
      cancel: false,
      withdrawSmsConsent: false,
    };
    plans.push(plan);
    const body = {
      recipient: { id: plan.recipientId, email: plan.email, phone: plan.phone },
      category: 'failover',
      content: { subject: `Failover ${i}`, text: 'A notice through a failover.', sms: `Failover notice ${i}` },
      deadlineInSeconds,
    };
    for (let attempt = 0; attempt < 200; attempt += 1) {
      const started = Date.now();
      const down = masterDown;
      const res = await web
        .call('POST', '/v1/notices', body, { headers: { 'idempotency-key': `failover-${prefix}-${i}` }, timeoutMs: 5_000 })
        .catch(() => undefined);
      answers.push({ status: res?.status ?? 0, ms: Date.now() - started, masterDown: down });
      if (res && (res.status === 202 || res.status === 200)) {
        ids.set(i, res.json.id as string);
        return;
      }
      await sleep(150);
    }
  }

  it('loses no accepted notice, decides and sends once, and answers 503 at once while no master is reachable', async () => {
    // Before the kill: notices whose deadline is still ahead, with the email in flight (slow
    // answers), delivered ones, bounced ones; some with a slow SMS.
    const mix: [string, string, number][] = [
      ['never', '00', 3],
      ['slow', '00', 4],
      ['delivered+500ms', '00', 6],
      ['never', '06', 2],
      ['bounce+300ms', '00', 8],
      ['never', '00', 5],
      ['slow', '06', 3],
      ['hang-status', '00', 4],
    ];
    for (let round = 0; round < 3; round += 1) {
      await Promise.all(mix.map(([email, sms, deadline]) => create(email, sms, deadline + round)));
      await sleep(300);
    }
    // Some deadlines have passed (SMS due or in flight), others have not; emails are in flight.
    await sleep(1200);
    // What the kill interrupts: notices still before their deadline and notices whose fallback is decided.
    const before = tally(
      await Promise.all([...ids.values()].map(async (id) => (await redis.hget(store.keys.notice(id), 'state')) ?? 'none')),
    );
    const old = await setup.killMaster();
    const killedAt = Date.now();
    masterDown = true;
    // Creations go on while the master is gone: each answers at once (503), and is retried.
    const during = Promise.all(mix.slice(0, 4).map(([email, sms, deadline]) => create(email, sms, deadline)));
    const promoted = await setup.waitForPromotion(old);
    masterDown = false;
    const promotedAfterMs = Date.now() - killedAt;
    await during;
    // After the promotion: new notices are accepted again.
    await Promise.all(mix.map(([email, sms, deadline]) => create(email, sms, deadline)));

    // Every accepted notice ends.
    const accepted = [...ids.values()];
    expect(accepted).toHaveLength(plans.length);
    await waitFor(
      async () => {
        for (const id of accepted) {
          const hash = await redis.hgetall(store.keys.notice(id));
          if (!hash.state || !settled(hash.state, await store.events(id))) return false;
        }
        return true;
      },
      120_000,
      'every accepted notice to end',
    ).catch(async (error: Error) => {
      const stuck: string[] = [];
      for (const id of accepted) {
        const hash = await redis.hgetall(store.keys.notice(id));
        const events = await store.events(id);
        if (!hash.state || !settled(hash.state, events))
          stuck.push(`${id} ${hash.email} ${hash.phone} ${hash.state}: ${events.map((e) => e.type).join(' ')}`);
      }
      const tail = (text: string) =>
        text
          .trimEnd()
          .split('\n')
          .slice(-6)
          .map((line) => line.slice(0, 600))
          .join('\n');
      throw new Error(`${error.message}\n${stuck.join('\n')}\n${workers.map((w) => tail(w.output)).join('\n---\n')}`);
    });

    const emails = sandbox.emails();
    const sms = sandbox.sms();
    const outcomes: NoticeOutcome[] = [];
    for (const plan of plans) {
      const id = ids.get(plan.index);
      const hash = id ? await redis.hgetall(store.keys.notice(id)) : null;
      outcomes.push({
        plan,
        id,
        hash: hash && hash.state ? hash : null,
        events: id ? await store.events(id) : [],
        emails: id ? emails.filter((m) => m.metadata.notice_id === id) : [],
        sms: sms.filter((m) => m.to === plan.phone),
      });
    }
    expect(checkRun(outcomes, emails, sms)).toEqual([]);
    // One SMS per fallback decided, and every notice whose email can never arrive fell back.
    const decided = outcomes.filter((o) => o.events.some((e) => e.type === 'fallback.decided'));
    expect(sms.length).toBe(decided.length);
    expect(decided.length).toBeGreaterThanOrEqual(outcomes.filter((o) => NEVER_DELIVERED.has(o.plan.emailBehaviour)).length);
    // The kill caught sends in flight: some send was resolved by a search (or retried) after it.
    const inDoubt = outcomes.filter((o) => o.events.some((e) => e.type === 'provider.error' || e.type === 'notice.reconciled'));

    // While no master was reachable the web answered, and fast: 503, never a hang.
    const outage = answers.filter((a) => a.masterDown && a.status !== 202 && a.status !== 200);
    expect(outage.length).toBeGreaterThan(0);
    expect(outage.every((a) => a.status === 503)).toBe(true);
    expect(Math.max(...outage.map((a) => a.ms))).toBeLessThan(1500);

    // The new master had no replica: its sends went ahead, counted as unreplicated.
    const metrics = await web.call('GET', '/metrics');
    expect(metrics.text).toMatch(/^herald_unreplicated_writes_total\{write="accept",reason="no_replica"\} [1-9]/m);

    expect(UNDECIDED_STATES.some((state) => before[state])).toBe(true);
    expect(['sms_pending', 'sms_sending', 'sms_sent', 'sms_delivered'].some((state) => before[state])).toBe(true);

    // The old master comes back as a replica of the new one; replicated writes wait for it again.
    await old.start();
    await setup.waitForReplicas(promoted, 1, 60_000);
    console.log(
      `failover: promoted after ${promotedAfterMs} ms; ${plans.length} notices, ${sms.length} SMS, ` +
        `${outage.length} answers 503 during the outage (slowest ${Math.max(...outage.map((a) => a.ms))} ms), ` +
        `${inDoubt.length} notices with a provider error or a reconciler repair; at the kill ${JSON.stringify(before)}; ends ${JSON.stringify(tally(outcomes.map((o) => o.hash?.state ?? 'lost')))}`,
    );
  }, 240_000);

  it('the CLI, the doctor, Bull Board, /metrics, /v1/stats and the log mirror work through the sentinels', async () => {
    const list = await runCliProcess(['notices', 'list', '--json', '--limit', '100'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout.trim().split('\n')).toHaveLength(ids.size);

    const doctor = await runCliProcess(['doctor'], env);
    expect(doctor.stdout).toMatch(/Redis 7[^\n]*\(standalone, master\) at master herald of sentinels 127\.0\.0\.1:\d+/);

    const basic = `Basic ${Buffer.from(`ops:${ADMIN}`).toString('base64')}`;
    const board = await web.call('GET', '/admin/queues/api/queues', undefined, { headers: { authorization: basic } });
    expect(board.status).toBe(200);
    expect(board.text).toContain('sms-send');

    const metrics = await web.call('GET', '/metrics');
    expect(metrics.text).toMatch(new RegExp(`^herald_notices_accepted_total ${ids.size}$`, 'm'));
    const stats = await web.call('GET', `/v1/stats?from=${new Date(Date.now() - 3_600_000).toISOString()}`);
    expect(stats.status, stats.text).toBe(200);

    // The log mirror sweep archived the decision logs: the archive's chains verify.
    const someId = ids.get(0)!;
    await waitFor(
      async () => {
        const audit = await runCliProcess(['audit', someId, '--json'], env);
        return audit.code === 0 && audit.stdout.includes('notice.completed');
      },
      30_000,
      'the audit trail of a notice',
    );
    const verify = await runCliProcess(['audit', '--verify'], env);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
  }, 120_000);
});
