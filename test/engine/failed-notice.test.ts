import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import type { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import type { NoticeEngine } from '../../src/notice/engine.js';
import { reconcileOnce } from '../../src/notice/reconciler.js';
import type { Sandbox } from '@herald/sandbox';
import { startEngineStack, type EngineStack } from '../helpers/engine.js';
import { noticeBody, type WebUnderTest } from '../helpers/herald.js';

/**
 * The `failed` state: a notice whose content is gone or cannot be opened when a step needs it
 * ends there, with `notice.failed` and `notice.completed`, instead of failing its job forever.
 */
const types = (events: StoredEntry[]) => events.map((e) => e.type);

describe('on the injected clock', () => {
  const log = createLogger('test', 'silent');
  let stack: EngineStack;
  let clock: ManualClock;
  let sandbox: Sandbox;
  let web: WebUnderTest;
  let engine: NoticeEngine;

  beforeAll(async () => {
    stack = await startEngineStack('failed-clock');
    ({ clock, sandbox, web, engine } = stack);
  });
  afterAll(() => stack.close());

  async function sentNotice(phone: string): Promise<{ id: string; deadline: number }> {
    const res = await web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'p1', email: 'never@example.com', phone } }));
    const id = res.json().id as string;
    expect((await engine.sendEmail(id)).note).toBe('email accepted');
    return { id, deadline: Date.parse(res.json().deadline) };
  }

  it('fails an SMS send in doubt whose body it can no longer search for, and says the attempt was in doubt', async () => {
    const phone = '+12105550100';
    const { id, deadline } = await sentNotice(phone);
    sandbox.injectFault({ operation: 'twilio.create', mode: 'accept_then_hang', match: phone });
    const realNow = Math.max(Date.now(), deadline);
    clock.set(realNow);
    // The deadline step's send is left in doubt, for the notice's job to come back to.
    expect((await engine.runDeadline(id)).note).toMatch(/sms send: timeout; the sms is sent at /);

    await web.store.deleteContent(id);
    clock.set(realNow + 60_000);
    expect((await engine.sendSms(id)).note).toMatch(/failed: content_unavailable/);
    const events = await web.store.events(id);
    expect(events.find((e) => e.type === 'notice.failed')).toMatchObject({ stateBefore: 'sms_sending', attemptInDoubt: true });
    // Run again (a duplicate job): the notice is done, nothing more is written or sent.
    const count = events.length;
    expect((await engine.sendSms(id)).note).toBe('state is failed');
    expect(await web.store.events(id)).toHaveLength(count);
    expect(sandbox.sms().filter((m) => m.to === phone)).toHaveLength(1);
  });

  describe('the reconciler', () => {
    const deps = () => ({ store: web.store, engine, clock, log, graceMs: 10_000, leaseMs: 60_000, owner: 'test' });

    it('writes no entry for an overdue notice that needs nothing (its status check is already queued)', async () => {
      const { id } = await sentNotice('+12115550100');
      const notice = (await web.store.get(id))!;
      const before = await web.store.events(id);
      clock.set(notice.emailChannel.nextCheckAt! + 11_000);
      const report = await reconcileOnce(deps());
      expect(report.driven).toBeGreaterThanOrEqual(1);
      expect(await web.store.events(id)).toEqual(before);
      expect((await web.store.get(id))!.state).toBe('email_sent');
    });

    it('writes notice.reconciled after a drive that changed the notice, naming the state before and after', async () => {
      const { id, deadline } = await sentNotice('+12125550100');
      clock.set(deadline + 11_000);
      await reconcileOnce(deps());
      const events = await web.store.events(id);
      const reconciled = events.filter((e) => e.type === 'notice.reconciled');
      expect(reconciled).toHaveLength(1);
      expect(reconciled[0]).toMatchObject({ state: 'sms_pending', stateBefore: 'email_sent' });
      expect(events.at(-1)!.type).toBe('notice.reconciled');
      expect(types(events)).toContain('fallback.decided');
    });
  });
});
