import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageVersion } from '../../src/cli/version.js';
import { testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { exposes, metricNamesIn, opsExpressions } from '../helpers/ops-files.js';
import { hasPromtool, promtool } from '../helpers/promtool.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';
import { runEntryPoint } from '../helpers/web-process.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';

/** Herald's error answer, as far as these tests read it. */
type ErrorAnswer = { error: { code: string; message: string } };

/** The value of the sample of `name` whose labels include `labels`, undefined when none. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const present = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => present[k] === v)) return Number(match[3]);
  }
  return undefined;
}

/** Starts a worker process with its metrics listener on a free port; its URL once it runs. */
async function startWorkerWithMetrics(env: Record<string, string>): Promise<{ worker: WorkerProcess; url: string }> {
  const port = await freePort();
  const worker = new WorkerProcess({ ...env, HERALD_WORKER_METRICS_PORT: String(port), LOG_LEVEL: 'info' }).start();
  await waitFor(
    async () => {
      if (worker.exitCode !== null) throw new Error(`the worker exited with ${worker.exitCode}: ${worker.output}`);
      return worker.ready;
    },
    30_000,
    'the worker to run',
  );
  const url = `http://127.0.0.1:${port}`;
  expect(worker.output).toContain(`"metricsUrl":"${url}"`);
  return { worker, url };
}

describe('HERALD_WORKER_METRICS_PORT: the worker serves /metrics and /healthz on its own port', () => {
  let stack: Stack;
  let worker: WorkerProcess;
  let url: string;
  let metrics: string;
  const address = 'delivered+200ms+wmetrics@example.com';
  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('wmetrics'), inProcessWorker: false });
    // A provider timeout long enough for a scrape to see the send that hangs (below).
    ({ worker, url } = await startWorkerWithMetrics({ ...stack.env, HERALD_PROVIDER_TIMEOUT_MS: '4000' }));
    // The first send fails with a 500 (left in doubt, searched for, sent again), then the status reads deliver it.
    stack.sandbox.injectFault({ operation: 'postmark.send', mode: 'status_500', match: address });
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'p-metrics', email: address, phone: '+12025550100' }, deadlineInSeconds: 20 }),
    );
    await stack.waitForState(id, ['email_delivered'], 30_000);
    metrics = await (await fetch(`${url}/metrics`)).text();
  }, 90_000);
  afterAll(async () => {
    await worker?.stop('SIGKILL');
    await stack?.close();
  });

  it('times every provider call by provider, operation and outcome', () => {
    const count = (operation: string, outcome: string) =>
      sample(metrics, 'herald_provider_call_duration_seconds_count', { provider: 'postmark-sandbox', operation, outcome }) ?? 0;
    expect(count('send', 'server_error'), metrics).toBeGreaterThanOrEqual(1);
    expect(count('send', 'ok')).toBeGreaterThanOrEqual(1);
    expect(count('status', 'ok')).toBeGreaterThanOrEqual(1);
    const within = sample(metrics, 'herald_provider_call_duration_seconds_bucket', {
      provider: 'postmark-sandbox',
      operation: 'send',
      outcome: 'ok',
      le: '+Inf',
    });
    expect(within).toBe(count('send', 'ok'));
    expect(sample(metrics, 'herald_provider_call_duration_seconds_sum', { operation: 'send', outcome: 'ok' })).toBeGreaterThan(0);
  });

  it('reports the jobs it runs by queue, its event-loop lag, its heap and the build it runs', () => {
    for (const queue of ['email-send', 'email-poll', 'deadline', 'sms-send', 'sms-poll', 'reconcile', 'log-mirror', 'event-delivery'])
      expect(sample(metrics, 'herald_jobs_running', { queue }), queue).toBeGreaterThanOrEqual(0);
    expect(metrics).toMatch(/^# TYPE herald_jobs_running gauge$/m);
    expect(sample(metrics, 'herald_worker_nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(sample(metrics, 'herald_worker_nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
    expect(sample(metrics, 'herald_build_info', { version: packageVersion(), node: process.versions.node })).toBe(1);
    // The cluster-wide series are the web's: a worker's scrape has none of them.
    expect(metrics).not.toMatch(/^herald_notices_accepted_total/m);
  });

  it('serves, with the web, every series the Grafana dashboard and the alert rules in ops/ use', async () => {
    const web = (await stack.web.call('GET', '/metrics')).body;
    const { dashboard, rules } = opsExpressions();
    const names = metricNamesIn([...dashboard, ...rules]);
    expect(names.length).toBeGreaterThan(20);
    const missing = names.filter((name) => !exposes(web, name) && !exposes(metrics, name));
    expect(missing).toEqual([]);
  });

  it.skipIf(!hasPromtool)('passes promtool check metrics', async () => {
    const checked = await promtool(['check', 'metrics'], metrics);
    expect(checked.output, checked.output).toBe('');
    expect(checked.code).toBe(0);
  });

  it('answers /healthz 200 with its connections and workers, and anything else 404 not_found', async () => {
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    const body = (await health.json()) as { status: string; redis: Record<string, string>; workers: { running: number; total: number } };
    expect(body.status).toBe('ok');
    expect(body.redis).toEqual({ jobs: 'ready', steps: 'ready' });
    expect(body.workers.running).toBe(body.workers.total);
    expect(body.workers.total).toBeGreaterThanOrEqual(10);
    const other = await fetch(`${url}/v1/notices`);
    expect(other.status).toBe(404);
    expect(((await other.json()) as ErrorAnswer).error.code).toBe('not_found');
  });

  it('counts a job in herald_jobs_running while it runs, and the call that hung as a timeout', async () => {
    const hangs = 'delivered+200ms+whang@example.com';
    stack.sandbox.injectFault({ operation: 'postmark.send', mode: 'accept_then_hang', match: hangs });
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'p-hang', email: hangs, phone: '+12025550100' }, deadlineInSeconds: 30 }),
    );
    const scrape = async () => (await fetch(`${url}/metrics`)).text();
    // The notice's one job (in the deadline queue) sends its email.
    await waitFor(
      async () => sample(await scrape(), 'herald_jobs_running', { queue: 'deadline' }) === 1,
      10_000,
      'the send job to be running',
    );
    await stack.waitForState(id, ['email_delivered'], 30_000);
    const after = await waitFor(
      async () => {
        const text = await scrape();
        return sample(text, 'herald_jobs_running', { queue: 'deadline' }) === 0 && text;
      },
      10_000,
      'the send job to be done',
    );
    expect(
      sample(after, 'herald_provider_call_duration_seconds_count', { provider: 'postmark-sandbox', operation: 'send', outcome: 'timeout' }),
    ).toBe(1);
    // The timeout took the provider timeout: it is counted above the 2.5 s bucket.
    expect(
      sample(after, 'herald_provider_call_duration_seconds_bucket', {
        provider: 'postmark-sandbox',
        operation: 'send',
        outcome: 'timeout',
        le: '2.5',
      }),
    ).toBe(0);
  }, 60_000);

  it('closes its listener on SIGTERM, once its jobs are done, and exits 0', async () => {
    expect(await worker.stop('SIGTERM')).toBe(0);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });
});

describe("the worker's /healthz when its Redis goes away", () => {
  let server: RedisServer;
  let worker: WorkerProcess;
  let url: string;
  const prefix = testPrefix('whealth');
  beforeAll(async () => {
    server = await RedisServer.start();
    ({ worker, url } = await startWorkerWithMetrics(testEnv(prefix, { REDIS_URL: server.url })));
  }, 60_000);
  afterAll(async () => {
    await worker?.stop('SIGKILL');
    await server?.stop();
  });

  it('answers 503 unavailable naming the connection, while /metrics still answers', async () => {
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await server.stop();
    const answer = await waitFor(
      async () => {
        const res = await fetch(`${url}/healthz`);
        return res.status === 503 && ((await res.json()) as ErrorAnswer);
      },
      15_000,
      '/healthz to answer 503',
    );
    expect(answer.error.code).toBe('unavailable');
    expect(answer.error.message).toMatch(/Redis connection is (?!ready)/);
    expect((await fetch(`${url}/metrics`)).status).toBe(200);
  });
});

describe('HERALD_WORKER_METRICS_PORT on a port in use', () => {
  it('stops the worker with exit 1 and one line naming the variable', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const run = await runEntryPoint('dist/src/worker.js', testEnv(testPrefix('wmport'), { HERALD_WORKER_METRICS_PORT: String(port) }));
      expect(run.code, run.output).toBe(1);
      expect(run.output).toContain(`herald: port ${port} on 127.0.0.1 is in use; set HERALD_WORKER_METRICS_PORT to a free port.`);
    } finally {
      taken.close();
    }
  });
});
