import { afterEach, describe, expect, it } from 'vitest';
// The BullMQ of Herald's earlier releases, installed under another name for this test only.
import { Queue as QueueOfV5, type ConnectionOptions as ConnectionOfV5 } from 'bullmq-v5';
import type { Queue } from 'bullmq';
import type { RedisClient } from '../../src/store/redis.js';
import { connectRedis } from '../../src/store/redis.js';
import { jobIds } from '../../queues/index.js';
import { noticeBody } from '../helpers/herald.js';
import { testPrefix, waitFor } from '../helpers/env.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';

/**
 * A deployment upgraded from BullMQ 5 keeps the queues BullMQ 5 wrote: its delayed jobs run as
 * they are, and the jobs of a queue paused under BullMQ 5 (kept in a `paused` list that BullMQ 6
 * no longer writes) run once the queue is resumed under BullMQ 6.
 */
let stack: Stack | undefined;
let worker: WorkerProcess | undefined;
let redis: RedisClient | undefined;
const earlier: QueueOfV5[] = [];

afterEach(async () => {
  await Promise.all(earlier.splice(0).map((q) => q.close()));
  await worker?.stop('SIGKILL');
  worker = undefined;
  await redis?.quit();
  redis = undefined;
  await stack?.close();
  stack = undefined;
});

/**
 * The same queue, opened with BullMQ 5 on the same keys. BullMQ 5's types name the ioredis 5 it
 * was installed with; it drives Herald's ioredis 6 connection through the same client API.
 */
function asOfV5(queue: Queue): QueueOfV5 {
  const opened = new QueueOfV5(queue.name, { connection: redis! as unknown as ConnectionOfV5, prefix: queue.opts.prefix });
  earlier.push(opened);
  return opened;
}

describe('queues written by BullMQ 5', () => {
  it("run under BullMQ 6: a delayed job as it is, a paused queue's jobs once it is resumed", async () => {
    stack = await startStack({ prefix: testPrefix('bullmq5'), inProcessWorker: false });
    redis = connectRedis(stack.config.redis, 'worker', 'herald-test-bullmq5');
    const phone = '+15035550100';
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'p-bullmq5', email: 'never@example.com', phone }, deadlineInSeconds: 15 }),
    );
    const created = await stack.view(id);
    const emailSend = stack.web.queues.emailSend.of(id);
    const deadline = stack.web.queues.deadline.of(id);

    // The notice's two jobs as BullMQ 5 stored them: the send in a queue paused under BullMQ 5,
    // the deadline delayed.
    expect(await emailSend.remove(jobIds.emailSend(id))).toBe(1);
    expect(await deadline.remove(jobIds.deadline(id))).toBe(1);
    const emailSendOfV5 = asOfV5(emailSend);
    await emailSendOfV5.pause();
    await emailSendOfV5.add('email-send', { noticeId: id }, { jobId: jobIds.emailSend(id) });
    await asOfV5(deadline).add(
      'deadline',
      { noticeId: id },
      { jobId: jobIds.deadline(id), delay: Date.parse(created.deadline) - Date.now() },
    );
    // BullMQ 5's layout: the paused queue's job in its `paused` list, not in `wait`.
    expect(await redis.lrange(emailSend.toKey('paused'), 0, -1)).toEqual([jobIds.emailSend(id)]);
    expect(await redis.llen(emailSend.toKey('wait'))).toBe(0);
    expect(await deadline.getJobState(jobIds.deadline(id))).toBe('delayed');

    worker = new WorkerProcess(stack.env).start();
    // The worker names the queue whose jobs BullMQ 6 neither counts nor runs until it is resumed.
    const warning = await waitFor(
      async () => worker!.output.split('\n').find((line) => line.includes('queue paused under BullMQ 5')),
      20_000,
      'the worker to name the queue paused under BullMQ 5',
    );
    expect(JSON.parse(warning)).toMatchObject({ queue: expect.stringMatching(/(^|\.)email-send$/), jobs: 1 });
    expect(await emailSend.isPaused()).toBe(true);
    expect(await emailSend.getJobCounts('wait')).toEqual({ wait: 0 });
    await stack.web.queues.emailSend.resume();
    expect(await redis.llen(emailSend.toKey('paused'))).toBe(0);

    // The email goes out from the job of the paused list, the deadline's delayed job decides the
    // fallback, and the SMS is sent once.
    const view = await stack.waitForState(id, ['sms_delivered', 'sms_failed'], 60_000);
    expect(view.state).toBe('sms_delivered');
    const events = await stack.events(id);
    expect(events.filter((e) => e.type === 'email.requested')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'fallback.decided')).toHaveLength(1);
    expect(stack.smsTo(phone)).toBe(1);
    await waitFor(async () => (await deadline.getJobState(jobIds.deadline(id))) === 'completed', 5_000, 'the deadline job to complete');
    expect(await emailSend.getJobState(jobIds.emailSend(id))).toBe('completed');
  });
});
