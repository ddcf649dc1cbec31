/**
 * Runs a chaos plan against real processes: its own `redis-server` (AOF, `appendfsync
 * always`), the sandbox emulators, the web app in-process and worker processes; then waits
 * for every notice to settle and checks the invariants (invariants.ts).
 */
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { Archive } from '../../src/archive/archive.js';
import { createFileStorage } from '../../src/archive/file-storage.js';
import { LogMirrorStore } from '../../src/store/log-mirror.js';
import { readTrail } from '../../src/archive/trail.js';
import { verifyShard } from '../../src/archive/verify.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import type { RetiredStats } from '../../src/archive/records.js';
import type { Prices } from '../../src/config.js';
import { STATS_HOUR_MS } from '../../src/notice/stats.js';
import { jobIds } from '../../queues/index.js';
import { sleep, TEST_API_KEY, TEST_TOPOLOGY, testConfig, testPrefix } from '../helpers/env.js';
import { eventsGroupCaughtUp } from '../helpers/event-log.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { RedisServer } from '../helpers/redis-server.js';
import { SentinelSetup } from '../helpers/sentinel.js';
import { statsOfHash, tally } from '../helpers/stats.js';
import { WorkerProcess } from '../helpers/stack.js';
import { checkRun, TERMINAL, type NoticeOutcome, type Violation } from './invariants.js';
import type { ChaosEvent, ChaosPlan, NoticePlan } from './plan.js';
import { Random } from './random.js';

export interface ChaosOptions {
  /** How long after the faults stop every notice must have reached a terminal state. */
  settleBoundMs: number;
}

export interface ChaosReport {
  seed: number;
  notices: { planned: number; accepted: number; replayed: number; notAccepted: number };
  answers: Record<string, number>;
  endStates: Record<string, number>;
  sigkills: number;
  sigterms: { exitCode: number | null; activeJobs: number | null }[];
  workerRestarts: number;
  redisRestarts: { downMs: number }[];
  providerFaults: Record<string, number>;
  duplicateJobs: { added: number; sameId: number; skipped: number };
  skippedEvents: string[];
  emails: number;
  sms: number;
  smsNeeded: number;
  fallbackDecided: number;
  /** Notices whose outcome was read from the archive: Redis had let go of them. */
  retired: number;
  /** Deliveries of events the run's endpoint received (at least once per event). */
  eventsReceived: number;
  /** With webhooks on: what the outbox pushed, and what Herald recorded from them. */
  webhooks?: {
    planned: number;
    dropped: number;
    duplicated: number;
    /** Herald's answers to the pushes that were sent, by status (`none`: no answer). */
    answers: Record<string, number>;
    /** Observations recorded with `source: webhook`, and those from polls. */
    observations: number;
    polls: number;
    checksSaved: number;
  };
  /** Time from the end of the faults until every notice was terminal; null when the bound passed. */
  settledAfterMs: number | null;
  settleBoundMs: number;
  elapsedMs: number;
  violations: Violation[];
  /** The last lines the worker processes printed, when something went wrong. */
  workerOutput?: string;
  /** Where all they printed was written, when something went wrong. */
  workerLogs?: string;
}

/** The webhook secrets of a run with webhooks on, for Herald's web and the sandbox's outbox alike. */
const CHAOS_WEBHOOK_ENV = {
  HERALD_POSTMARK_WEBHOOK_AUTH: 'chaos:webhook-secret-of-the-run',
  HERALD_PUBLIC_URL: 'https://herald.chaos.test',
  TWILIO_AUTH_TOKEN: 'chaos-twilio-auth-token',
};

/** Runs the plan and returns its report; throws only when the run itself cannot be set up. */
export async function runChaos(plan: ChaosPlan, opts: ChaosOptions): Promise<ChaosReport> {
  const run = new ChaosRun(plan, opts);
  try {
    return await run.execute();
  } finally {
    await run.close();
  }
}

/**
 * The run's own Redis: one `redis-server` (AOF, `appendfsync always`), or under
 * HERALD_TEST_TOPOLOGY=cluster a 3-master Redis Cluster (a replica each, the same AOF) with the
 * notice queues in 3 partitions, whose "Redis restart" is a SIGKILL of one master (its replica
 * may be promoted meanwhile; it comes back as a master or as the new master's replica).
 */
class ChaosRedis {
  private constructor(
    private readonly server: RedisServer | undefined,
    private readonly cluster: RedisCluster | undefined,
    private readonly sentinel: SentinelSetup | undefined,
    readonly dir: string,
  ) {}

  /** The run's own Redis: one node, or the topology HERALD_TEST_TOPOLOGY names (a Cluster, a Sentinel setup). */
  static async start(): Promise<ChaosRedis> {
    if (TEST_TOPOLOGY === 'cluster') {
      const cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1, appendfsync: 'always' });
      return new ChaosRedis(undefined, cluster, undefined, cluster.nodes[0]!.dir);
    }
    if (process.env.HERALD_TEST_TOPOLOGY === 'sentinel') {
      const sentinel = await SentinelSetup.start({ appendfsync: 'always' });
      return new ChaosRedis(undefined, undefined, sentinel, sentinel.servers[0]!.dir);
    }
    const server = await RedisServer.start({ appendfsync: 'always' });
    return new ChaosRedis(server, undefined, undefined, server.dir);
  }

  get env(): Record<string, string> {
    if (this.cluster) return { REDIS_CLUSTER_NODES: this.cluster.seeds, HERALD_QUEUE_PARTITIONS: '3' };
    if (this.sentinel) return this.sentinel.env;
    return { REDIS_URL: this.server!.url };
  }

  /**
   * Kills Redis and starts it again after `downMs`: one master of a cluster (the first the plan's
   * count picks); a Sentinel setup's master, down until a replica is promoted (it comes back as a
   * replica); or the one node.
   */
  async restart(downMs: number, pick: number): Promise<void> {
    if (this.sentinel) {
      const old = await this.sentinel.killMaster();
      await Promise.all([sleep(downMs), this.sentinel.waitForPromotion(old)]);
      await old.start();
      return;
    }
    if (this.cluster) {
      const masters = await this.cluster.masters();
      const victim = masters[pick % masters.length]!;
      await victim.kill();
      await sleep(downMs);
      victim.start();
      return;
    }
    await this.server!.kill('SIGKILL');
    await sleep(downMs);
    await this.server!.start();
  }

  /** Every node up again. */
  async up(): Promise<void> {
    if (this.server) return this.server.start();
    if (this.sentinel) {
      for (const server of this.sentinel.servers) await server.start();
      return;
    }
    for (const node of this.cluster!.nodes) if (!node.running) node.start();
    await this.cluster!.waitHealthy(60_000);
  }

  async stop(): Promise<void> {
    await this.server?.stop();
    await this.cluster?.stop();
    await this.sentinel?.stop();
  }
}

class ChaosRun {
  private redis!: ChaosRedis;
  private sandbox!: Sandbox;
  private web!: WebUnderTest;
  /** The run's archive, to read retired notices back. */
  private archive!: Archive;
  private eventListener: Server | undefined;
  private endpointId = '';
  /** Which events of which notice the run's endpoint received. */
  private readonly eventsReceived = new Map<string, Set<string>>();
  private workers: WorkerProcess[] = [];
  /** Workers between a signal and their restart: no second signal meanwhile. */
  private down = new Set<number>();
  private readonly ids = new Map<number, string>();
  private readonly cancelStatus = new Map<number, number>();
  private readonly consentWithdrawn = new Set<number>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly report: ChaosReport;
  private readonly violations: Violation[] = [];
  private started = 0;
  private prices!: Prices;

  constructor(
    private readonly plan: ChaosPlan,
    private readonly opts: ChaosOptions,
  ) {
    this.report = {
      seed: plan.seed,
      notices: { planned: plan.notices.length, accepted: 0, replayed: 0, notAccepted: 0 },
      answers: {},
      endStates: {},
      sigkills: 0,
      sigterms: [],
      workerRestarts: 0,
      redisRestarts: [],
      providerFaults: {},
      duplicateJobs: { added: 0, sameId: 0, skipped: 0 },
      skippedEvents: [],
      emails: 0,
      sms: 0,
      smsNeeded: 0,
      fallbackDecided: 0,
      retired: 0,
      eventsReceived: 0,
      settledAfterMs: null,
      settleBoundMs: opts.settleBoundMs,
      elapsedMs: 0,
      violations: [],
    };
  }

  async execute(): Promise<ChaosReport> {
    this.redis = await ChaosRedis.start();
    // The webhook faults draw from the run's seed too, so that a seed replays them.
    const webhookRandom = new Random(this.plan.seed ^ 0x5eed);
    this.sandbox = await startSandbox({ port: 0, webhookRandom: () => webhookRandom.next() });
    const prefix = testPrefix('chaos');
    const env = {
      ...this.redis.env,
      HERALD_PREFIX: prefix,
      HERALD_API_KEYS: TEST_API_KEY,
      HERALD_PROVIDERS: 'sandbox',
      HERALD_MIN_POLL_INTERVAL_MS: '200',
      // Above the sandbox's 1.5 s `slow` answers, with room for a loaded machine.
      HERALD_PROVIDER_TIMEOUT_MS: '2500',
      HERALD_RECONCILE_INTERVAL_MS: '300',
      HERALD_RECONCILE_GRACE_MS: '3000',
      POSTMARK_API_URL: this.sandbox.url,
      TWILIO_API_URL: this.sandbox.url,
      HERALD_EMAIL_PROVIDER: this.plan.shape.emailProvider ?? 'postmark',
      AWS_ENDPOINT_URL_SESV2: this.sandbox.url,
      AWS_ENDPOINT_URL_SQS: this.sandbox.url,
      // The log mirror's archive goes with the run's Redis directory, removed at the end.
      HERALD_ARCHIVE_URL: pathToFileURL(join(this.redis.dir, 'archive')).href,
      // Finished notices leave Redis as soon as the archive holds them, under the same faults.
      HERALD_NOTICE_KEEP_HOT: '0s',
      HERALD_CONTENT_PURGE_INTERVAL_MS: '500',
      // Info, so that a worker's "running" line says when it is ready for a SIGTERM.
      LOG_LEVEL: 'info',
      // Events to callers: an endpoint on a listener of the run's own, on this machine.
      HERALD_ALLOW_PRIVATE_EVENT_URLS: '1',
      HERALD_EVENT_RETRY_BASE_MS: '200',
      // A killed worker's log entries (the mirror's and the events') go to another worker soon.
      HERALD_MIRROR_RECLAIM_MS: '3000',
      // Webhooks: the routes on, and the SMS sends carrying status callbacks under the public URL.
      ...(this.plan.shape.webhookFaults ? CHAOS_WEBHOOK_ENV : {}),
    };
    const config = testConfig(prefix, env);
    this.prices = config.prices;
    this.web = await startWebUnderTest(config);
    if (this.plan.shape.webhookFaults) {
      // The web listens, so that the emulators' webhooks reach it as providers' do.
      const url = await this.web.app.listen({ port: 0, host: '127.0.0.1' });
      this.sandbox.configureWebhooks({
        url,
        publicUrl: CHAOS_WEBHOOK_ENV.HERALD_PUBLIC_URL,
        postmarkAuth: CHAOS_WEBHOOK_ENV.HERALD_POSTMARK_WEBHOOK_AUTH,
        twilioAuthToken: CHAOS_WEBHOOK_ENV.TWILIO_AUTH_TOKEN,
      });
      this.sandbox.setWebhookFaults(this.plan.shape.webhookFaults);
    }
    await this.subscribeToEvents();
    this.archive = new Archive(createFileStorage(join(this.redis.dir, 'archive')), prefix);
    for (const queue of Object.values(this.web.queues)) queue.on('error', () => undefined);
    this.workers = Array.from({ length: this.plan.shape.workers }, () => new WorkerProcess(env).start());

    this.started = Date.now();
    const creations = this.plan.notices.map((notice) => this.later(notice.createAt, () => this.create(notice)));
    for (const event of this.plan.events) {
      await this.until(event.at);
      this.track(this.apply(event));
    }
    await this.until(this.plan.shape.faultWindowMs);
    await Promise.allSettled(this.pending);
    await Promise.allSettled(creations);
    // Faults stop: nothing injected is left, Redis and every worker are up.
    this.sandbox.clearFaults();
    await this.redis.up();
    for (const [i, worker] of this.workers.entries()) {
      if (worker.exitCode !== null) {
        worker.start();
        this.report.workerRestarts += 1;
      }
      this.down.delete(i);
    }
    const faultsStopped = Date.now();

    const ids = [...this.ids.values()];
    const until = faultsStopped + this.opts.settleBoundMs;
    for (;;) {
      const states = await this.states(ids);
      // A retired notice is settled (Herald retires no other); the rules check its trail below.
      if (states.every((s) => s.state !== null && (TERMINAL.includes(s.state) || s.retired))) {
        this.report.settledAfterMs = Date.now() - faultsStopped;
        break;
      }
      if (Date.now() > until) break;
      await sleep(250);
    }
    await this.drainJobs(Date.now() + 15_000);
    await this.awaitEvents(ids, Date.now() + 30_000);
    // Shutting down after the run is a SIGTERM like any other: it must end with exit 0. It comes
    // before the outcomes are read, so that no notice retires while its outcome is read.
    for (const [i, worker] of this.workers.entries()) {
      const bootedBy = Date.now() + 10_000;
      while (!worker.ready && worker.exitCode === null && Date.now() < bootedBy) await sleep(100);
      const code = await worker.stop('SIGTERM');
      if (code !== 0) this.violations.push({ rule: 'graceful-shutdown', detail: `worker ${i} exited ${code} on the final SIGTERM` });
    }

    const outcomes = await this.outcomes();
    const emails = this.sandbox.emails();
    const sms = this.sandbox.sms();
    this.violations.push(...checkRun(outcomes, emails, sms));
    this.violations.push(...(await this.archiveChains()));
    this.violations.push(...(await this.statsViolations()));
    this.violations.push(...(await this.eventViolations(outcomes)));
    for (const v of this.violations) if (v.rule === 'not-terminal' && v.notice) v.detail += `; jobs: ${await this.jobsOf(v.notice)}`;
    for (const o of outcomes) {
      if (o.retired) this.report.retired += 1;
      const state = o.hash?.state ?? (o.id ? 'lost' : 'not accepted');
      this.report.endStates[state] = (this.report.endStates[state] ?? 0) + 1;
      const decided = o.events.some((e) => e.type === 'fallback.decided');
      if (decided) this.report.fallbackDecided += 1;
      if (decided && !o.events.some((e) => e.type === 'sms.canceled') && o.plan.smsBehaviour !== '03') this.report.smsNeeded += 1;
    }
    if (this.plan.shape.webhookFaults) this.report.webhooks = this.webhookSummary(outcomes);
    this.report.emails = emails.length;
    this.report.sms = sms.length;
    this.report.elapsedMs = Date.now() - this.started;

    this.report.violations = this.violations;
    if (this.violations.length > 0) {
      const logs = join(tmpdir(), `herald-chaos-${this.plan.seed}-workers.log`);
      writeFileSync(logs, this.workers.map((w, i) => `===== worker ${i}\n${w.output}`).join('\n'));
      this.report.workerLogs = logs;
      const tail = (output: string) =>
        output
          .trimEnd()
          .split('\n')
          .slice(-12)
          .map((line) => line.slice(0, 400))
          .join('\n');
      this.report.workerOutput = this.workers.map((w, i) => `--- worker ${i}, last lines\n${tail(w.output)}`).join('\n');
    }
    return this.report;
  }

  /**
   * An endpoint subscribed to every event, on a listener of the run's own that answers 200 and
   * records which events of which notice it received (verified with the endpoint's secret).
   */
  private async subscribeToEvents(): Promise<void> {
    let secret = '';
    this.eventListener = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        try {
          const event = new Webhook(secret).verify(body, req.headers as Record<string, string>) as {
            type: string;
            data: { noticeId: string };
          };
          const seen = this.eventsReceived.get(event.data.noticeId) ?? new Set<string>();
          seen.add(event.type);
          this.eventsReceived.set(event.data.noticeId, seen);
          this.report.eventsReceived += 1;
          res.writeHead(200).end();
        } catch {
          this.violations.push({ rule: 'event-signature', detail: `a delivery did not verify: ${body.slice(0, 200)}` });
          res.writeHead(400).end();
        }
      });
    });
    await new Promise<void>((resolve) => this.eventListener!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(this.eventListener.address() as AddressInfo).port}/events`;
    const created = await this.call('POST /v1/event-endpoints', 'POST', '/v1/event-endpoints', {
      url,
      events: ['notice.completed', 'fallback.decided', 'notice.failed'],
    });
    if (created.status !== 201) this.violations.push({ rule: 'event-endpoint', detail: `the endpoint was not created: ${created.status}` });
    secret = created.body?.secret ?? '';
    this.endpointId = created.body?.id ?? '';
  }

  /**
   * Waits, within a bound, until every settled notice's notice.completed reached the endpoint,
   * and the events' consumer group has read, and acknowledged, every shard's log to its end (a
   * killed worker's entries are taken by another after HERALD_MIRROR_RECLAIM_MS), and no delivery
   * is left to run.
   */
  private async awaitEvents(ids: string[], until: number): Promise<void> {
    while (Date.now() < until) {
      const states = await this.states(ids);
      const missing = ids.filter(
        (id, i) =>
          states[i]!.state !== null && TERMINAL.includes(states[i]!.state!) && !this.eventsReceived.get(id)?.has('notice.completed'),
      );
      if (missing.length === 0 && (await this.eventsSettled())) return;
      await sleep(250);
    }
  }

  /** No shard's log holds an entry the events' group has not read and acknowledged, and no delivery waits. */
  private async eventsSettled(): Promise<boolean> {
    try {
      if (!(await eventsGroupCaughtUp(this.web.redis, this.web.store.keys))) return false;
      const counts = await this.web.queues.eventDelivery.getJobCounts('wait', 'delayed', 'prioritized', 'active');
      return Object.values(counts).every((n) => n === 0);
    } catch {
      return false;
    }
  }

  /** Every completed notice's completion, and every decided fallback, reached the subscribed endpoint at least once. */
  private async eventViolations(outcomes: NoticeOutcome[]): Promise<Violation[]> {
    const violations: Violation[] = [];
    for (const o of outcomes) {
      if (!o.id) continue;
      const received = this.eventsReceived.get(o.id) ?? new Set<string>();
      for (const type of ['notice.completed', 'fallback.decided', 'notice.failed']) {
        const entry = o.events.find((e) => e.type === type);
        if (entry && !received.has(type)) {
          // Where the event stopped: its delivery job, or the log entry the dispatch never turned into one.
          const jobId = `evt_${o.id}_${entry.seq}-${this.endpointId}`;
          const job = await this.web.queues.eventDelivery.getJob(jobId).catch(() => undefined);
          const state = job
            ? `${await job.getState()} after ${job.attemptsMade} runs${job.failedReason ? ` (${job.failedReason.slice(0, 120)})` : ''}`
            : 'no delivery job';
          violations.push({
            rule: 'event-not-delivered',
            notice: o.id,
            detail: `${type} (${entry.id}) is in the trail of ${o.id}; the endpoint never received it; ${state}`,
          });
        }
      }
    }
    return violations;
  }

  async close(): Promise<void> {
    this.eventListener?.closeAllConnections();
    await new Promise((resolve) => (this.eventListener ? this.eventListener.close(resolve) : resolve(undefined)));
    await Promise.allSettled(this.workers.map((w) => w.stop('SIGKILL')));
    await this.archive?.close();
    await this.web?.close().catch(() => undefined);
    await this.sandbox?.close();
    await this.redis?.stop();
  }

  /** What the outbox did (each duplicate is a second record of its event) and what the logs recorded. */
  private webhookSummary(outcomes: NoticeOutcome[]): NonNullable<ChaosReport['webhooks']> {
    const deliveries = this.sandbox.webhookDeliveries();
    const answers: Record<string, number> = {};
    for (const d of deliveries) {
      if (d.faults.includes('drop')) continue;
      const key = d.status === undefined ? 'none' : String(d.status);
      answers[key] = (answers[key] ?? 0) + 1;
    }
    const observed = outcomes.flatMap((o) => o.events).filter((e) => e.type === 'email.observed' || e.type === 'sms.observed');
    const fromWebhooks = observed.filter((e) => e.source === 'webhook');
    // A duplicated event has two records; a dropped one is never sent, so never twice.
    const duplicated = deliveries.filter((d) => d.faults.includes('duplicate') && !d.faults.includes('drop')).length / 2;
    return {
      planned: deliveries.length - duplicated,
      dropped: deliveries.filter((d) => d.faults.includes('drop')).length,
      duplicated,
      answers,
      observations: fromWebhooks.length,
      polls: observed.length - fromWebhooks.length,
      checksSaved: fromWebhooks.reduce((sum, e) => sum + (Number(e.checksSaved) || 0), 0),
    };
  }

  // ---- the plan, step by step -----------------------------------------------------------------

  private async create(notice: NoticePlan): Promise<void> {
    const body = {
      recipient: { id: notice.recipientId, email: notice.email, ...(notice.phone ? { phone: notice.phone } : {}) },
      category: 'chaos',
      content: {
        subject: `Chaos notice ${notice.index}`,
        text: 'A notice under fault injection.',
        sms: `Chaos notice ${notice.index} of seed ${this.plan.seed}`,
      },
      deadlineInSeconds: notice.deadlineInSeconds,
    };
    const key = `chaos-${this.plan.seed}-${notice.index}`;
    const answer = await this.call('POST /v1/notices', 'POST', '/v1/notices', body, { 'idempotency-key': key });
    if (answer.status !== 202 && answer.status !== 200) {
      this.report.notices.notAccepted += 1;
      return;
    }
    this.ids.set(notice.index, answer.body.id as string);
    if (answer.status === 202) this.report.notices.accepted += 1;
    else this.report.notices.replayed += 1;
    if (notice.cancel) {
      const canceled = await this.call('POST /v1/notices/:id/cancel', 'POST', `/v1/notices/${answer.body.id as string}/cancel`);
      this.cancelStatus.set(notice.index, canceled.status);
    }
    if (notice.withdrawSmsConsent) {
      const put = await this.call('PUT /v1/recipients/:id/policy', 'PUT', `/v1/recipients/${notice.recipientId}/policy`, {
        consent: { email: true, sms: false },
      });
      if (put.status === 200) this.consentWithdrawn.add(notice.index);
    }
  }

  /**
   * One API call, repeated while Herald answers 503 (Redis is down). Any other 5xx is a
   * violation: an outage must be an orderly 503.
   */
  private async call(
    route: string,
    method: 'GET' | 'POST' | 'PUT',
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any }> {
    for (let attempt = 0; ; attempt += 1) {
      const res = await this.web.call(method, url, body, headers);
      const label = `${route} ${res.statusCode}`;
      this.report.answers[label] = (this.report.answers[label] ?? 0) + 1;
      if (res.statusCode === 503 && attempt < 200) {
        await sleep(150);
        continue;
      }
      if (res.statusCode >= 500)
        this.violations.push({ rule: 'web-5xx', detail: `${method} ${url} answered ${res.statusCode}: ${res.body}` });
      return { status: res.statusCode, body: res.statusCode < 500 ? res.json() : undefined };
    }
  }

  private async apply(event: ChaosEvent): Promise<void> {
    switch (event.kind) {
      case 'sigkill':
      case 'sigterm': {
        // A SIGTERM is meant for a running worker; one still booting has no handler for it yet.
        const index = event.kind === 'sigkill' ? this.upWorker(event.worker, false) : await this.readyWorker(event.worker);
        if (index === undefined) {
          this.report.skippedEvents.push(`${event.kind} at ${event.at} ms: no worker up`);
          return;
        }
        this.down.add(index);
        const worker = this.workers[index]!;
        if (event.kind === 'sigkill') {
          await worker.stop('SIGKILL');
          this.report.sigkills += 1;
        } else {
          const activeJobs = await this.activeJobs();
          const exitCode = await worker.stop('SIGTERM');
          this.report.sigterms.push({ exitCode, activeJobs });
          if (exitCode !== 0)
            this.violations.push({ rule: 'graceful-shutdown', detail: `SIGTERM at ${event.at} ms: worker ${index} exited ${exitCode}` });
        }
        await sleep(event.downMs);
        worker.start();
        this.down.delete(index);
        this.report.workerRestarts += 1;
        return;
      }
      case 'redis-restart': {
        await this.redis.restart(event.downMs, this.report.redisRestarts.length);
        this.report.redisRestarts.push({ downMs: event.downMs });
        return;
      }
      case 'provider-fault': {
        this.sandbox.injectFault(event.fault);
        const label = `${event.fault.operation} ${event.fault.mode}`;
        this.report.providerFaults[label] = (this.report.providerFaults[label] ?? 0) + 1;
        return;
      }
      case 'duplicate-job': {
        const id = this.ids.get(event.notice);
        if (id === undefined) {
          this.report.duplicateJobs.skipped += 1;
          return;
        }
        const own: Record<typeof event.queue, string> = {
          emailSend: jobIds.emailSend(id),
          emailPoll: jobIds.emailPoll(id),
          deadline: jobIds.deadline(id),
          smsSend: jobIds.smsSend(id),
          smsPoll: jobIds.smsPoll(id),
        };
        const jobId = event.sameId ? own[event.queue] : `dup${event.at}-${own[event.queue]}`;
        try {
          await this.web.queues[event.queue].add(event.queue, { noticeId: id }, { jobId, delay: event.delayMs });
          this.report.duplicateJobs.added += 1;
          if (event.sameId) this.report.duplicateJobs.sameId += 1;
        } catch {
          // Redis is down at this moment: the duplicate simply does not happen.
          this.report.duplicateJobs.skipped += 1;
        }
        return;
      }
    }
  }

  /** The planned worker if it is up (and ready, when asked), else the first one that is, else none. */
  private upWorker(planned: number, ready: boolean): number | undefined {
    const up = (i: number) => !this.down.has(i) && (ready ? this.workers[i]!.ready : this.workers[i]!.exitCode === null);
    if (up(planned)) return planned;
    const other = this.workers.findIndex((_, i) => up(i));
    return other === -1 ? undefined : other;
  }

  private async readyWorker(planned: number): Promise<number | undefined> {
    const until = Date.now() + 10_000;
    for (;;) {
      const index = this.upWorker(planned, true);
      if (index !== undefined || Date.now() > until) return index;
      await sleep(100);
    }
  }

  private async activeJobs(): Promise<number | null> {
    try {
      const counts = await Promise.all(Object.values(this.web.queues).map((q) => q.getActiveCount()));
      return counts.reduce((a, b) => a + b, 0);
    } catch {
      return null;
    }
  }

  // ---- after the faults -----------------------------------------------------------------------

  private async states(ids: string[]): Promise<{ state: string | null; retired: boolean }[]> {
    try {
      const states = (await this.web.store.statesOf(ids)).map((state) => ({ state: state ?? null, retired: false }));
      // Gone from Redis: retired, with its state in its archive record (or lost).
      for (const [i, entry] of states.entries()) {
        if (entry.state !== null) continue;
        const record = await this.archive.readRecord(ids[i]!);
        if (record) states[i] = { state: record.view.state, retired: true };
      }
      return states;
    } catch {
      return ids.map(() => ({ state: null, retired: false }));
    }
  }

  /** Waits until no notice job is waiting or delayed, so that duplicates have run out. */
  private async drainJobs(until: number): Promise<void> {
    const queues = Object.entries(this.web.queues)
      .filter(([name]) => name !== 'reconcile')
      .map(([, q]) => q);
    while (Date.now() < until) {
      const counts = await Promise.all(queues.map((q) => q.getJobCounts('wait', 'delayed', 'prioritized', 'active'))).catch(() => null);
      if (counts && counts.every((c) => Object.values(c).every((n) => n === 0))) break;
      await sleep(250);
    }
    await sleep(500);
  }

  /** The notice's jobs as BullMQ holds them, to tell why a notice stopped moving. */
  private async jobsOf(id: string): Promise<string> {
    const wanted: [keyof typeof this.web.queues, string][] = [
      ['emailSend', jobIds.emailSend(id)],
      ['deadline', jobIds.deadline(id)],
      ['smsSend', jobIds.smsSend(id)],
      ['emailPoll', jobIds.emailPoll(id)],
      ['smsPoll', jobIds.smsPoll(id)],
    ];
    const found: string[] = [];
    for (const [queue, jobId] of wanted) {
      const job = await this.web.queues[queue].getJob(jobId);
      if (!job) continue;
      const state = await job.getState();
      found.push(
        `${jobId.slice(id.length + 1)}=${state}/${job.attemptsMade}${job.failedReason ? `(${job.failedReason.slice(0, 80)})` : ''}`,
      );
    }
    return found.join(' ') || 'none';
  }

  private async outcomes(): Promise<NoticeOutcome[]> {
    const emails = this.sandbox.emails();
    const sms = this.sandbox.sms();
    const outcomes: NoticeOutcome[] = [];
    for (const plan of this.plan.notices) {
      const id = this.ids.get(plan.index);
      const hash = id ? await this.web.redis.hgetall(this.web.store.keys.notice(id)) : null;
      const outcome: NoticeOutcome = {
        plan,
        id,
        hash: hash && hash.state ? hash : null,
        events: id ? await this.web.store.events(id) : [],
        emails: id ? emails.filter((m) => m.metadata.notice_id === id) : [],
        sms: plan.phone ? sms.filter((m) => m.to === plan.phone) : [],
      };
      if (id && !outcome.hash) await this.fromRecord(id, outcome);
      const cancelStatus = this.cancelStatus.get(plan.index);
      if (cancelStatus !== undefined) outcome.cancelStatus = cancelStatus;
      if (this.consentWithdrawn.has(plan.index)) outcome.consentWithdrawn = true;
      outcomes.push(outcome);
    }
    return outcomes;
  }

  /** The archive the workers wrote through kills and Redis restarts: each shard's seals and chain hold, as `herald audit --verify` checks them. */
  private async archiveChains(): Promise<Violation[]> {
    const chains = new LogMirrorStore(this.web.redis, this.web.store.keys);
    const violations: Violation[] = [];
    for (const shard of this.web.store.keys.allShards()) {
      const verdict = await verifyShard(this.archive, shard, {
        retainedSince: 0,
        chain: await chains.chain(shard),
        pending: await chains.pendingBatches(shard),
      });
      if (verdict.broken) violations.push({ rule: 'archive-chain', detail: `${verdict.broken.key}: ${verdict.broken.why}` });
    }
    return violations;
  }

  /**
   * `/v1/stats`, from the counters the scripts keep through crashes, duplicates and restarts,
   * against the counts of every accepted notice read one by one (its hash, or its archive record).
   */
  private async statsViolations(): Promise<Violation[]> {
    const counted: RetiredStats[] = [];
    for (const id of new Set(this.ids.values())) {
      const stats = statsOfHash(await this.web.redis.hgetall(this.web.store.keys.notice(id))) ?? (await this.archive.readRecord(id))?.stats;
      if (!stats) return [{ rule: 'stats', notice: id, detail: 'neither Redis nor the archive holds the notice' }];
      counted.push(stats);
    }
    const from = Math.floor(this.started / STATS_HOUR_MS) * STATS_HOUR_MS;
    const to = Math.ceil((Date.now() + 1) / STATS_HOUR_MS) * STATS_HOUR_MS;
    const res = await this.web.call('GET', `/v1/stats?from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}`);
    if (res.statusCode !== 200) return [{ rule: 'stats', detail: `GET /v1/stats answered ${res.statusCode}: ${res.body}` }];
    const { from: _from, to: _to, window: _window, ...answered } = res.json();
    const expected = tally(counted, this.prices);
    return isDeepStrictEqual(answered, expected)
      ? []
      : [{ rule: 'stats', detail: `GET /v1/stats answered ${JSON.stringify(answered)}, the notices count ${JSON.stringify(expected)}` }];
  }

  /** A retired notice as the archive holds it: its record's fields the rules read, its trail as the API reads it. */
  private async fromRecord(id: string, outcome: NoticeOutcome): Promise<void> {
    const record = await this.archive.readRecord(id);
    if (!record) return;
    const { view } = record;
    const fields: Record<string, string | null | undefined> = {
      state: view.state,
      seq: String(record.entryIds.length),
      fallbackReason: view.fallback?.reason,
      emailProviderMessageId: view.email.providerMessageId,
      smsProviderMessageId: view.sms?.providerMessageId,
    };
    outcome.hash = Object.fromEntries(Object.entries(fields).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
    outcome.retired = true;
    const trail = await readTrail({ store: this.web.store, archive: () => this.archive, retainedSince: 0 }, id);
    outcome.events = trail.entries;
  }

  // ---- time -----------------------------------------------------------------------------------

  private async until(offsetMs: number): Promise<void> {
    const wait = this.started + offsetMs - Date.now();
    if (wait > 0) await sleep(wait);
  }

  private later(offsetMs: number, task: () => Promise<void>): Promise<void> {
    return this.until(offsetMs).then(task);
  }

  private track(task: Promise<unknown>): void {
    const tracked = task.catch((error: unknown) => {
      this.violations.push({ rule: 'harness', detail: `a chaos step failed: ${String(error)}` });
    });
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }
}

/** The report as the run prints it. */
export function formatReport(report: ChaosReport): string {
  const list = (counts: Record<string, number>) =>
    Object.entries(counts)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `${k} ×${n}`)
      .join(', ') || 'none';
  const lines = [
    `chaos seed ${report.seed} — replay with CHAOS_SEED=${report.seed}`,
    `notices: ${report.notices.planned} planned, ${report.notices.accepted} accepted with 202, ${report.notices.replayed} with an idempotent 200 after a retry, ${report.notices.notAccepted} not accepted`,
    `end states: ${list(report.endStates)}; ${report.retired} of them read from the archive, Redis having let go of them; ${report.eventsReceived} events received by the subscribed endpoint`,
    `kills: ${report.sigkills} SIGKILL, ${report.sigterms.length} SIGTERM (exit codes ${report.sigterms.map((s) => String(s.exitCode)).join(', ') || '-'}; jobs active at the signal ${report.sigterms.map((s) => s.activeJobs ?? '?').join(', ') || '-'})`,
    `restarts: ${report.workerRestarts} worker restarts, ${report.redisRestarts.length} Redis restarts (SIGKILL, AOF appendfsync always; down ${report.redisRestarts.map((r) => `${r.downMs} ms`).join(', ') || '-'})`,
    `provider faults: ${list(report.providerFaults)}`,
    `duplicate jobs: ${report.duplicateJobs.added} added (${report.duplicateJobs.sameId} under the job's own ID), ${report.duplicateJobs.skipped} skipped`,
    `API answers: ${list(report.answers)}`,
    `sent: ${report.emails} emails, ${report.sms} SMS at the emulator; ${report.fallbackDecided} fallback.decided, ${report.smsNeeded} SMS needed`,
    `settled: ${report.settledAfterMs === null ? `NOT within ${report.settleBoundMs} ms` : `${report.settledAfterMs} ms after the faults stopped (bound ${report.settleBoundMs} ms)`}; whole run ${report.elapsedMs} ms`,
  ];
  if (report.webhooks) {
    const w = report.webhooks;
    lines.push(
      `webhooks: ${w.planned} events, ${w.dropped} dropped, ${w.duplicated} duplicated; Herald answered ${list(w.answers)}; recorded ${w.observations} observations from webhooks beside ${w.polls} from polls, ${w.checksSaved} checks saved`,
    );
  }
  if (report.skippedEvents.length > 0) lines.push(`skipped: ${report.skippedEvents.join('; ')}`);
  lines.push(`violations: ${report.violations.length === 0 ? 'none' : report.violations.length}`);
  for (const v of report.violations.slice(0, 40)) lines.push(`  - [${v.rule}] ${v.notice ?? ''} ${v.detail}`);
  if (report.workerOutput) lines.push(report.workerOutput);
  if (report.workerLogs) lines.push(`worker logs: ${report.workerLogs}`);
  return lines.join('\n');
}
