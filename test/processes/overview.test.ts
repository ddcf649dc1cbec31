import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { pagePolicy } from '../../src/http/html.js';
import { OUTCOMES, OVERVIEW_CSS, sampleKey } from '../../src/http/overview.js';
import { TERMINAL_STATES } from '../../src/notice/states.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { jobIds } from '../../queues/index.js';

const ADMIN = 'admin-token-overview-0123456789';
const HOSTILE_REASON = '<img src=x onerror=alert(1)>';

const unescape = (s: string) =>
  s.replace(/&(lt|gt|quot|#39|amp);/g, (_m, e: string) => ({ lt: '<', gt: '>', quot: '"', '#39': "'", amp: '&' })[e]!);

/** Every sample of a Prometheus text exposition, by `sampleKey`. */
function parseMetrics(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`unparsed metrics line: ${line}`);
    const labels = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!.replace(/\\(.)/g, '$1')]),
    );
    samples.set(sampleKey(match[1]!, labels), Number(match[3]));
  }
  return samples;
}

/** The numbers the overview shows as /metrics samples: `data-metric` key → `data-value`. */
function pageMetrics(html: string): Map<string, number> {
  return new Map([...html.matchAll(/data-metric="([^"]*)" data-value="([^"]*)"/g)].map((m) => [unescape(m[1]!), Number(m[2])]));
}

describe('the admin overview at /admin', () => {
  let stack: Stack;
  const admin = { authorization: `Bearer ${ADMIN}` };

  beforeAll(async () => {
    // One reading of Redis serves the page and /metrics for the whole test (as within any cache window).
    stack = await startStack({ prefix: testPrefix('overview'), env: { HERALD_ADMIN_TOKEN: ADMIN, HERALD_METRICS_CACHE_MS: '60000' } });
    // One notice of each outcome, and provider errors from both providers (the emulators' flaky
    // addresses answer 500, then 429, then accept).
    const quick = { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 1 };
    const ids = await Promise.all([
      stack.createNotice(
        noticeBody({ recipient: { id: 'o1', email: 'delivered+300ms@example.com', phone: '+12025550100' }, deadlineInSeconds: 10 }),
      ),
      stack.createNotice(
        noticeBody({ recipient: { id: 'o2', email: 'never@example.com', phone: '+14155550100' }, deadlineInSeconds: 2, policy: undefined }),
      ),
      stack.createNotice(noticeBody({ recipient: { id: 'o3', email: 'bounce+300ms@example.com' }, deadlineInSeconds: 4 })),
      stack.createNotice(
        noticeBody({ recipient: { id: 'o4', email: 'bounce+300ms@example.com', phone: '+12025550102' }, deadlineInSeconds: 4 }),
      ),
      stack.createNotice(
        noticeBody({ recipient: { id: 'o5', email: 'flaky+300ms+o5@example.com' }, deadlineInSeconds: 20, policy: quick }),
      ),
      stack.createNotice(noticeBody({ recipient: { id: 'o6', email: 'never@example.com', phone: '+12065550104' }, deadlineInSeconds: 2 })),
      stack.createNotice(noticeBody({ recipient: { id: 'o7', email: 'never@example.com', phone: '+12065550100' }, deadlineInSeconds: 4 })),
    ]);
    // The content of o7 is gone before a send needs it (whichever send comes first): it ends failed.
    await stack.web.store.deleteContent(ids[6]!);
    const outcomes = ['email_delivered', 'sms_delivered', 'blocked', 'sms_failed', 'email_delivered', 'sms_delivered', 'failed'];
    const ended = await Promise.all(ids.map((id) => stack.waitForState(id, [...TERMINAL_STATES])));
    expect(ended.map((view) => view.state)).toEqual(outcomes);
    // A counter label that is not Herald's: whatever Redis holds, the page must not turn it into markup.
    await stack.web.redis.hincrby(stack.web.store.keys.metrics(0), `fallback|${HOSTILE_REASON}`, 1);
  });
  afterAll(async () => {
    await stack?.close();
  });

  describe('when asked without the admin token', () => {
    it('answers 401 with the JSON error, 403 with a wrong token, and sends a browser to the login form', async () => {
      const none = await stack.web.call('GET', '/admin', undefined, { authorization: '' });
      expect(none.statusCode).toBe(401);
      expect(none.json().error.code).toBe('unauthorized');
      const wrong = await stack.web.call('GET', '/admin', undefined, { authorization: 'Bearer not-the-admin-token-at-all' });
      expect(wrong.statusCode).toBe(403);
      expect(wrong.json().error.code).toBe('forbidden');
      const browser = await stack.web.call('GET', '/admin', undefined, { authorization: '', accept: 'text/html' });
      expect(browser.statusCode).toBe(303);
      expect(browser.headers.location).toBe('/admin/login?next=%2Fadmin');
    });

    it('lands on the overview after logging in, from /admin or from the login form itself', async () => {
      for (const start of ['/admin', '/admin/login']) {
        let location = start;
        let cookie = '';
        const visited: string[] = [];
        // Follow the browser's path: each redirect, and the login form's hidden return-to, as it is served.
        for (let hop = 0; hop < 5; hop += 1) {
          visited.push(location);
          const res = await stack.web.call('GET', location, undefined, { authorization: '', accept: 'text/html', cookie });
          if (res.statusCode === 303) {
            location = String(res.headers.location);
            continue;
          }
          expect(res.statusCode, location).toBe(200);
          if (!location.startsWith('/admin/login')) {
            expect(res.body).toContain('<title>Herald — overview</title>');
            break;
          }
          const next = /name="next" value="([^"]*)"/.exec(res.body)![1]!;
          const login = await stack.web.call('POST', '/admin/login', `token=${ADMIN}&next=${encodeURIComponent(unescape(next))}`, {
            authorization: '',
            'content-type': 'application/x-www-form-urlencoded',
          });
          expect(login.statusCode).toBe(303);
          cookie = String(login.headers['set-cookie']).split(';')[0]!;
          location = String(login.headers.location);
        }
        expect(location, `logging in from ${start}`).toBe('/admin');
        expect(visited.at(-2), `logging in from ${start}`).toMatch(/^\/admin\/login/);
      }
    });
  });

  describe('after a workload through the real worker', () => {
    let page: string;
    let metrics: Map<string, number>;
    let shown: Map<string, number>;
    beforeAll(async () => {
      const res = await stack.web.call('GET', '/admin', undefined, admin);
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/text\/html/);
      expect(res.headers['content-security-policy']).toBe(pagePolicy(OVERVIEW_CSS));
      page = res.body;
      shown = pageMetrics(page);
      metrics = parseMetrics((await stack.web.call('GET', '/metrics', undefined, { authorization: '' })).body);
    });

    it('shows every number beside its chart with the value /metrics reports for the same sample', () => {
      expect(shown.size).toBeGreaterThan(40);
      for (const [key, value] of shown) {
        expect(metrics.has(key), `${key} is a /metrics sample`).toBe(true);
        expect(value, key).toBeCloseTo(metrics.get(key)!, 9);
      }
    });

    it('covers fallback, deadline lateness, checks per notice, spend, queues, the log mirror and retirement', () => {
      const families = new Set([...shown.keys()].map((k) => k.replace(/\{.*$/, '')));
      for (const family of [
        'herald_notices_accepted_total',
        'herald_fallback_decisions_total',
        'herald_fallback_blocked_total',
        'herald_fallback_decision_lag_seconds_bucket',
        'herald_fallback_decision_lag_seconds_count',
        'herald_status_checks_per_notice_bucket',
        'herald_status_checks_per_notice_sum',
        'herald_estimated_spend_total',
        'herald_queue_jobs',
        'herald_queue_oldest_waiting_seconds',
        'herald_log_unarchived_entries',
        'herald_log_oldest_unarchived_seconds',
        'herald_log_stream_entries',
        'herald_notices_awaiting_retirement',
        'herald_notices_retired_total',
        'herald_live_notices',
      ])
        expect(families, family).toContain(family);
      for (const queue of ['email-send', 'email-poll', 'deadline', 'sms-send', 'sms-poll', 'reconcile', 'log-mirror', 'content-purge']) {
        expect(shown.has(sampleKey('herald_queue_jobs', { queue, state: 'delayed' })), queue).toBe(true);
        expect(shown.has(sampleKey('herald_queue_oldest_waiting_seconds', { queue })), queue).toBe(true);
      }
      expect(shown.get('herald_notices_accepted_total')).toBe(7);
      expect(shown.get(sampleKey('herald_fallback_decisions_total', { reason: 'email_deadline_elapsed' }))).toBeGreaterThanOrEqual(2);
      expect(shown.get(sampleKey('herald_fallback_blocked_total', { reason: 'no_phone' }))).toBe(1);
      expect(shown.get('herald_fallback_decision_lag_seconds_count')).toBeGreaterThanOrEqual(2);
      expect(shown.get('herald_status_checks_per_notice_count')).toBe(7);
      expect(shown.get(sampleKey('herald_estimated_spend_total', { channel: 'sms' }))).toBeGreaterThan(0);
      expect([...page.matchAll(/<svg /g)].length, 'one chart per panel').toBe(7);
    });

    it('counts the outcomes: delivered, fallen back, SMS failed, blocked, failed, each its final state, in the window and since the counters began', async () => {
      const outcomes = /<table id="outcome-counts">[\s\S]*?<\/table>/.exec(page)![0];
      const cell = (state: string, column: RegExp) =>
        Number(new RegExp(`data-outcome="${state}"[^>]*>[\\s\\S]*?${column.source}`).exec(outcomes)![1]);
      const expected: Record<string, number> = { email_delivered: 2, sms_delivered: 2, sms_failed: 1, blocked: 1, failed: 1, canceled: 0 };
      expect(OUTCOMES.map((o) => o.label)).toEqual(['delivered', 'fallen back', 'SMS failed', 'blocked', 'failed', 'canceled']);
      const window = /id="fallback-window" data-from="([^"]+)" data-to="([^"]+)"/.exec(page)!;
      const stats = (await stack.web.call('GET', `/v1/stats?from=${window[1]}&to=${window[2]}`)).json();
      for (const { state } of OUTCOMES) {
        expect(cell(state, /data-stat="byState\.\w+">(\d+)</), `${state} in the last 24 hours`).toBe(expected[state]);
        expect(cell(state, /data-stat="byState\.\w+">(\d+)</), `${state} as /v1/stats counts it`).toBe(stats.byState[state] ?? 0);
        const since = sampleKey('herald_transitions_total', { state });
        expect(cell(state, /data-(?:metric|since)="[^"]*" data-value="(\d+)"/), `${state} since the counters began`).toBe(expected[state]);
        expect(shown.get(since) ?? 0, `${state} is the /metrics sample`).toBe(metrics.get(since) ?? 0);
      }
      expect(outcomes).toContain('data-stat="unfinished">0<');
    });

    it('counts provider errors by provider, from the same counters as /metrics', () => {
      const totals = Object.fromEntries(
        [...page.matchAll(/data-provider-errors="(\w+)" data-value="(\d+)"/g)].map((m) => [m[1]!, Number(m[2])]),
      );
      expect(Object.keys(totals).sort()).toEqual(['postmark', 'twilio']);
      for (const provider of ['postmark', 'twilio']) {
        const failedCalls = [...metrics].filter(
          ([key]) => key.startsWith('herald_provider_calls_total{') && key.includes(`provider=${provider}`) && !key.includes('outcome=ok'),
        );
        // The flaky address and number: a 500 (server_error) and a 429 (rate_limited) before the send went through.
        expect(failedCalls.map(([key]) => /outcome=(\w+)/.exec(key)![1]).sort(), provider).toEqual(['rate_limited', 'server_error']);
        expect(totals[provider], provider).toBe(failedCalls.reduce((sum, [, n]) => sum + n, 0));
        expect(totals[provider], provider).toBeGreaterThanOrEqual(2);
      }
    });

    it('charts the last 24 hours from the stats counters, with the window totals /v1/stats gives for the same hours', async () => {
      const window = /id="fallback-window" data-from="([^"]+)" data-to="([^"]+)"/.exec(page)!;
      const stats = (await stack.web.call('GET', `/v1/stats?from=${window[1]}&to=${window[2]}`)).json();
      expect(Date.parse(window[2]!) - Date.parse(window[1]!)).toBe(24 * 3_600_000);
      expect(stats.notices).toBe(7);
      expect(page).toContain(`data-stat="notices">${stats.notices}<`);
      expect(page).toContain(`data-stat="fallbackRate" data-value="${stats.fallbackRate}"`);
      for (const [reason, n] of Object.entries(stats.fallbackByReason))
        expect(page).toContain(`data-stat="fallbackByReason.${reason}">${n}<`);
      expect(Object.keys(stats.fallbackByReason).sort()).toEqual(['email_bounced', 'email_deadline_elapsed']);
      const hourly = [...page.matchAll(/data-hour="([^"]+)" data-notices="(\d+)"/g)];
      expect(hourly.length).toBeGreaterThan(0);
      expect(
        hourly.reduce((sum, m) => sum + Number(m[2]), 0),
        'the hourly bars add up to the window',
      ).toBe(stats.notices);
    });

    it('escapes a value read from Redis instead of writing it as markup', () => {
      expect(shown.get(sampleKey('herald_fallback_decisions_total', { reason: HOSTILE_REASON }))).toBe(1);
      expect(page).not.toContain('<img');
      expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
      expect(page).not.toMatch(/<script/i);
    });
  });

  describe('when no worker runs', () => {
    const prefix = testPrefix('overview-idle');
    const clock = new ManualClock(Date.now());
    let web: WebUnderTest;
    beforeAll(async () => {
      web = await startWebUnderTest(testConfig(prefix, { HERALD_ADMIN_TOKEN: ADMIN, HERALD_METRICS_CACHE_MS: '0' }), clock);
    });
    afterAll(async () => {
      await web?.close();
      await cleanUp(prefix);
    });

    it('shows how long the oldest job of each queue has waited: a send nobody took, a delayed job nobody ran', async () => {
      // BullMQ stamps jobs with the system clock: start the manual one there.
      clock.set(Date.now());
      const created = await web.call('POST', '/v1/notices', noticeBody({ deadlineInSeconds: 60 }));
      expect(created.statusCode).toBe(202);
      // Beside the notice's job (due at once, for its send), a job of an earlier version's queue, delayed 60 s.
      await web.queues.smsSend.add('sms-send', {}, { jobId: jobIds.smsSend(created.json().id as string), delay: 60_000 });
      const read = async () => pageMetrics((await web.call('GET', '/admin', undefined, admin)).body);
      const waited = (page: Map<string, number>, queue: string) => page.get(sampleKey('herald_queue_oldest_waiting_seconds', { queue }));

      clock.advance(30_000);
      const early = await read();
      expect(early.get(sampleKey('herald_queue_jobs', { queue: 'deadline', state: 'wait' }))).toBe(1);
      expect(waited(early, 'deadline')).toBeGreaterThanOrEqual(29);
      expect(waited(early, 'sms-send'), 'a delayed job before its time is not waiting').toBe(0);

      clock.advance(120_000);
      const late = await read();
      expect(waited(late, 'deadline')).toBeGreaterThanOrEqual(149);
      const delayedWaited = waited(late, 'sms-send')!;
      expect(delayedWaited, 'the delayed job, due 60 s after acceptance, has waited since then').toBeGreaterThanOrEqual(89);
      expect(delayedWaited).toBeLessThanOrEqual(waited(late, 'deadline')!);
      expect(waited(late, 'email-send')).toBe(0);
    });
  });
});
