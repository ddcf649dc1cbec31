import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { noticeBody } from '../helpers/herald.js';
import { testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ prefix: testPrefix('sup') });
});
afterAll(async () => stack.close());

const ofType = (events: StoredEntry[], type: string) => events.filter((e) => e.type === type);
let recipients = 0;
const notice = (email: string, phone: string | undefined, deadlineInSeconds = 20) =>
  noticeBody({ recipient: { id: `r-${(recipients += 1)}`, email, ...(phone ? { phone } : {}) }, deadlineInSeconds });

describe('the suppression API', () => {
  it('adds, reads (normalized) and lifts a suppression', async () => {
    const added = await stack.web.call('POST', '/v1/suppressions', {
      channel: 'email',
      address: 'Someone@Example.COM',
      reason: 'asked us',
    });
    expect(added.statusCode).toBe(201);
    expect(added.json()).toMatchObject({ channel: 'email', address: 'someone@example.com', reason: 'asked us', source: 'manual' });
    const read = await stack.web.call('GET', '/v1/suppressions/email/SOMEONE@example.com');
    expect(read.json()).toMatchObject({ address: 'someone@example.com', source: 'manual' });
    expect(typeof read.json().createdAt).toBe('string');
    expect((await stack.web.call('DELETE', '/v1/suppressions/email/someone@example.com')).statusCode).toBe(204);
    expect((await stack.web.call('GET', '/v1/suppressions/email/someone@example.com')).json().error.code).toBe('not_found');
    expect((await stack.web.call('DELETE', '/v1/suppressions/email/someone@example.com')).statusCode).toBe(404);
  });
  it('refuses a bad channel or address with validation_failed', async () => {
    expect((await stack.web.call('POST', '/v1/suppressions', { channel: 'fax', address: 'x', reason: 'r' })).json().error.code).toBe(
      'validation_failed',
    );
    expect((await stack.web.call('POST', '/v1/suppressions', { channel: 'sms', address: '12345', reason: 'r' })).json().error.code).toBe(
      'validation_failed',
    );
  });
});

describe('suppressions decide', () => {
  it('a manually suppressed email skips straight to the fallback (email_suppressed) without sending', async () => {
    await stack.web.call('POST', '/v1/suppressions', { channel: 'email', address: 'manual-email@example.com', reason: 'complaint' });
    const id = await stack.createNotice(notice('manual-email@example.com', '+12105550100', 60));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_suppressed');
    const events = await stack.events(id);
    expect(ofType(events, 'policy.checked')[0]).toMatchObject({ channel: 'email', outcome: 'suppressed' });
    expect(stack.sandbox.emails().filter((m) => m.to === 'manual-email@example.com')).toHaveLength(0);
  });

  it('a manually suppressed phone blocks the fallback (sms_suppressed)', async () => {
    await stack.web.call('POST', '/v1/suppressions', { channel: 'sms', address: '+12115550100', reason: 'asked us' });
    const id = await stack.createNotice(notice('never@example.com', '+12115550100', 2));
    await stack.waitForState(id, ['blocked']);
    const events = await stack.events(id);
    expect(ofType(events, 'policy.checked').at(-1)).toMatchObject({ channel: 'sms', outcome: 'suppressed' });
    expect(ofType(events, 'fallback.blocked')[0]).toMatchObject({ reason: 'sms_suppressed' });
    expect(stack.smsTo('+12115550100')).toBe(0);
  });

  it('a hard bounce suppresses the address, recorded with its notice; the next notice skips email', async () => {
    const address = 'bounce+200ms+sup@example.com';
    const first = await stack.createNotice(notice(address, '+12125550100'));
    await stack.waitForState(first, ['sms_sent', 'sms_delivered']);
    const record = (await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(address)}`)).json();
    expect(record).toMatchObject({ source: 'postmark_hard_bounce', noticeId: first });
    const added = ofType(await stack.events(first), 'suppression.added');
    expect(added).toEqual([expect.objectContaining({ channel: 'email', source: 'postmark_hard_bounce' })]);
    expect(JSON.stringify(added)).not.toContain('example.com');

    const second = await stack.createNotice(notice(address, '+12135550100'));
    const view = await stack.waitForState(second, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_suppressed');
    expect(stack.sandbox.emails().filter((m) => m.to === address)).toHaveLength(1);
  });

  it('an inactive recipient (406) is suppressed with its source', async () => {
    const id = await stack.createNotice(notice('inactive+sup@example.com', '+12145550100'));
    await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect((await stack.web.call('GET', '/v1/suppressions/email/inactive+sup@example.com')).json()).toMatchObject({
      source: 'postmark_inactive',
      noticeId: id,
    });
  });

  it('an SMS opt-out (21610) ends sms_failed, suppresses the number, and blocks the next fallback', async () => {
    const phone = '+12155550103';
    const first = await stack.createNotice(notice('never@example.com', phone, 2));
    await stack.waitForState(first, ['sms_failed']);
    expect((await stack.web.call('GET', `/v1/suppressions/sms/${encodeURIComponent(phone)}`)).json()).toMatchObject({
      source: 'twilio_opt_out',
      noticeId: first,
    });
    const second = await stack.createNotice(notice('never@example.com', phone, 2));
    await stack.waitForState(second, ['blocked']);
    expect(ofType(await stack.events(second), 'fallback.blocked')[0]).toMatchObject({ reason: 'sms_suppressed' });
    expect(stack.sandbox.requests().filter((r) => r.operation === 'twilio.create' && r.recipient === phone)).toHaveLength(1);
  });
});

describe('GET /v1/stats', () => {
  it('counts the period’s notices by state and fallback reason, with checks per notice and estimated spend', async () => {
    const res = await stack.web.call('GET', '/v1/stats');
    expect(res.statusCode).toBe(200);
    const stats = res.json();
    expect(stats.notices).toBeGreaterThanOrEqual(7);
    expect(stats.fallbackByReason.email_suppressed).toBeGreaterThanOrEqual(2);
    expect(stats.fallbackRate).toBeGreaterThan(0);
    expect(stats.fallbackRate).toBeLessThanOrEqual(1);
    expect(stats.checksPerNotice).toBeGreaterThan(0);
    expect(stats.estimatedSpend.currency).toBe('USD');
    expect(stats.estimatedSpend.total).toBeCloseTo(stats.estimatedSpend.byChannel.email + stats.estimatedSpend.byChannel.sms, 6);
    expect(Object.values(stats.byState as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(stats.notices);
    const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString();
    const empty = (await stack.web.call('GET', `/v1/stats?from=${day(10)}&to=${day(9)}`)).json();
    expect(empty).toMatchObject({ notices: 0, fallbackRate: 0 });
    // Beyond HERALD_STATS_RETENTION (31 days by default) the counts are gone: a clear 400, not zeros.
    expect((await stack.web.call('GET', '/v1/stats?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z')).statusCode).toBe(400);
    expect((await stack.web.call('GET', '/v1/stats?from=2020-01-01T00:00:00Z&to=2021-01-01T00:00:00Z')).statusCode).toBe(400);
  });
});
