import { afterAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { sleep, testPrefix, waitFor } from '../helpers/env.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';

let stack: Stack | undefined;
const workers: WorkerProcess[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await stack?.close();
});

describe('the status-call limit', () => {
  it('holds Postmark status calls to the configured rate across two worker processes, and shows the checks it makes late', async () => {
    const limit = 2;
    stack = await startStack({
      prefix: testPrefix('limit'),
      inProcessWorker: false,
      env: { HERALD_EMAIL_STATUS_PER_SECOND: String(limit), HERALD_MIN_POLL_INTERVAL_MS: '1000', HERALD_MAX_CHECKS_PER_NOTICE: '100' },
    });
    const env = { ...stack.env, LOG_LEVEL: 'info' };
    workers.push(new WorkerProcess(env).start(), new WorkerProcess(env).start());
    // The window below is measured from when both run: a loaded machine may take seconds to start them.
    await waitFor(async () => workers.every((w) => w.ready), 120_000, 'the worker processes to run');
    const started = Date.now();
    const ids: string[] = [];
    // Forty notices that each want a status check every second, for a minute: 40 checks/s wanted,
    // so that the checks queue behind the limiter for some 20 s.
    for (let i = 0; i < 40; i += 1) {
      const id = await stack.createNotice(
        noticeBody({
          recipient: { id: `lim-${i}`, email: 'never@example.com' },
          deadlineInSeconds: 60,
          policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 1 },
        }),
      );
      ids.push(id);
    }
    await sleep(14_000);
    // Stopped, so that the log and /metrics below are read at rest.
    await Promise.all(workers.map((w) => w.stop('SIGKILL')));
    const seconds = Math.ceil((Date.now() - started) / 1000);
    const reads = stack.sandbox
      .requests()
      .filter((r) => r.operation === 'postmark.details' && r.at >= started)
      .map((r) => r.at);
    // Windows of two seconds: the limiter's own one-second windows need not align with these,
    // so three of them can fall into one of ours (and the emulator stamps requests on this
    // process's event loop, which a loaded machine delays).
    let busiest = 0;
    for (const at of reads) busiest = Math.max(busiest, reads.filter((t) => t >= at && t < at + 2000).length);
    expect(reads.length).toBeGreaterThan(limit * 3);
    expect(reads.length).toBeLessThanOrEqual(limit * seconds + limit);
    expect(busiest).toBeLessThanOrEqual(limit * 3);

    // Every planned check records when it was planned; the limiter makes them run ever later.
    const observed = (await Promise.all(ids.map((id) => stack!.events(id)))).flat().filter((e) => e.type === 'email.observed');
    expect(observed.length).toBeGreaterThan(0);
    const lateness = observed.map((e: any) => Date.parse(e.observedAt) - Date.parse(e.plannedAt));
    expect(lateness.every((ms) => Number.isFinite(ms) && ms >= 0)).toBe(true);
    expect(Math.max(...lateness)).toBeGreaterThan(5_000);
    // /metrics has the lateness histogram, and a worker warned that checks run late, naming the limit.
    const metrics = (await stack.web.call('GET', '/metrics', undefined, { authorization: '' })).body as string;
    const count = Number(/^herald_status_check_lateness_seconds_count\{channel="email"\} (\d+)/m.exec(metrics)?.[1]);
    const within5s = Number(/^herald_status_check_lateness_seconds_bucket\{le="5",channel="email"\} (\d+)/m.exec(metrics)?.[1]);
    expect(count).toBe(observed.length);
    expect(within5s).toBeLessThan(count);
    expect(workers.map((w) => w.output).join('\n')).toMatch(/planned email status checks run late.*HERALD_EMAIL_STATUS_PER_SECOND/);
  });
});
