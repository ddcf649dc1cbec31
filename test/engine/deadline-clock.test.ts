import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { iso, ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { NoticeEngine } from '../../src/notice/engine.js';
import { readNotice } from '../../src/notice/notice.js';
import { reconcileOnce } from '../../src/notice/reconciler.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { engineUnderTest } from '../helpers/engine.js';
import { jobIds, noticeOfJob } from '../../queues/index.js';

const prefix = testPrefix('clock');
const clock = new ManualClock(Date.parse('2026-11-29T14:00:00Z'));
let sandbox: Sandbox;
let web: WebUnderTest;
let engine: NoticeEngine;
const log = createLogger('test', 'silent');

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, indexLagMs: 0 });
  const config = testConfig(prefix, { HERALD_MIN_POLL_INTERVAL_MS: '30000' });
  web = await startWebUnderTest(config, clock);
  // No worker runs here: the test takes every step itself, at the times it sets.
  engine = engineUnderTest(web, sandbox, clock);
});
afterAll(async () => {
  await web.close();
  await sandbox.close();
  await cleanUp(prefix);
});

async function acceptedAndSent(phone: string): Promise<{ id: string; deadline: number }> {
  const res = await web.call(
    'POST',
    '/v1/notices',
    noticeBody({ recipient: { id: 'p1', email: 'never@example.com', phone }, deadlineInSeconds: 600 }),
  );
  const id = res.json().id as string;
  expect((await engine.sendEmail(id)).note).toBe('email accepted');
  return { id, deadline: Date.parse(res.json().deadline) };
}

describe('the deadline, on the injected clock', () => {
  it('does not decide 1 ms before the deadline, and decides exactly at it', async () => {
    const { id, deadline } = await acceptedAndSent('+12025550100');

    clock.set(deadline - 1);
    const early = await engine.runDeadline(id);
    expect(early).toMatchObject({ kind: 'retry', at: deadline });
    expect(await engine.decideFallback(id, 'email_deadline_elapsed')).toMatchObject({ kind: 'retry', at: deadline });
    expect((await web.store.get(id))!.state).toBe('email_sent');
    expect((await web.store.events(id)).some((e) => e.type === 'fallback.decided')).toBe(false);

    clock.set(deadline);
    // Nothing makes the SMS wait (no quiet hours): the deadline step hands it over itself.
    expect((await engine.runDeadline(id)).note).toBe('fallback decided: email_deadline_elapsed; sms accepted');
    const events = await web.store.events(id);
    const decided = events.filter((e) => e.type === 'fallback.decided');
    expect(decided).toHaveLength(1);
    expect(decided[0]).toMatchObject({ decidedAt: iso(deadline), deadline: iso(deadline), reason: 'email_deadline_elapsed' });
    expect((await web.store.get(id))!.state).toBe('sms_sent');
    expect(sandbox.sms().filter((m) => m.to === '+12025550100')).toHaveLength(1);
    expect(await web.queues.smsSend.getJob(jobIds.smsSend(id))).toBeUndefined();
  });

  it('decides once when several deadline steps race at the deadline', async () => {
    const { id, deadline } = await acceptedAndSent('+12035550100');
    clock.set(deadline + 17_000);
    await Promise.all(Array.from({ length: 6 }, () => engine.runDeadline(id)));
    const decided = (await web.store.events(id)).filter((e) => e.type === 'fallback.decided');
    expect(decided).toHaveLength(1);
    expect(decided[0]!.decidedAt).toBe(iso(deadline + 17_000));
    // And several SMS steps racing send one SMS.
    await Promise.all(Array.from({ length: 6 }, () => engine.sendSms(id)));
    expect(sandbox.sms().filter((m) => m.to === '+12035550100')).toHaveLength(1);
  });
});

describe("the deadline's last read", () => {
  it("is recorded by the decision's own transition when nothing but the fallback can follow it", async () => {
    const { id, deadline } = await acceptedAndSent('+12085550100');
    const checksBefore = (await readNotice(web.store, id))!.emailChannel.checksDone;
    clock.set(deadline);
    const transition = vi.spyOn(web.store, 'transition');
    try {
      expect((await engine.runDeadline(id)).note).toBe('fallback decided: email_deadline_elapsed; sms accepted');
      const moves = transition.mock.calls.map(([, , , spec]) => spec);
      // The read and the decision: one transition; then the SMS attempt and its answer.
      expect(moves.map((spec) => spec.name)).toEqual(['decideFallback', 'startSmsAttempt', 'recordSmsAccepted']);
      expect(moves[0]!.entries.map((e) => e.type)).toEqual(['email.observed', 'policy.checked', 'fallback.decided']);
    } finally {
      transition.mockRestore();
    }
    const events = await web.store.events(id);
    const read = events.findIndex((e) => e.type === 'email.observed' && e.observedAt === iso(deadline));
    expect(events.slice(read, read + 3).map((e) => [e.type, e.at])).toEqual([
      ['email.observed', iso(deadline)],
      ['policy.checked', iso(deadline)],
      ['fallback.decided', iso(deadline)],
    ]);
    expect(events[read]).toMatchObject({ status: 'pending', nextCheckAt: null, source: 'poll' });
    expect(events[read + 2]).toMatchObject({ lastEmailStatus: 'pending', reason: 'email_deadline_elapsed' });
    const notice = (await readNotice(web.store, id))!;
    expect(notice.emailChannel).toMatchObject({
      status: 'pending',
      checksDone: checksBefore + 1,
      lastObservedAt: deadline,
      nextCheckAt: undefined,
    });
  });

  it('is recorded on its own, and decides nothing, when a delivery lands between the read and the decision', async () => {
    const { id, deadline } = await acceptedAndSent('+12095550100');
    clock.set(deadline);
    const store = web.store;
    const real = store.transition.bind(store);
    const transition = vi.spyOn(store, 'transition').mockImplementation(async (noticeId, now, at, spec) => {
      if (spec.name === 'decideFallback' && !transition.mock.calls.slice(0, -1).some(([, , , s]) => s.name === 'confirmEmailDelivered')) {
        // A webhook's delivery, recorded while the deadline's read was on its way back.
        await real(noticeId, now, at, {
          name: 'confirmEmailDelivered',
          set: { emailStatus: 'delivered' },
          entries: [{ type: 'notice.completed', state: 'email_delivered' }],
          due: 'remove',
        });
      }
      return real(noticeId, now, at, spec);
    });
    try {
      expect((await engine.runDeadline(id)).note).toBe('already decided: email_delivered');
    } finally {
      transition.mockRestore();
    }
    const events = await web.store.events(id);
    expect(events.some((e) => e.type === 'fallback.decided')).toBe(false);
    // The read itself is kept, after the delivery, changing nothing.
    expect(events.at(-1)).toMatchObject({ type: 'email.observed', status: 'pending', observedAt: iso(deadline) });
    expect((await web.store.get(id))!.state).toBe('email_delivered');
    expect(sandbox.sms().filter((m) => m.to === '+12095550100')).toHaveLength(0);
  });
});

describe('a late email delivery', () => {
  it('after the fallback was decided but before the SMS left: is recorded late and cancels the SMS', async () => {
    const res = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({ recipient: { id: 'p3', email: 'delivered+2s@example.com', phone: '+12065550100' }, deadlineInSeconds: 600 }),
    );
    const id = res.json().id as string;
    const deadline = Date.parse(res.json().deadline);
    await engine.sendEmail(id);
    clock.set(deadline);
    // Decided, its SMS left to its sms-send job (as when quiet hours make it wait).
    expect((await engine.decideFallback(id, 'email_deadline_elapsed')).note).toBe('fallback decided: email_deadline_elapsed');
    await new Promise((resolve) => setTimeout(resolve, 2300)); // the emulator delivers the email now
    await engine.pollEmail(id);
    expect((await web.store.get(id))!.state).toBe('email_delivered');
    expect((await engine.sendSms(id)).note).toBe('state is email_delivered');
    expect(sandbox.sms().filter((m) => m.to === '+12065550100')).toHaveLength(0);
    const events = await web.store.events(id);
    expect(events.filter((e) => e.type === 'email.observed').at(-1)).toMatchObject({ status: 'delivered', late: true });
    expect(events.find((e) => e.type === 'sms.canceled')).toMatchObject({ reason: 'email_delivered_late' });
    expect(events.at(-1)).toMatchObject({ type: 'notice.completed', state: 'email_delivered' });
  });
});

describe('status checks after an early fallback', () => {
  it('ask for no further check when a status read fails once the fallback is decided', async () => {
    const res = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({ recipient: { id: 'p4', email: 'bounce+0ms@example.com', phone: '+12075550100' }, deadlineInSeconds: 600 }),
    );
    const id = res.json().id as string;
    expect((await engine.sendEmail(id)).note).toBe('email accepted');
    const plan = (await readNotice(web.store, id))!.pollPlan;
    clock.set(plan[0]!);
    expect((await engine.pollEmail(id)).note).toBe('fallback decided: email_bounced');
    expect((await web.store.get(id))!.state).toBe('sms_pending');

    // Before the deadline, with checks still planned: the next one is not asked for.
    const checks = async () =>
      (await web.queues.deadline.getJobs(['delayed', 'waiting']))
        .filter((job) => noticeOfJob(job) === id)
        .map((job) => [job.id, job.delay]);
    const before = await checks();
    clock.set(plan[1]!);
    sandbox.injectFault({ operation: 'postmark.details', mode: 'status_500', match: 'bounce+0ms' });
    expect((await engine.pollEmail(id)).note).toBe('status read failed: server_error');
    expect(await checks()).toEqual(before);
  });
});

describe('the reconciler, on the injected clock', () => {
  it('drives a notice whose jobs never ran: sends the email, then decides at the deadline', async () => {
    const res = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({ recipient: { id: 'p2', email: 'never@example.com', phone: '+12045550100' }, deadlineInSeconds: 600 }),
    );
    const id = res.json().id as string;
    const deadline = Date.parse(res.json().deadline);
    const deps = { store: web.store, engine, clock, log, graceMs: 10_000, leaseMs: 60_000, owner: 'test' };

    clock.set(deadline - 600_000 + 5_000);
    await reconcileOnce(deps);
    // Within the grace the notice is left to its own job.
    expect((await web.store.get(id))!.state).toBe('accepted');
    expect((await web.store.events(id)).some((e) => e.type === 'notice.reconciled')).toBe(false);

    clock.set(deadline - 600_000 + 11_000);
    await reconcileOnce(deps);
    expect((await web.store.get(id))!.state).toBe('email_sent');

    clock.set(deadline + 11_000);
    await reconcileOnce(deps);
    const notice = (await web.store.get(id))!;
    expect(notice.state).toBe('sms_pending');
    const types = (await web.store.events(id)).map((e) => e.type);
    expect(types.filter((t) => t === 'notice.reconciled').length).toBeGreaterThanOrEqual(2);
    expect(types.filter((t) => t === 'fallback.decided')).toHaveLength(1);
  });

  it('resolves an SMS send in doubt by asking the provider, and does not send again', async () => {
    const { id, deadline } = await acceptedAndSent('+12055550100');
    // The deadline step sends the SMS; it leaves, the answer never comes back: the attempt is in
    // doubt, and the notice's job comes back for the send.
    sandbox.injectFault({ operation: 'twilio.create', mode: 'accept_then_hang', match: '+12055550100' });
    const realNow = Math.max(Date.now(), deadline);
    clock.set(realNow);
    const outcome = await engine.runDeadline(id);
    expect(outcome.note).toMatch(/^fallback decided: email_deadline_elapsed; sms send: timeout; the sms is sent at /);
    expect(await web.queues.deadline.getJobState(jobIds.deadline(id))).toMatch(/^(waiting|delayed)$/);
    expect(sandbox.sms().filter((m) => m.to === '+12055550100')).toHaveLength(1);

    clock.set(realNow + 60_000);
    const resolved = await engine.sendSms(id);
    expect(resolved.note).toBe('sms accepted');
    expect(sandbox.sms().filter((m) => m.to === '+12055550100')).toHaveLength(1);
    const accepted = (await web.store.events(id)).filter((e) => e.type === 'sms.accepted');
    expect(accepted).toHaveLength(1);
    expect(accepted[0]).toMatchObject({
      resolvedBy: 'provider_search',
      providerMessageId: sandbox.sms().find((m) => m.to === '+12055550100')!.sid,
    });
  });
});
