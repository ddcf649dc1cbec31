import { afterEach, describe, expect, it } from 'vitest';
import { TERMINAL_STATES } from '../../src/notice/states.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { noticeBody } from '../helpers/herald.js';
import { sleep, testPrefix, waitFor } from '../helpers/env.js';
import { startStack, WorkerProcess, type Stack } from '../helpers/stack.js';
import { jobIds } from '../../queues/index.js';

let stack: Stack | undefined;
const workers: WorkerProcess[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop('SIGKILL')));
  await stack?.close();
  stack = undefined;
});

/** Creates `count` never-delivered notices with their own phone numbers and staggered deadlines. */
async function createNotices(s: Stack, count: number, areaBase: number): Promise<{ id: string; phone: string }[]> {
  const created = [];
  for (let i = 0; i < count; i += 1) {
    const phone = `+1${areaBase + i}5550100`;
    const id = await s.createNotice(
      noticeBody({ recipient: { id: `p-${areaBase + i}`, email: 'never@example.com', phone }, deadlineInSeconds: 2 + (i % 3) }),
    );
    created.push({ id, phone });
  }
  return created;
}

async function expectExactlyOneSmsEach(s: Stack, notices: { id: string; phone: string }[]) {
  for (const { id, phone } of notices) {
    const events: StoredEntry[] = await s.events(id);
    expect(
      events.filter((e) => e.type === 'fallback.decided'),
      `fallback.decided of ${id}`,
    ).toHaveLength(1);
    expect(s.smsTo(phone), `SMS to ${phone}`).toBe(1);
    expect(
      events.filter((e) => e.type === 'notice.completed'),
      `notice.completed of ${id}`,
    ).toHaveLength(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  }
}

async function waitAllTerminal(s: Stack, ids: string[], timeoutMs: number) {
  await waitFor(
    async () => {
      const views = await Promise.all(ids.map((id) => s.view(id)));
      return views.every((v) => TERMINAL_STATES.includes(v.state));
    },
    timeoutMs,
    'every notice to reach a terminal state',
  );
}

describe('worker processes', () => {
  it('two workers on the same notices, with duplicate jobs and an eager reconciler, send one SMS per notice', async () => {
    stack = await startStack({
      prefix: testPrefix('two'),
      inProcessWorker: false,
      env: { HERALD_RECONCILE_GRACE_MS: '0', HERALD_RECONCILE_INTERVAL_MS: '150' },
    });
    workers.push(new WorkerProcess(stack.env).start(), new WorkerProcess(stack.env).start());
    const notices = await createNotices(stack, 12, 301);
    // Extra jobs under other IDs for the same notices: the transition guard must make them harmless.
    for (const { id } of notices) {
      await stack.web.queues.deadline.add('deadline', { noticeId: id }, { jobId: `dup-${id}-deadline`, delay: 2500 });
      await stack.web.queues.smsSend.add('sms-send', { noticeId: id }, { jobId: `dup-${id}-sms-send`, delay: 3500 });
    }
    await waitAllTerminal(
      stack,
      notices.map((n) => n.id),
      40_000,
    );
    await sleep(1500); // let the duplicates run out
    await expectExactlyOneSmsEach(stack, notices);
  });

  it('a worker killed with SIGKILL mid-flight and restarted loses no notice and sends one SMS each', async () => {
    stack = await startStack({ prefix: testPrefix('kill'), inProcessWorker: false });
    const worker = new WorkerProcess(stack.env).start();
    workers.push(worker);
    const notices = await createNotices(stack, 15, 401);
    await sleep(2300); // some deadlines passed, some SMS in flight, some notices still polling
    expect(await worker.stop('SIGKILL')).not.toBe(0);
    await sleep(800);
    worker.start();
    await waitAllTerminal(
      stack,
      notices.map((n) => n.id),
      45_000,
    );
    await expectExactlyOneSmsEach(stack, notices);
  });

  it('a worker killed after the SMS request left and before its answer was stored: the restart finds the SMS and does not send again', async () => {
    stack = await startStack({ prefix: testPrefix('doubt'), inProcessWorker: false, env: { HERALD_PROVIDER_TIMEOUT_MS: '4000' } });
    const phone = '+15015550100';
    stack.sandbox.injectFault({ operation: 'twilio.create', mode: 'accept_then_hang', match: phone });
    const worker = new WorkerProcess(stack.env).start();
    workers.push(worker);
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'p-doubt', email: 'never@example.com', phone }, deadlineInSeconds: 2 }),
    );
    await waitFor(
      async () => stack!.sandbox.requests().some((r) => r.operation === 'twilio.create' && r.recipient === phone),
      20_000,
      'the SMS request to leave',
    );
    expect(stack.smsTo(phone)).toBe(1);
    await worker.stop('SIGKILL');
    expect((await stack.view(id)).state).toBe('sms_sending');
    worker.start();
    const view = await stack.waitForState(id, ['sms_delivered', 'sms_failed'], 40_000);
    expect(view.state).toBe('sms_delivered');
    expect(stack.smsTo(phone)).toBe(1);
    const events = await stack.events(id);
    expect(events.filter((e) => e.type === 'sms.requested')).toHaveLength(1);
    expect(events.find((e) => e.type === 'sms.accepted')).toMatchObject({ resolvedBy: 'provider_search' });
    expect(events.some((e) => e.type === 'notice.reconciled')).toBe(true);
  });

  it('a status-check job an earlier version queued (one job per check) still runs the checks, coming back for each', async () => {
    stack = await startStack({ prefix: testPrefix('legacy'), inProcessWorker: false });
    const { emailPoll, deadline } = stack.web.queues;
    // Status checks wait while the notice's job is swapped for the one an earlier version queued.
    await emailPoll.pause();
    workers.push(new WorkerProcess(stack.env).start());
    const id = await stack.createNotice(
      noticeBody({
        recipient: { id: 'p-legacy', email: 'delivered+2s@example.com', phone: '+15025550100' },
        deadlineInSeconds: 12,
        policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 1 },
      }),
    );
    await stack.waitForState(id, ['email_sent'], 10_000);
    // The notice's own job (which would run the checks now) goes once it has moved back to delayed.
    await deadline.pause();
    await waitFor(
      async () => {
        await deadline.remove(jobIds.deadline(id)).catch(() => 0);
        return (await deadline.getJob(jobIds.deadline(id))) === undefined;
      },
      5_000,
      "the notice's job to be removed",
    );
    const legacy = jobIds.emailCheck(id, 1);
    await emailPoll.add('email-poll', { noticeId: id }, { jobId: legacy });
    await emailPoll.resume();

    await stack.waitForState(id, ['email_delivered'], 15_000);
    const events = await stack.events(id);
    // Checks before the delivery came back in the same job, moved back to delayed in between.
    expect(events.filter((e) => e.type === 'email.observed').length).toBeGreaterThanOrEqual(2);
    await waitFor(async () => (await emailPoll.getJobState(legacy)) === 'completed', 5_000, 'the legacy job to complete');
    expect(await emailPoll.getJob(jobIds.emailPoll(id))).toBeUndefined();
    expect(events.filter((e) => e.type === 'notice.completed')).toHaveLength(1);
  });
});
