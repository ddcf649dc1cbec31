import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/clock.js';
import type { NoticeEngine } from '../../src/notice/engine.js';
import type { Sandbox } from '@herald/sandbox';
import { startEngineStack, type EngineStack } from '../helpers/engine.js';
import type { AnyEntry } from '../helpers/entries.js';
import { noticeBody, type WebUnderTest } from '../helpers/herald.js';

/**
 * A provider's Retry-After is followed up to HERALD_MAX_RETRY_AFTER, and the clamp is recorded
 * in the `provider.error` entry: a provider asking for a week (or for more than a date can
 * hold) never parks a notice past its deadline.
 */
const WEEK_S = 7 * 86_400;

describe('on the injected clock', () => {
  let stack: EngineStack;
  let clock: ManualClock;
  let sandbox: Sandbox;
  let web: WebUnderTest;
  let engine: NoticeEngine;

  beforeAll(async () => {
    stack = await startEngineStack('retry-clock', { settings: { maxRetryAfterMs: 60_000 } });
    ({ clock, sandbox, web, engine } = stack);
  });
  afterAll(() => stack.close());

  async function created(email: string): Promise<string> {
    const res = await web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'p1', email } }));
    return res.json().id as string;
  }

  it('comes back for a send after the maximum, not after the week asked for', async () => {
    const id = await created('never+send@example.com');
    sandbox.injectFault({ operation: 'postmark.send', mode: 'status_429', retryAfterSeconds: WEEK_S, match: 'never+send', count: 1 });
    const outcome = await engine.sendEmail(id);
    expect(outcome).toMatchObject({ kind: 'retry', at: clock.now() + 60_000 });
    expect((await web.store.events(id)).at(-1)).toMatchObject({
      type: 'provider.error',
      retryAfterMs: 60_000,
      retryAfterClampedFromMs: WEEK_S * 1000,
    });
  });

  it('pauses status reads for the maximum, and plans the next check no later than that', async () => {
    const id = await created('never+status@example.com');
    expect((await engine.sendEmail(id)).note).toBe('email accepted');
    const first = (await web.store.get(id))!.emailChannel.nextCheckAt!;
    clock.set(first);
    // 10^20 seconds: more milliseconds than a Date can hold.
    sandbox.injectFault({ operation: 'postmark.details', mode: 'status_429', retryAfterSeconds: 1e20, match: 'never+status', count: 1 });
    const outcome = await engine.pollEmail(id);
    expect(outcome).toMatchObject({ pauseMs: 60_000 });
    const entry: AnyEntry = (await web.store.events(id)).at(-1)!;
    expect(entry).toMatchObject({ type: 'provider.error', operation: 'status', retryAfterMs: 60_000 });
    expect(entry.retryAfterClampedFromMs).toBeGreaterThan(WEEK_S * 1000);
    const notice = (await web.store.get(id))!;
    expect(notice.emailChannel.nextCheckAt).toBeGreaterThanOrEqual(first + 60_000);
    expect(notice.emailChannel.nextCheckAt).toBeLessThanOrEqual(notice.deadline);
    // The same job comes back for that check, unless only the deadline's own read is left.
    if (notice.emailChannel.nextCheckAt! < notice.deadline)
      expect(outcome).toMatchObject({ kind: 'retry', at: notice.emailChannel.nextCheckAt });
    else expect(outcome.kind).toBe('done');
  });

  it('leaves a Retry-After within the maximum as it is, with no clamp recorded', async () => {
    const id = await created('never+short@example.com');
    sandbox.injectFault({ operation: 'postmark.send', mode: 'status_429', retryAfterSeconds: 30, match: 'never+short', count: 1 });
    await engine.sendEmail(id);
    const entry = (await web.store.events(id)).at(-1)!;
    expect(entry).toMatchObject({ type: 'provider.error', retryAfterMs: 30_000 });
    expect(entry).not.toHaveProperty('retryAfterClampedFromMs');
  });
});
