import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../../src/clock.js';
import { newNoticeId } from '../../src/notice/ids.js';
import type { NoticeEngine } from '../../src/notice/engine.js';
import { readNotice } from '../../src/notice/notice.js';
import type { StepOutcome } from '../../src/notice/outcome.js';
import { StatusReadLimiter } from '../../src/store/status-reads.js';
import type { NoticeStore } from '../../src/store/notices.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { jobIds, QueueScheduler } from '../../queues/index.js';
import { engineUnderTest } from '../helpers/engine.js';
import { REDIS_URL, testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const prefix = testPrefix('notice-job');
const START = Date.parse('2026-11-29T14:00:00Z');
const clock = new ManualClock(START);
let sandbox: Sandbox;
let web: WebUnderTest;
let engine: NoticeEngine;
let limiter: StatusReadLimiter;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, indexLagMs: 0 });
  web = await startWebUnderTest(testConfig(prefix, { HERALD_MIN_POLL_INTERVAL_MS: '30000' }), clock);
  // One status read per second per provider, all workers together.
  limiter = new StatusReadLimiter(web.redis, web.store.keys, {
    email: { provider: 'postmark', perSecond: 1 },
    sms: { provider: 'twilio', perSecond: 1 },
  });
  engine = engineUnderTest(web, sandbox, clock, {}, { statusReads: limiter });
});
afterAll(async () => {
  await web.close();
  await sandbox.close();
  await cleanUp(prefix);
});

/**
 * An engine under test whose store runs `around` in place of each call of its methods `methods`,
 * `call` making the real one: what a test watches (reads counted) or does meanwhile (a webhook).
 */
function engineAroundStore(
  methods: readonly (keyof NoticeStore)[],
  around: (method: keyof NoticeStore, call: () => Promise<unknown>, args: unknown[]) => Promise<unknown>,
): NoticeEngine {
  const store = web.deps.store;
  const watched = new Proxy(store, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (!methods.includes(key as keyof NoticeStore) || typeof value !== 'function') return value;
      return (...args: unknown[]) =>
        around(key as keyof NoticeStore, () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args), args);
    },
  });
  return engineUnderTest(web, sandbox, clock, {}, { store: watched });
}

let n = 0;
/** A notice accepted n minutes after START (each in seconds of its own): checks 2 and 7 minutes later, the deadline at 10. */
async function accepted(
  email: string,
  deadlineInSeconds = 600,
  phone = '+12025550100',
): Promise<{ id: string; plan: number[]; deadline: number }> {
  n += 1;
  clock.set(START + n * 60_000);
  const res = await web.call(
    'POST',
    '/v1/notices',
    noticeBody({
      recipient: { id: `p-job-${n}`, email, phone },
      deadlineInSeconds,
      policy: { firstCheckAfterSeconds: 120, minCheckIntervalSeconds: 300 },
    }),
  );
  expect(res.statusCode).toBe(202);
  const id = res.json().id as string;
  const notice = (await readNotice(web.store, id))!;
  return { id, plan: notice.pollPlan, deadline: notice.deadline };
}

const statusReads = (email: string) => sandbox.requests().filter((r) => r.operation === 'postmark.details' && r.recipient === email).length;

function comesBackAt(outcome: StepOutcome): number {
  expect(outcome.kind).toBe('retry');
  return outcome.kind === 'retry' ? outcome.at : NaN;
}

describe("a notice's one job", () => {
  it('sends with the content it read along with the notice: no read of the content of its own', async () => {
    const { id } = await accepted('delivered+0ms+content@example.com');
    const contentReads: ('with the notice' | 'alone')[] = [];
    const counting = engineAroundStore(['content'], (_, call, args) => {
      contentReads.push(args[1] ? 'with the notice' : 'alone');
      return call();
    });
    expect((await counting.runNotice(id)).note).toBe('email accepted');
    expect(contentReads).toEqual(['with the notice']);
    const sent = sandbox.requests().filter((r) => r.operation === 'postmark.send' && r.recipient === 'delivered+0ms+content@example.com');
    expect(sent).toHaveLength(1);
  });

  it('reads the notice alone, not its content, when it came back for a planned check', async () => {
    const { id, plan } = await accepted('never+check-read@example.com');
    expect((await engine.runNotice(id)).note).toBe('email accepted');
    const reads: string[] = [];
    const counting = engineAroundStore(['get', 'getWithContent', 'content'], (method, call) => {
      reads.push(method);
      return call();
    });
    clock.set(plan[0]!);
    expect(await counting.runNotice(id, 'email')).toMatchObject({ kind: 'retry', at: plan[1] });
    expect(reads).toEqual(['get']);
    // At the deadline the job has no such hint: the content comes along, and the SMS is sent with it.
    reads.length = 0;
    clock.set(plan[1]!);
    expect((await counting.runNotice(id)).note).toBe('fallback decided: email_deadline_elapsed; sms accepted');
    expect(reads).toEqual(['getWithContent', 'content']);
  });

  it('sends the SMS a planned check decided (a bounce) in a run of its own, which reads the content along', async () => {
    const { id, plan } = await accepted('bounce+0ms+check-read@example.com');
    expect((await engine.runNotice(id)).note).toBe('email accepted');
    const reads: string[] = [];
    const counting = engineAroundStore(['get', 'getWithContent', 'content'], (method, call, args) => {
      reads.push(method === 'content' && args[1] === undefined ? 'content alone' : method);
      return call();
    });
    clock.set(plan[0]!);
    const decided = await counting.runNotice(id, 'email');
    expect(decided.note).toBe('fallback decided: email_bounced');
    // The notice alone (the decision reads it once more, as it did with the content along).
    expect(reads[0]).toBe('get');
    expect(reads.filter((read) => read !== 'get')).toEqual([]);
    reads.length = 0;
    clock.set(comesBackAt(decided));
    expect((await counting.runNotice(id)).note).toBe('sms accepted');
    expect(reads).toEqual(['getWithContent', 'content']);
    expect((await web.store.get(id))!.state).toBe('sms_sent');
  });

  it("sends the deadline's SMS from the notice as the decision left it: no read of the notice of its own", async () => {
    const email = 'never+sms-read@example.com';
    const { id, deadline } = await accepted(email);
    expect((await engine.runNotice(id)).note).toBe('email accepted');
    const reads: string[] = [];
    const counting = engineAroundStore(['get', 'getWithContent'], (method, call) => {
      reads.push(method);
      return call();
    });
    const smsSends = () => sandbox.requests().filter((r) => r.operation === 'twilio.create').length;
    const before = smsSends();
    clock.set(deadline);
    expect((await counting.runNotice(id)).note).toBe('fallback decided: email_deadline_elapsed; sms accepted');
    expect(reads).toEqual(['getWithContent']);
    expect((await web.store.get(id))!.state).toBe('sms_sent');
    expect(smsSends()).toBe(before + 1);
  });

  it('is the only job the web queues: the deadline job, due now for the send', async () => {
    const { id } = await accepted('never+one@example.com');
    expect(await web.queues.deadline.getJobState(jobIds.deadline(id))).toBe('waiting');
    expect(await web.queues.emailSend.getJob(jobIds.emailSend(id))).toBeUndefined();
  });

  describe('when the email is delivered by the first check', () => {
    it('sends, comes back at the check (not before), and ends there without waiting for the deadline', async () => {
      const email = 'delivered+0ms@example.com';
      const { id, plan } = await accepted(email);
      const sent = await engine.runNotice(id);
      expect(sent.note).toBe('email accepted');
      expect(comesBackAt(sent)).toBe(plan[0]);

      // Run early (a duplicate, a promotion): no read, back at the planned check.
      clock.set(plan[0]! - 1);
      expect(comesBackAt(await engine.runNotice(id))).toBe(plan[0]);
      expect(statusReads(email)).toBe(0);

      clock.set(plan[0]!);
      const checked = await engine.runNotice(id);
      expect(checked).toEqual({ kind: 'done', note: 'email delivered' });
      expect((await web.store.get(id))!.state).toBe('email_delivered');
      expect(statusReads(email)).toBe(1);
    });
  });

  describe('when the email is never delivered', () => {
    it('runs each planned check, then at the deadline reads once more, decides and sends the SMS in the same run', async () => {
      const email = 'never+job@example.com';
      const { id, plan, deadline } = await accepted(email);
      let at = comesBackAt(await engine.runNotice(id));
      for (const check of plan.slice(0, -1)) {
        expect(at).toBe(check);
        clock.set(check);
        at = comesBackAt(await engine.runNotice(id));
      }
      // The last check before the deadline asks for no other: back at the deadline.
      expect(at).toBe(deadline);
      expect(statusReads(email)).toBe(plan.length - 1);

      clock.set(deadline);
      const decided = await engine.runNotice(id);
      expect(decided.note).toBe('fallback decided: email_deadline_elapsed; sms accepted');
      const notice = (await readNotice(web.store, id))!;
      expect(notice.state).toBe('sms_sent');
      // Back for the SMS's first check.
      expect(comesBackAt(decided)).toBe(notice.smsChannel.nextCheckAt);
      expect(statusReads(email)).toBe(plan.length);
      const events = await web.store.events(id);
      expect(events.filter((e) => e.type === 'fallback.decided')).toHaveLength(1);
    });
  });

  describe('when the notice moves under its last check before the deadline (a webhook decides an early fallback)', () => {
    it('comes back at once for the SMS instead of at the deadline', async () => {
      const email = 'never+moved@example.com';
      const { id, plan, deadline } = await accepted(email);
      // The webhook's path runs on an engine of its own while this check's read is on its way.
      const outside = engineUnderTest(web, sandbox, clock);
      const moving = engineUnderTest(
        web,
        sandbox,
        clock,
        {},
        {
          statusReads: {
            take: async () => {
              await outside.decideFallback(id, 'email_bounced');
              return undefined;
            },
            pause: async () => undefined,
          },
        },
      );
      expect(plan.filter((at) => at < deadline)).toEqual([plan[0]]);
      expect(comesBackAt(await engine.runNotice(id))).toBe(plan[0]);
      clock.set(plan[0]!);
      const checked = await moving.runNotice(id);
      expect((await web.store.get(id))!.state).toBe('sms_pending');
      expect(comesBackAt(checked)).toBe(plan[0]);
      expect(statusReads(email)).toBe(1);
      // Its next run sends the SMS.
      expect((await engine.runNotice(id)).note).toBe('sms accepted');
    });
  });

  describe('when the notice moves under a check with another check still planned', () => {
    it('comes back at once for the SMS instead of at the next check', async () => {
      const email = 'never+moved-early@example.com';
      const { id, plan, deadline } = await accepted(email, 1200);
      const outside = engineUnderTest(web, sandbox, clock);
      // The webhook's early fallback lands right after this run's check recorded its read and
      // asked for the next check (its ask found the job running and left it alone).
      const moving = engineAroundStore(['transition'], async (_, call, args) => {
        const result = await call();
        if ((args[3] as { name: string }).name === 'observeEmail') await outside.decideFallback(id, 'email_bounced');
        return result;
      });
      expect(plan.filter((at) => at < deadline).length).toBeGreaterThan(1);
      expect(comesBackAt(await engine.runNotice(id))).toBe(plan[0]);
      clock.set(plan[0]!);
      const checked = await moving.runNotice(id);
      expect((await web.store.get(id))!.state).toBe('sms_pending');
      expect(statusReads(email)).toBe(1);
      expect(comesBackAt(checked)).toBe(plan[0]);
      expect((await engine.runNotice(id)).note).toBe('sms accepted');
    });
  });

  describe('when whoever runs it reads the state with the move back', () => {
    it('comes back at the next check only while the notice stays undecided, and leaves that read to the move', async () => {
      const email = 'never+reads-with-move@example.com';
      const { id, plan } = await accepted(email, 1200);
      let statesRead = 0;
      const moving = engineAroundStore(['statesOf'], (_, call) => {
        statesRead += 1;
        return call();
      });
      const sent = await moving.runNotice(id, undefined, true);
      expect(sent).toMatchObject({ kind: 'retry', at: plan[0], check: 'email', ifUndecided: true });
      clock.set(plan[0]!);
      const checked = await moving.runNotice(id, 'email', true);
      expect(checked).toMatchObject({ kind: 'retry', at: plan[1], ifUndecided: true });
      expect(statesRead).toBe(0);
      // Run on its own, it reads the state itself and says nothing of it.
      clock.set(plan[1]!);
      const alone = await moving.runNotice(id, 'email');
      expect(alone).not.toHaveProperty('ifUndecided');
      expect(statesRead).toBe(1);
    });
  });

  describe('what it comes back for', () => {
    it('says when it comes back for a planned check, and of which channel: never for the deadline or a send', async () => {
      const email = 'never+says@example.com';
      const { id, plan, deadline } = await accepted(email);
      const sent = await engine.runNotice(id);
      expect(sent).toMatchObject({ kind: 'retry', at: plan[0], check: 'email' });
      clock.set(plan[0]!);
      // The last check before the deadline comes back for the deadline itself, no check.
      const checked = await engine.runNotice(id, 'email');
      expect(checked).toMatchObject({ kind: 'retry', at: deadline });
      expect(checked).not.toHaveProperty('check');
      clock.set(deadline);
      const decided = await engine.runNotice(id);
      expect(decided).toMatchObject({ kind: 'retry', check: 'sms' });
    });

    it('says so after every planned check that has another before the deadline, and after each SMS check', async () => {
      const email = 'never+says-each@example.com';
      // The SMS stays sent (the emulator's number ending 05): its checks go on.
      const { id, plan, deadline } = await accepted(email, 1200, '+12025550105');
      const before = plan.filter((at) => at < deadline);
      expect(before.length).toBeGreaterThan(2);
      expect(await engine.runNotice(id)).toMatchObject({ at: before[0], check: 'email' });
      for (const [i, at] of before.entries()) {
        clock.set(at);
        const next = before[i + 1];
        const outcome = await engine.runNotice(id, 'email');
        if (next === undefined) expect(outcome).not.toHaveProperty('check');
        else expect(outcome).toMatchObject({ at: next, check: 'email' });
      }
      clock.set(deadline);
      const decided = await engine.runNotice(id);
      expect(decided).toMatchObject({ check: 'sms' });
      clock.set(comesBackAt(decided));
      expect(await engine.runNotice(id, 'sms')).toMatchObject({ kind: 'retry', check: 'sms' });
    });

    /** One run of the notice's job, noting when its read of the notice leaves and is answered, and each status read it takes. */
    async function watchedRun(id: string, expected?: 'email'): Promise<{ outcome: StepOutcome; steps: string[] }> {
      const store = web.deps.store;
      const steps: string[] = [];
      const watching = engineUnderTest(
        web,
        sandbox,
        clock,
        {},
        {
          store: new Proxy(store, {
            get(target, key, receiver) {
              // A run reads the notice with its content (getWithContent), or alone for a check (get).
              if (key !== 'getWithContent' && key !== 'get') return Reflect.get(target, key, receiver) as unknown;
              return (...args: Parameters<typeof store.get>) => {
                steps.push(key === 'get' ? 'notice read sent' : 'notice read sent, with its content');
                const read = key === 'get' ? target.get(...args) : target.getWithContent(...args);
                void read.then(() => steps.push('notice read answered'));
                return read;
              };
            },
          }),
          statusReads: {
            take: (channel, now) => {
              steps.push(`${channel} status read taken`);
              return limiter.take(channel, now);
            },
            pause: (channel, ms) => limiter.pause(channel, ms),
          },
        },
      );
      return { outcome: await watching.runNotice(id, expected), steps };
    }

    it('takes the status read a planned check came back for along with its read of the notice, and no other', async () => {
      const email = 'delivered+0ms+along@example.com';
      const { id, plan } = await accepted(email);
      await engine.runNotice(id);
      clock.set(plan[0]!);
      const { outcome, steps } = await watchedRun(id, 'email');
      expect(outcome).toEqual({ kind: 'done', note: 'email delivered' });
      // Sent in the same tick as the read (one write on the step connection's pipeline), once.
      expect(steps).toEqual(['email status read taken', 'notice read sent', 'notice read answered']);
      expect(statusReads(email)).toBe(1);
    });

    it('takes the read after its read of the notice when the job did not say it came back for a check', async () => {
      const { id, plan } = await accepted('delivered+0ms+after@example.com');
      await engine.runNotice(id);
      clock.set(plan[0]!);
      const { outcome, steps } = await watchedRun(id);
      expect(outcome).toEqual({ kind: 'done', note: 'email delivered' });
      expect(steps).toEqual(['notice read sent, with its content', 'notice read answered', 'email status read taken']);
    });
  });

  describe("when the provider's status reads are at their limit", () => {
    it('holds a planned check to the next second the limit allows, and never the deadline', async () => {
      const first = await accepted('never+limit-a@example.com');
      const second = await accepted('never+limit-b@example.com');
      await engine.runNotice(first.id);
      await engine.runNotice(second.id);
      // Both checks are due (the first since a minute) in the same second; the limit is one read a second.
      const check = second.plan[0]!;
      clock.set(check);
      expect(comesBackAt(await engine.runNotice(first.id))).toBe(first.plan[1]);
      expect(statusReads('never+limit-a@example.com')).toBe(1);
      const held = await engine.runNotice(second.id);
      expect(held.note).toBe('email status reads at their limit');
      expect(comesBackAt(held)).toBe(Math.floor(check / 1000) * 1000 + 1000);
      expect(statusReads('never+limit-b@example.com')).toBe(0);

      // The limit used up at the deadline: the deadline's own read still goes, and decides.
      clock.set(second.deadline);
      await limiter.take('email', second.deadline);
      expect((await engine.runNotice(second.id)).note).toBe('fallback decided: email_deadline_elapsed; sms accepted');
      expect(statusReads('never+limit-b@example.com')).toBe(1);
    });

    it("holds every worker's reads for a provider's Retry-After", async () => {
      const now = Date.parse('2026-11-29T15:00:00Z');
      await limiter.pause('email', 60_000);
      expect(await limiter.take('email', now)).toBeGreaterThan(now + 59_000);
      expect(await limiter.take('sms', now)).toBeUndefined();
    });
  });
});

describe("asking for a notice's run from outside its job (a webhook, the reconciler, a job of before)", () => {
  const scheduler = () => new QueueScheduler(web.queues, systemClock);
  const jobOf = (id: string) => jobIds.deadline(id);

  it('adds the job when there is none, due when asked', async () => {
    const id = newNoticeId(3, Date.now());
    const at = Date.now() + 60_000;
    await scheduler().emailPoll(id, at);
    expect(await web.queues.deadline.getJobState(jobOf(id))).toBe('delayed');
    expect(Math.abs((await web.queues.deadline.delayedUntil(jobOf(id)))! - at)).toBeLessThan(1_000);
  });

  it('brings a job delayed until later forward, promotes it when the time has come, and never puts it later', async () => {
    const id = newNoticeId(4, Date.now());
    await web.queues.deadline.add('deadline', {}, { jobId: jobOf(id), delay: 600_000 });
    const sooner = Date.now() + 30_000;
    await scheduler().smsSend(id, sooner);
    expect(Math.abs((await web.queues.deadline.delayedUntil(jobOf(id)))! - sooner)).toBeLessThan(1_000);
    await scheduler().smsPoll(id, sooner + 300_000);
    expect(Math.abs((await web.queues.deadline.delayedUntil(jobOf(id)))! - sooner)).toBeLessThan(1_000);
    await scheduler().deadline(id, Date.now());
    expect(await web.queues.deadline.getJobState(jobOf(id))).toBe('waiting');
  });

  it('removes the job once the notice is settled, and a finished job makes way for a new one', async () => {
    const id = newNoticeId(5, Date.now());
    await scheduler().emailPoll(id, Date.now() + 60_000);
    await scheduler().dropDeadline(id);
    expect(await web.queues.deadline.getJob(jobOf(id))).toBeUndefined();

    // The job runs and completes (a worker of the test's own takes the waiting jobs one by one).
    await web.queues.deadline.add('deadline', {}, { jobId: jobOf(id) });
    const queue = web.queues.deadline.of(id);
    const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const worker = new Worker(queue.name, null, { connection, prefix: queue.opts.prefix, autorun: false });
    try {
      for (;;) {
        const next = await worker.getNextJob('test-token');
        if (!next) break;
        await next.moveToCompleted('done', 'test-token', false);
        if (next.id === jobOf(id)) break;
      }
    } finally {
      await worker.close();
      connection.disconnect();
    }
    expect(await web.queues.deadline.getJobState(jobOf(id))).toBe('completed');
    await scheduler().smsSend(id, Date.now());
    expect(await web.queues.deadline.getJobState(jobOf(id))).toBe('waiting');
  });
});
