import { afterAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { sleep, testPrefix } from '../helpers/env.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';

let stack: Stack | undefined;
const workers: WorkerProcess[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  await stack?.close();
});

describe('the status-call limit', () => {
  it('holds Postmark status calls to the configured rate across two worker processes', async () => {
    const limit = 2;
    stack = await startStack({
      prefix: testPrefix('limit'),
      inProcessWorker: false,
      env: { HERALD_POSTMARK_STATUS_PER_SECOND: String(limit), HERALD_MIN_POLL_INTERVAL_MS: '1000', HERALD_MAX_CHECKS_PER_NOTICE: '100' },
    });
    workers.push(new WorkerProcess(stack.env).start(), new WorkerProcess(stack.env).start());
    const started = Date.now();
    // Six notices that each want a status check every second, for a minute: 6 checks/s wanted.
    for (let i = 0; i < 6; i += 1) {
      await stack.createNotice(
        noticeBody({
          recipient: { id: `lim-${i}`, email: 'never@example.com' },
          deadlineInSeconds: 60,
          policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 1 },
        }),
      );
    }
    await sleep(9_000);
    const reads = stack.sandbox
      .requests()
      .filter((r) => r.operation === 'postmark.details' && r.at >= started)
      .map((r) => r.at);
    // Windows of one second: the limiter's own windows need not align with these, so two of
    // its windows can fall into one of ours.
    let busiest = 0;
    for (const at of reads) busiest = Math.max(busiest, reads.filter((t) => t >= at && t < at + 1000).length);
    expect(reads.length).toBeGreaterThan(limit * 3);
    expect(reads.length).toBeLessThanOrEqual(limit * 9 + limit);
    expect(busiest).toBeLessThanOrEqual(limit * 2);
  });
});
