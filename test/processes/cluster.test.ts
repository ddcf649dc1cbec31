import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { Keys, partitionOfNotice, queuePartitionTags } from '../../src/store/keys.js';
import { slotOf } from '../../src/store/slots.js';
import { shardOfNoticeId } from '../../src/notice/ids.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { checkRun, TERMINAL, type NoticeOutcome } from '../chaos/invariants.js';
import type { NoticePlan } from '../chaos/plan.js';
import { sleep, TEST_API_KEY, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { freePort } from '../helpers/redis-server.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { WorkerProcess } from '../helpers/stack.js';

/**
 * Herald on a real Redis Cluster (3 masters, a replica each) with its notice queues in 3
 * partitions: a web process and two worker processes, compiled as the Procfile runs them.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PARTITIONS = 3;
const ADMIN = 'cluster-admin-token-0123456789';

class WebProcess {
  child: ChildProcess | undefined;
  output = '';
  url = '';

  async start(env: Record<string, string>): Promise<this> {
    const port = await freePort();
    this.url = `http://127.0.0.1:${port}`;
    this.child = spawn(process.execPath, ['dist/src/server.js'], {
      cwd: ROOT,
      env: { ...process.env, ...env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    this.child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    await waitFor(
      async () => (await fetch(`${this.url}/readyz`).catch(() => undefined))?.status === 200,
      120_000,
      'the web process to be ready',
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${this.output.slice(-2000)}`);
    });
    return this;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

let cluster: RedisCluster;
let client: Cluster;
let sandbox: Sandbox;
let web: WebProcess;
let workers: WorkerProcess[] = [];
let prefix: string;
let phones = 0;

async function call(method: string, path: string, body?: unknown, timeoutMs = 5000): Promise<{ status: number; body: any; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${web.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_API_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, ms: Date.now() - started };
}

/** A notice of `email` behaviour (`delivered` or `never`), with a phone whose SMS is delivered. */
function planned(behaviour: 'delivered' | 'never', index: number): { plan: NoticePlan; body: Record<string, unknown> } {
  const phone = `+1${301 + (phones++ % 600)}5550100`;
  const email = behaviour === 'delivered' ? `delivered+300ms+n${index}@example.com` : `never+n${index}@example.com`;
  const plan: NoticePlan = {
    index,
    createAt: 0,
    recipientId: `cluster-${index}`,
    email,
    emailBehaviour: behaviour,
    phone,
    smsBehaviour: '00',
    deadlineInSeconds: 15,
    cancel: false,
    withdrawSmsConsent: false,
  };
  return { plan, body: noticeBody({ recipient: { id: plan.recipientId, email, phone }, deadlineInSeconds: 15 }) };
}

/** Creates notices, half delivered by email, half falling back; returns them with their IDs. */
async function createNotices(count: number, from: number): Promise<{ plan: NoticePlan; id: string }[]> {
  const made: { plan: NoticePlan; id: string }[] = [];
  for (let i = 0; i < count; i += 1) {
    const { plan, body } = planned(i % 2 === 0 ? 'delivered' : 'never', from + i);
    const res = await call('POST', '/v1/notices', body);
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    made.push({ plan, id: res.body.id as string });
  }
  return made;
}

async function outcomesOf(made: { plan: NoticePlan; id: string }[]): Promise<NoticeOutcome[]> {
  const emails = sandbox.emails();
  const sms = sandbox.sms();
  const keys = new Keys(prefix);
  return Promise.all(
    made.map(async ({ plan, id }) => {
      const hash = await client.hgetall(keys.notice(id));
      const events = (await call('GET', `/v1/notices/${id}/events`)).body.events as StoredEntry[];
      return {
        plan,
        id,
        hash: hash.state ? hash : null,
        events,
        emails: emails.filter((m) => m.metadata.notice_id === id),
        sms: sms.filter((m) => m.to === plan.phone),
      };
    }),
  );
}

/** What the emulators received for these notices (the file's other tests sent their own). */
function sentFor(outcomes: NoticeOutcome[]): [ReturnType<Sandbox['emails']>, ReturnType<Sandbox['sms']>] {
  const ids = new Set(outcomes.map((o) => o.id));
  const phones = new Set(outcomes.map((o) => o.plan.phone));
  return [sandbox.emails().filter((m) => ids.has(m.metadata.notice_id)), sandbox.sms().filter((m) => phones.has(m.to))];
}

async function waitTerminal(ids: string[], timeoutMs: number): Promise<void> {
  await waitFor(
    async () => {
      for (const id of ids) {
        const res = await call('GET', `/v1/notices/${id}`).catch(() => undefined);
        if (res?.status !== 200 || !TERMINAL.includes(res.body.state)) return false;
      }
      return true;
    },
    timeoutMs,
    'every notice to end',
  );
}

beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1 });
  client = cluster.client();
  sandbox = await startSandbox({ port: 0 });
  prefix = testPrefix('cluster');
  const env = testEnv(prefix, {
    REDIS_CLUSTER_NODES: cluster.seeds,
    HERALD_QUEUE_PARTITIONS: String(PARTITIONS),
    POSTMARK_API_URL: sandbox.url,
    TWILIO_API_URL: sandbox.url,
    HERALD_RECONCILE_GRACE_MS: '3000',
    HERALD_ADMIN_TOKEN: ADMIN,
    // A loaded machine answers the emulators late: a send in doubt is not what this test is about.
    HERALD_PROVIDER_TIMEOUT_MS: '5000',
    LOG_LEVEL: 'warn',
  });
  web = await new WebProcess().start(env);
  // Info, so that a worker's "running" line says it consumes every partition.
  workers = [new WorkerProcess({ ...env, LOG_LEVEL: 'info' }).start(), new WorkerProcess({ ...env, LOG_LEVEL: 'info' }).start()];
  await waitFor(async () => workers.every((w) => w.ready), 120_000, 'the worker processes to run').catch((error: unknown) => {
    throw new Error(`${String(error)}\n${workers.map((w) => w.output.slice(-2000)).join('\n---\n')}`);
  });
}, 300_000);

afterAll(async () => {
  await Promise.allSettled(workers.map((w) => w.stop('SIGKILL')));
  await web?.stop();
  client?.disconnect();
  await sandbox?.close();
  await cluster?.stop();
});

describe('Herald on a Redis Cluster with 3 queue partitions', () => {
  it('delivers notices and falls back with one SMS each, its jobs spread over every master', async () => {
    const made = await createNotices(12, 0);
    // Jobs sit in the partitions of their notices' shards, and the partitions on their masters.
    const tags = queuePartitionTags(PARTITIONS);
    const masters = await cluster.masters();
    const holding = new Set<number>();
    for (const master of masters) {
      const node = master.connect();
      await node.connect();
      for (const tag of tags) {
        const [, keys] = await node.scan('0', 'MATCH', `${prefix}:{${tag}}:*`, 'COUNT', 10_000);
        if (keys.length > 0) holding.add(master.port);
      }
      node.disconnect();
    }
    const usedPartitions = new Set(made.map(({ id }) => partitionOfNotice(id, PARTITIONS)));
    expect(holding.size).toBe(usedPartitions.size);
    expect(new Set(tags.map((tag) => slotOf(`{${tag}}`))).size).toBe(PARTITIONS);

    await waitTerminal(
      made.map((m) => m.id),
      60_000,
    );
    const outcomes = await outcomesOf(made);
    expect(checkRun(outcomes, ...sentFor(outcomes))).toEqual([]);
    for (const o of outcomes) {
      const decided = o.events.filter((e) => e.type === 'fallback.decided').length;
      expect(
        o.hash?.state,
        `${o.id}: ${o.events.map((e) => `${e.at.slice(17, 23)} ${e.type}${'status' in e ? ` ${String(e.status)}` : ''}`).join(', ')}`,
      ).toBe(o.plan.emailBehaviour === 'delivered' ? 'email_delivered' : 'sms_delivered');
      expect(decided, o.id).toBe(o.plan.emailBehaviour === 'delivered' ? 0 : 1);
      expect(o.sms.length, o.id).toBe(o.plan.emailBehaviour === 'delivered' ? 0 : 1);
    }
    // The jobs' queues and partitions are what Bull Board and /metrics show.
    const metrics = await fetch(`${web.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/queue="p2\.email-send"/);
    const board = (await fetch(`${web.url}/admin/queues/api/queues`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) =>
      r.json(),
    )) as { queues: { name: string }[] };
    const names = board.queues.map((q) => q.name);
    for (const queue of ['email-send', 'email-poll', 'deadline', 'sms-send', 'sms-poll']) {
      expect(names).toEqual(expect.arrayContaining([0, 1, 2].map((i) => `p${i}.${queue}`)));
    }
    expect(names).toEqual(expect.arrayContaining(['reconcile', 'log-mirror', 'content-purge']));
  }, 120_000);

  it('survives a master killed with notices in flight: 503 or an answer for its slots, never a hang; the rest work; recovery without restart', async () => {
    const made = await createNotices(12, 100);
    // The master of the shard of the first notice goes away.
    const victimShard = shardOfNoticeId(made[0]!.id)!;
    const keys = new Keys(prefix);
    const victim = (await cluster.masterOfSlot(slotOf(keys.notice(made[0]!.id))))!;
    const onVictim = async (id: string) => (await cluster.masterOfSlot(slotOf(keys.notice(id))))?.port === victim.port;
    const elsewhere: string[] = [];
    for (const { id } of made) if (!(await onVictim(id))) elsewhere.push(id);
    await victim.kill();
    const killedAt = Date.now();

    // Until its replica takes over: reads of notices on other masters answer 200, reads of
    // the victim's answer within the web's bound (503 or, once promoted, 200), none hangs.
    const answers: Record<string, number> = {};
    while (Date.now() - killedAt < 4000) {
      const onDead = await call('GET', `/v1/notices/${made[0]!.id}`, undefined, 4000);
      answers[`victim ${onDead.status}`] = (answers[`victim ${onDead.status}`] ?? 0) + 1;
      expect([200, 503], `${JSON.stringify(onDead.body)}\n${web.output.slice(-1500)}`).toContain(onDead.status);
      expect(onDead.ms).toBeLessThan(2500);
      for (const id of elsewhere.slice(0, 3)) {
        const res = await call('GET', `/v1/notices/${id}`, undefined, 4000);
        answers[`other ${res.status}`] = (answers[`other ${res.status}`] ?? 0) + 1;
        expect(res.ms).toBeLessThan(2500);
      }
      await sleep(200);
    }
    expect(answers['other 200'] ?? 0).toBeGreaterThan(0);

    // The replica is promoted; Herald follows without a restart.
    await cluster.waitHealthy(30_000);
    const recovered = await waitFor(
      async () => {
        const res = await call('GET', `/v1/notices/${made[0]!.id}`).catch(() => undefined);
        return res?.status === 200 && Date.now();
      },
      20_000,
      'the web to read the killed master’s slots from its promoted replica',
    );
    console.log(
      `master of shard ${victimShard} killed; answers while down: ${JSON.stringify(answers)}; healthy again ${recovered - killedAt} ms after the kill`,
    );
    const later = await createNotices(6, 200);
    await waitTerminal(
      [...made, ...later].map((m) => m.id),
      90_000,
    );
    const outcomes = await outcomesOf([...made, ...later]);
    expect(checkRun(outcomes, ...sentFor(outcomes))).toEqual([]);
    for (const o of outcomes) {
      expect(o.events.filter((e) => e.type === 'fallback.decided').length, o.id).toBe(o.plan.emailBehaviour === 'delivered' ? 0 : 1);
      expect(o.sms.length, o.id).toBe(o.plan.emailBehaviour === 'delivered' ? 0 : 1);
    }
    for (const worker of workers) expect(worker.exitCode).toBeNull();
  }, 240_000);
});
