import type { Browser, Locator } from 'playwright-core';
import { cspViolations, DOCS, hasChromium, launchBrowser } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

const ADMIN = 'admin-token-browser-0123456789';
const WEBHOOK_AUTH = 'hooks:browser-webhook-secret';
const PUBLIC_URL = 'https://herald.example.test';
const TWILIO_TOKEN = 'twilio-token-of-the-browser-test';

// The page's globals, as far as the functions this file runs in the page read them. Declared here,
// not through the DOM library: a lib reference would load the DOM's globals for every file checked
// with this one (src included), where Node's are meant.
declare const document: {
  activeElement: { closest(selectors: string): unknown; getAttribute(name: string): string | null } | null;
  documentElement: { scrollWidth: number };
};
declare const window: { innerWidth: number };

/** Whether an element's text is cut off (its content wider or taller than its box) and whether its box lies within the viewport's width. */
async function fullyVisible(locator: Locator, viewportWidth: number): Promise<{ clipped: boolean; inViewport: boolean }> {
  const clipped = await locator.evaluate((el) => el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1);
  const box = (await locator.boundingBox())!;
  return { clipped, inViewport: box.x >= 0 && box.x + box.width <= viewportWidth + 0.5 };
}

describe.skipIf(!hasChromium)('the admin pages in a real browser', () => {
  let stack: Stack;
  let browser: Browser;
  let base: string;
  let noticeId: string;
  let blockedId: string;

  beforeAll(async () => {
    // Webhooks on, as `npm start` has them; checks 2 s apart, so that the SMS's pushed delivery comes before its first check.
    stack = await startStack({
      prefix: testPrefix('browser'),
      env: {
        HERALD_ADMIN_TOKEN: ADMIN,
        HERALD_MIN_POLL_INTERVAL_MS: '2000',
        HERALD_POSTMARK_WEBHOOK_AUTH: WEBHOOK_AUTH,
        HERALD_PUBLIC_URL: PUBLIC_URL,
        TWILIO_AUTH_TOKEN: TWILIO_TOKEN,
      },
    });
    base = await stack.web.app.listen({ port: 0, host: '127.0.0.1' });
    stack.sandbox.configureWebhooks({ url: base, publicUrl: PUBLIC_URL, postmarkAuth: WEBHOOK_AUTH, twilioAuthToken: TWILIO_TOKEN });
    noticeId = await stack.createNotice(
      noticeBody({
        recipient: { id: 'player-42', email: 'opened+300ms@example.com', phone: '+12025550100' },
        deadlineInSeconds: 6,
        policy: undefined,
      }),
    );
    // A blocked notice, with the longest of the blocked reasons (its recipient refused SMS), decided
    // at the deadline: the last thing on its timeline, at the chart's right edge.
    expect((await stack.web.call('PUT', '/v1/recipients/player-43/policy', { consent: { email: true, sms: false } })).statusCode).toBe(200);
    blockedId = await stack.createNotice(
      noticeBody({ recipient: { id: 'player-43', email: 'never@example.com', phone: '+12025550100' }, deadlineInSeconds: 4 }),
    );
    await stack.waitForState(noticeId, ['sms_delivered']);
    await stack.waitForState(blockedId, ['blocked']);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  it('logs in through the form, opens Bull Board, the timeline of a notice that fell back to SMS, and the overview', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const violations = cspViolations(page);
    await page.goto(`${base}/admin/queues`);
    expect(page.url()).toContain('/admin/login');
    expect(violations, 'the login page keeps to its own CSP').toEqual([]);
    await page.fill('input[name=token]', ADMIN);
    await Promise.all([page.waitForURL(/\/admin\/queues/), page.click('button[type=submit]')]);
    await page.getByText('email-send').first().waitFor({ timeout: 15_000 });
    await page.getByText('Loading...').first().waitFor({ state: 'detached', timeout: 15_000 });
    await page.screenshot({ path: `${DOCS}bull-board.png` });
    // Bull Board runs under the admin CSP: its scripts load and run; only outside fonts are refused.
    expect(violations.filter((v) => !v.includes('fonts.googleapis.com'))).toEqual([]);
    violations.length = 0;

    await page.goto(`${base}/admin/notices/${noticeId}`);
    const deadline = page.locator('#deadline-marker');
    await expect(deadline.count()).resolves.toBe(1);
    expect(await deadline.textContent()).toContain('channel deadline');
    const fallback = page.locator('#fallback-marker');
    expect(await fallback.getAttribute('data-reason')).toBe('email_deadline_elapsed');
    expect(await fallback.textContent()).toContain('email_deadline_elapsed');
    expect(await page.locator('[data-marker=email-observed]').count()).toBeGreaterThanOrEqual(2);
    expect(await page.locator('#state').textContent()).toBe('sms_delivered');
    // Where each status came from: the SMS's delivery was pushed by Twilio's status callback and saved its checks; the email's deadline read was a poll.
    expect(await page.locator('[data-marker=sms-observed][data-source=webhook][data-status=delivered] .webhook-ring').count()).toBe(1);
    const smsDelivered = page.locator('ol.log > li', { has: page.locator('.type', { hasText: 'sms.observed' }) }).last();
    expect(await smsDelivered.locator('.badge-webhook').textContent()).toBe('webhook');
    const saved = Number(await smsDelivered.locator('.badge-saved').getAttribute('data-checks-saved'));
    expect(saved).toBeGreaterThan(0);
    expect(await smsDelivered.locator('dd[data-field=checksSaved]').textContent()).toBe(String(saved));
    const emailPolled = page.locator('ol.log > li', { has: page.locator('.type', { hasText: 'email.observed' }) }).last();
    expect(await emailPolled.locator('.badge-poll').textContent()).toBe('poll');
    expect(await page.locator('#observations').textContent()).toMatch(new RegExp(`from provider webhooks; ${saved} planned checks saved`));
    await page.screenshot({ path: `${DOCS}timeline.png`, fullPage: true });
    expect(violations, 'the timeline keeps to its own CSP').toEqual([]);

    // Readable by a person: the three timescales explained once, entries as labelled values.
    const timescales = page.locator('#timescales dt');
    expect(await timescales.allTextContents()).toEqual([
      expect.stringContaining('Provider timeout'),
      expect.stringContaining('Poll schedule'),
      expect.stringContaining('Channel deadline'),
    ]);
    expect(await page.getByText('one network attempt').count(), 'the provider timeout is explained in one place').toBe(1);
    const decided = page.locator('ol.log > li', { has: page.locator('.type', { hasText: 'fallback.decided' }) });
    expect(await decided.locator('dt', { hasText: /^reason$/ }).count()).toBe(1);
    expect(await decided.locator('dd[data-field=reason]').textContent()).toBe('email_deadline_elapsed');
    expect(await page.locator('ol.log').textContent(), 'no raw JSON objects in the log').not.toMatch(/[{]"/);

    // By keyboard: Tab reaches the chart's event markers, and Enter opens the entry a marker stands for.
    let focused = '';
    for (let i = 0; i < 40 && !focused.startsWith('#entry-'); i += 1) {
      await page.keyboard.press('Tab');
      focused = await page.evaluate(() =>
        document.activeElement?.closest('svg a') ? (document.activeElement.getAttribute('href') ?? '') : '',
      );
    }
    expect(focused, 'a chart marker takes the keyboard focus').toMatch(/^#entry-\d+$/);
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`${focused}$`));
    expect(await page.locator(`li${focused}`).evaluate((li) => li.matches(':target'))).toBe(true);
    expect(violations).toEqual([]);

    // The overview: six charts, each beside its numbers, under the page's own CSP.
    await page.goto(`${base}/admin`);
    expect(await page.locator('main svg.chart').count()).toBe(7);
    expect(await page.locator('#fallback td[data-metric=herald_notices_accepted_total]').textContent()).toBe('2');
    expect(await page.locator('nav a[aria-current=page]').textContent()).toBe('Overview');
    await page.screenshot({ path: `${DOCS}overview.png`, fullPage: true });
    expect(violations, 'the overview keeps to its own CSP').toEqual([]);

    await Promise.all([page.waitForURL(/\/admin\/login/), page.click('button:text("Log out")')]);
    await page.goto(`${base}/admin/notices/${noticeId}`);
    expect(page.url(), 'logged out: the timeline sends the browser to the login form again').toContain('/admin/login');
  });
  it('fits the overview and the timeline on a narrow screen, entry types whole', async () => {
    const page = await browser.newPage({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    await page.setExtraHTTPHeaders({ authorization: `Bearer ${ADMIN}` });
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

    await page.goto(`${base}/admin`);
    expect(await page.locator('main svg.chart').count()).toBe(7);
    expect(await overflow(), 'the overview does not scroll sideways').toBeLessThanOrEqual(0);
    await page.screenshot({ path: `${DOCS}overview-narrow.png` });

    await page.goto(`${base}/admin/notices/${noticeId}`);
    expect(await overflow(), 'the timeline does not scroll sideways (its chart scrolls in its own box)').toBeLessThanOrEqual(0);
    const types = page.locator('ol.log .type');
    expect(await types.count()).toBeGreaterThan(5);
    const broken = await types.evaluateAll((elements) =>
      elements.filter((el) => el.getClientRects().length !== 1 || el.scrollWidth > el.clientWidth + 1).map((el) => el.textContent),
    );
    expect(broken, 'entry types are never broken mid-word').toEqual([]);
    await page.screenshot({ path: `${DOCS}timeline-narrow.png` });

    // A blocked notice's reason, whole, in the header on the narrow screen too.
    await page.goto(`${base}/admin/notices/${blockedId}`);
    expect(await overflow()).toBeLessThanOrEqual(0);
    expect(await fullyVisible(page.locator('#blocked-reason'), 375)).toEqual({ clipped: false, inViewport: true });
    expect(await page.locator('#blocked-reason').textContent()).toContain('sms_consent_missing');
    await page.close();
  });

  it('lands on the overview after logging in at /admin, reads its outcomes, and Bull Board links back to it', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const violations = cspViolations(page);
    await page.goto(`${base}/admin`);
    expect(page.url()).toBe(`${base}/admin/login?next=%2Fadmin`);
    await page.fill('input[name=token]', ADMIN);
    await Promise.all([page.waitForURL(`${base}/admin`), page.click('button[type=submit]')]);
    expect(await page.title()).toBe('Herald — overview');
    expect(await page.locator('nav a[aria-current=page]').textContent()).toBe('Overview');

    // The outcome panel: one notice fell back to SMS and was delivered, one was blocked.
    const outcomes = page.locator('#outcomes');
    const row = (state: string) => outcomes.locator(`tr[data-outcome=${state}]`);
    const numbers = async (state: string) => (await row(state).locator('td').allTextContents()).map(Number);
    expect(await row('sms_delivered').locator('th').textContent()).toContain('fallen back');
    expect(await numbers('sms_delivered')).toEqual([1, 1]);
    expect(await numbers('blocked')).toEqual([1, 1]);
    for (const state of ['email_delivered', 'sms_failed', 'failed', 'canceled']) expect(await numbers(state), state).toEqual([0, 0]);
    expect(await outcomes.locator('svg.chart').count()).toBe(1);
    expect(await fullyVisible(outcomes, 1280)).toEqual({ clipped: false, inViewport: true });
    expect(violations, 'the overview keeps to its own CSP').toEqual([]);

    // Bull Board's menu leads back to the overview.
    await page.goto(`${base}/admin/queues`);
    await page.getByText('email-send').first().waitFor({ timeout: 15_000 });
    await page.locator('header ul li').last().locator('button').click();
    const back = page.getByRole('menuitem', { name: 'Herald overview' });
    expect(await back.getAttribute('href')).toBe('/admin');
    await Promise.all([page.waitForURL(`${base}/admin`), back.click()]);
    expect(await page.title()).toBe('Herald — overview');
    // Bull Board's page refuses only its outside fonts.
    expect(violations.filter((v) => !v.includes('fonts.googleapis.com'))).toEqual([]);
    violations.length = 0;

    // The blocked notice's timeline: its reason in the header, not cut off.
    await page.goto(`${base}/admin/notices/${blockedId}`);
    const reason = page.locator('header #blocked-reason');
    expect(await reason.getAttribute('data-reason')).toBe('sms_consent_missing');
    expect(await reason.textContent()).toMatch(/^Blocked: sms_consent_missing\. The fallback to SMS \(email_deadline_elapsed\)/);
    expect(await fullyVisible(reason, 1280)).toEqual({ clipped: false, inViewport: true });
    const label = page.locator('#fallback-marker text.reason');
    expect(await label.textContent()).toBe('blocked: sms_consent_missing');
    const [labelBox, chartBox] = await Promise.all([label.boundingBox(), page.locator('.chart svg').boundingBox()]);
    expect(labelBox!.x, 'the chart label starts inside the chart').toBeGreaterThanOrEqual(chartBox!.x);
    expect(labelBox!.x + labelBox!.width, 'the chart label ends inside the chart').toBeLessThanOrEqual(chartBox!.x + chartBox!.width);
    expect(violations, 'the timeline keeps to its own CSP').toEqual([]);
    await context.close();
  });
});
