import { afterEach, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { sleep, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { RedisServer } from '../helpers/redis-server.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';
import { Relay } from '../helpers/relay.js';
import { testConfig } from '../helpers/env.js';
import { createLogger } from '../../src/logger.js';
import { startWorker } from '../../src/worker.js';
import { SHUTDOWN_BOUND_MS } from '../../src/signals.js';

let stack: Stack | undefined;
let worker: WorkerProcess | undefined;
afterEach(async () => {
  await worker?.stop('SIGKILL');
  await stack?.close();
  stack = undefined;
});

describe('a worker process sent SIGTERM while a job runs', () => {
  it('finishes that job, exits 0 within the bound, and leaves no job active', async () => {
    stack = await startStack({ prefix: testPrefix('term'), inProcessWorker: false, env: { HERALD_PROVIDER_TIMEOUT_MS: '5000' } });
    worker = new WorkerProcess({ ...stack.env, LOG_LEVEL: 'info' }).start();
    // `slow` makes the emulator answer 1.5 s late: the send job is mid-call when the signal lands.
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'slow-1', email: 'slow+200ms@example.com' }, deadlineInSeconds: 60 }),
    );
    await waitFor(
      async () => stack!.sandbox.requests().some((r) => r.operation === 'postmark.send' && r.outcome === 'pending'),
      20_000,
      'the email send to be in flight',
    );
    const signalled = Date.now();
    const code = await worker.stop('SIGTERM');
    const took = Date.now() - signalled;
    expect(code).toBe(0);
    expect(took).toBeLessThan(SHUTDOWN_BOUND_MS);
    expect(worker.output).toMatch(/shut down cleanly/);
    // The job that was running finished its step: the email is stored as accepted.
    const view = await stack.view(id);
    expect(view.state).toBe('email_sent');
    expect((await stack.events(id)).filter((e) => e.type === 'email.accepted')).toHaveLength(1);
    expect(await stack.web.queues.deadline.getActiveCount()).toBe(0);
  });
});

describe('a worker process sent SIGTERM while Redis is down', () => {
  it('still exits 0 within the bound once Redis is back (BullMQ alone would wait for ever)', async () => {
    const redis = await RedisServer.start({ appendfsync: 'everysec' });
    try {
      const env = { ...testEnv(testPrefix('termdown')), REDIS_URL: redis.url, LOG_LEVEL: 'info' };
      worker = new WorkerProcess(env).start();
      await waitFor(async () => worker!.ready, 20_000, 'the worker to run');
      await redis.kill('SIGKILL');
      // The worker's connections notice the loss and start reconnecting before the signal.
      await sleep(300);
      const stopped = worker.stop('SIGTERM');
      await sleep(1_500);
      await redis.start();
      expect(await stopped).toBe(0);
      expect(worker.output).toMatch(/shut down cleanly/);
    } finally {
      await worker?.stop('SIGKILL');
      await redis.stop();
    }
  });
});

describe('a worker closed after it called the providers', () => {
  it('closes its kept provider connections', async () => {
    stack = await startStack({ prefix: testPrefix('conns'), inProcessWorker: false });
    const relay = await new Relay(stack.sandbox.port).start();
    try {
      const urls = { POSTMARK_API_URL: relay.url, TWILIO_API_URL: relay.url };
      const handle = await startWorker(testConfig(stack.config.prefix, { ...stack.env, ...urls }), {
        logger: createLogger('herald-test-worker', 'silent'),
      });
      const id = await stack.createNotice(
        noticeBody({ recipient: { id: 'conns-1', email: 'delivered+100ms@example.com' }, deadlineInSeconds: 60 }),
      );
      await stack.waitForState(id, ['email_delivered']);
      // The send and the status checks went over connections the worker keeps open.
      expect(relay.connections).toBeGreaterThan(0);
      expect(relay.open).toBeGreaterThan(0);
      await handle.close();
      await waitFor(async () => relay.open === 0, 2_000, "the worker's provider connections to close");
    } finally {
      await relay.stop();
    }
  });
});
