import { afterEach, describe, expect, it } from 'vitest';
import { configProblems, testConfig, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';

/**
 * A provider's Retry-After is followed up to HERALD_MAX_RETRY_AFTER, and the clamp is recorded
 * in the `provider.error` entry: a provider asking for a week (or for more than a date can
 * hold) never parks a notice past its deadline.
 */
const WEEK_S = 7 * 86_400;

describe('HERALD_MAX_RETRY_AFTER', () => {
  it('defaults to 5 minutes, takes a duration, and refuses anything else', () => {
    expect(testConfig(testPrefix('cfg')).maxRetryAfterMs).toBe(300_000);
    expect(testConfig(testPrefix('cfg'), { HERALD_MAX_RETRY_AFTER: '30s' }).maxRetryAfterMs).toBe(30_000);
    expect(configProblems(testEnv(testPrefix('cfg'), { HERALD_MAX_RETRY_AFTER: 'soon' })).join('\n')).toMatch(/HERALD_MAX_RETRY_AFTER/);
    expect(configProblems(testEnv(testPrefix('cfg'), { HERALD_MAX_RETRY_AFTER: '0s' })).join('\n')).toMatch(/HERALD_MAX_RETRY_AFTER/);
  });
});

describe('a 429 asking for a week, through the worker', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.close();
    stack = undefined;
  });

  it('sends the email again once the clamped wait is over, and records what the provider asked for', async () => {
    stack = await startStack({ prefix: testPrefix('retry-after'), env: { HERALD_MAX_RETRY_AFTER: '2s' } });
    stack.sandbox.injectFault({ operation: 'postmark.send', mode: 'status_429', retryAfterSeconds: WEEK_S, match: 'slowpoke', count: 1 });
    const id = await stack.createNotice(noticeBody({ recipient: { id: 'p-429', email: 'delivered+slowpoke@example.com' } }));
    await stack.waitForState(id, ['email_sent', 'email_delivered']);
    const error = (await stack.events(id)).find((e) => e.type === 'provider.error');
    expect(error).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2_000, retryAfterClampedFromMs: WEEK_S * 1000 });
  });
});

describe('a 429 on a status read, through the worker', () => {
  let stack: Stack | undefined;
  afterEach(async () => {
    await stack?.close();
    stack = undefined;
  });

  it("holds every worker's status checks of that kind for the Retry-After (the status-read limiter's hold)", async () => {
    stack = await startStack({ prefix: testPrefix('status-429'), env: { HERALD_MAX_RETRY_AFTER: '10m' } });
    stack.sandbox.injectFault({ operation: 'postmark.details', mode: 'status_429', retryAfterSeconds: 300, match: 'never+held', count: 1 });
    const id = await stack.createNotice(
      noticeBody({
        recipient: { id: 'p-held', email: 'never+held@example.com' },
        deadlineInSeconds: 30,
        policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 2 },
      }),
    );
    await waitFor(
      async () => (await stack!.events(id)).some((e) => e.type === 'provider.error' && e.operation === 'status'),
      20_000,
      'the status read refused with a 429',
    );
    // The provider's status reads are held for every worker (the hold's key lives for the
    // Retry-After); the notices' jobs, deadlines among them, are not.
    const held = stack.web.store.keys.statusReads('postmark-sandbox', 'pause');
    await waitFor(async () => (await stack!.web.redis.pttl(held)) > 60_000, 5_000, 'the status reads to be held');
    expect(await stack.web.queues.deadline.of(id).getRateLimitTtl()).toBeLessThanOrEqual(0);
  });
});
