import { randomBytes } from 'node:crypto';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { jobIds } from '../../queues/index.js';
import { engineUnderTest } from '../helpers/engine.js';
import { testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';

/**
 * The `failed` state: a notice whose content is gone or cannot be opened when a step needs it
 * ends there, with `notice.failed` and `notice.completed`, instead of failing its job forever.
 */
const key = (id: string) => `${id}:${randomBytes(32).toString('base64')}`;
const types = (events: StoredEntry[]) => events.map((e) => e.type);

describe('through the worker', () => {
  let stack: Stack | undefined;
  const workers: WorkerProcess[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop('SIGKILL')));
    await stack?.close();
    stack = undefined;
  });

  it('ends a notice failed when its content is gone before the SMS send: no SMS, the job completes, nothing retries, and it retires', async () => {
    stack = await startStack({
      prefix: testPrefix('failed-gone'),
      inProcessWorker: false,
      env: {
        HERALD_NOTICE_KEEP_HOT: '0s',
        HERALD_LOG_KEEP_HOT: '0s',
        HERALD_MIRROR_INTERVAL_MS: '200',
        HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
      },
    });
    const s = stack;
    const phone = '+12085550100';
    const id = await s.createNotice(
      noticeBody({
        recipient: { id: 'p-gone', email: 'bounce+0ms@example.com', phone },
        deadlineInSeconds: 600,
        policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 300 },
      }),
    );
    // The email leaves (the engine's own step, before any worker runs), then the content expires
    // while the notice waits; the bounce seen at the first check decides the fallback.
    expect((await engineUnderTest(s.web, s.sandbox, systemClock).sendEmail(id)).note).toBe('email accepted');
    await s.web.store.deleteContent(id);
    workers.push(new WorkerProcess(s.env).start());

    const view = await s.waitForState(id, ['failed', 'sms_sent', 'sms_delivered', 'sms_failed']);
    expect(view.state).toBe('failed');
    expect(s.smsTo(phone)).toBe(0);

    const events = await s.events(id);
    const failed = types(events).indexOf('notice.failed');
    expect(types(events).slice(failed - 1, failed + 2)).toEqual(['fallback.decided', 'notice.failed', 'notice.completed']);
    expect(events[failed - 1]).toMatchObject({ reason: 'email_bounced' });
    expect(events[failed]).toMatchObject({ reason: 'content_unavailable', stateBefore: 'sms_pending', content: 'gone', channel: 'sms' });
    expect(events[failed + 1]).toMatchObject({ state: 'failed' });
    expect(types(events).filter((t) => t === 'sms.requested')).toEqual([]);

    // The notice's job (which ran the SMS's send) finished with the notice: completed, no run of it failed.
    const job = (await s.web.queues.deadline.getJob(jobIds.deadline(id)))!;
    expect(await job.getState()).toBe('completed');
    expect(job.data.errors).toBeUndefined();
    expect(job.returnvalue).toMatch(/content_unavailable/);
    // Out of the reconciler's index: no one drives it again.
    expect(await s.web.redis.zscore(s.web.store.keys.noticeKeysFor(id).due, id)).toBeNull();

    // Finished, it retires like any other notice, and keeps its state and trail in the archive.
    await waitFor(async () => (await s.web.store.get(id)) === null, 20_000, 'the failed notice to retire');
    expect((await s.view(id)).state).toBe('failed');
    expect(types(await s.events(id))).toContain('notice.failed');
    const stats = (await s.web.call('GET', '/v1/stats')).json();
    expect(stats.byState.failed).toBe(1);
  });

  it('ends a notice failed when the worker holds no key that opens its content, in a worker process', async () => {
    stack = await startStack({ prefix: testPrefix('failed-key'), inProcessWorker: false, env: { HERALD_ENCRYPTION_KEY: key('k1') } });
    const s = stack;
    const phone = '+12095550100';
    // No email consent: the fallback is decided at once, so the SMS send is the first step that needs the content.
    expect((await s.web.call('PUT', '/v1/recipients/p-key/policy', { consent: { email: false, sms: true } })).statusCode).toBe(200);
    const id = await s.createNotice(noticeBody({ recipient: { id: 'p-key', email: 'never@example.com', phone }, deadlineInSeconds: 600 }));

    // The key that sealed the content was rotated away before the SMS left.
    const worker = new WorkerProcess({ ...s.env, HERALD_ENCRYPTION_KEY: key('k2') }).start();
    workers.push(worker);
    const view = await s.waitForState(id, ['failed', 'sms_sent', 'sms_delivered', 'sms_failed'], 30_000);
    expect(view.state).toBe('failed');
    expect(s.smsTo(phone)).toBe(0);
    const events = await s.events(id);
    expect(types(events)).toContain('fallback.decided');
    expect(events.find((e) => e.type === 'notice.failed')).toMatchObject({
      reason: 'content_unavailable',
      stateBefore: 'sms_pending',
      content: 'unreadable',
    });
    // The notice ends there; the reconciler, when it reached the overdue notice before its job
    // did (a worker slow to start), says so after it.
    const completed = events.findIndex((e) => e.type === 'notice.completed');
    expect(events[completed]).toMatchObject({ type: 'notice.completed', state: 'failed' });
    expect(events.slice(completed + 1).every((e) => e.type === 'notice.reconciled')).toBe(true);
    // The worker's log says the content could not be opened, and never what it holds.
    expect(worker.output).not.toContain('Terms change Monday');
  });

  it('ends a notice failed before its email when the content is gone, and its job with it', async () => {
    stack = await startStack({ prefix: testPrefix('failed-email'), inProcessWorker: false });
    const s = stack;
    const id = await s.createNotice(noticeBody({ recipient: { id: 'p-email', email: 'delivered@example.com' }, deadlineInSeconds: 600 }));
    await s.web.store.deleteContent(id);
    const worker = new WorkerProcess(s.env).start();
    workers.push(worker);

    const view = await s.waitForState(id, ['failed', 'email_sent', 'email_delivered']);
    expect(view.state).toBe('failed');
    expect(s.sandbox.requests().filter((r) => r.operation === 'postmark.send')).toEqual([]);
    expect((await s.events(id)).find((e) => e.type === 'notice.failed')).toMatchObject({ stateBefore: 'accepted', channel: 'email' });
    // The notice's job (the deadline job) ends with it instead of waiting for the deadline.
    await waitFor(async () => (await s.web.queues.deadline.getJobState(jobIds.deadline(id))) === 'completed', 10_000, 'the job to end');
  });
});
