import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

const CHROMIUM = '/usr/bin/chromium';
const ADMIN = 'admin-token-browser-0123456789';
const DOCS = fileURLToPath(new URL('../../docs/', import.meta.url));
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`browser test skipped: no Chromium at ${CHROMIUM} (.ci/run installs it with apt-get install -y chromium)`);

describe.skipIf(!hasChromium)('the admin pages in a real browser', () => {
  let stack: Stack;
  let browser: Browser;
  let base: string;
  let noticeId: string;

  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('browser'), env: { HERALD_ADMIN_TOKEN: ADMIN } });
    base = await stack.web.app.listen({ port: 0, host: '127.0.0.1' });
    noticeId = await stack.createNotice(
      noticeBody({
        recipient: { id: 'player-42', email: 'opened+300ms@example.com', phone: '+12025550100' },
        deadlineInSeconds: 3,
        policy: undefined,
      }),
    );
    await stack.waitForState(noticeId, ['sms_delivered']);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-quic',
        '--no-first-run',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  it('logs in through the form, opens Bull Board and the timeline of a notice that fell back to SMS', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const violations: string[] = [];
    page.on('console', (message) => {
      if (message.text().includes('Content Security Policy')) violations.push(`${page.url()}: ${message.text()}`);
    });
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
    await page.screenshot({ path: `${DOCS}timeline.png`, fullPage: true });
    expect(violations, 'the timeline keeps to its own CSP').toEqual([]);

    await Promise.all([page.waitForURL(/\/admin\/login/), page.click('button:text("Log out")')]);
    await page.goto(`${base}/admin/notices/${noticeId}`);
    expect(page.url(), 'logged out: the timeline sends the browser to the login form again').toContain('/admin/login');
  });
});
