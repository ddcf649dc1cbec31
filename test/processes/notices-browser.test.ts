import type { Browser } from 'playwright-core';
import { cspViolations, DOCS, hasChromium, launchBrowser } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { sleep, testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

const ADMIN = 'admin-token-notices-browser-0123';

// The page's globals, as far as the functions this file runs in the page read them. Declared here,
// not through the DOM library: a lib reference would load the DOM's globals for every file checked
// with this one (src included), where Node's are meant.
declare const document: { documentElement: { scrollWidth: number } };
declare function getComputedStyle(element: unknown, pseudoElement: string): { content: string };

describe.skipIf(!hasChromium)('the notices list in a real browser', () => {
  let stack: Stack;
  let browser: Browser;
  let base: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('notices-browser'), env: { HERALD_ADMIN_TOKEN: ADMIN } });
    base = await stack.web.app.listen({ port: 0, host: '127.0.0.1' });
    const policy = { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 60 };
    const make = async (name: string, recipient: Record<string, unknown>, category: string) => {
      await sleep(5);
      ids[name] = await stack.createNotice(noticeBody({ recipient, category, policy }));
    };
    await make('welcome', { id: 'player-7', email: 'delivered+0ms@example.com' }, 'welcome');
    await make('bounced', { id: 'player-42', email: 'bounce+0ms@example.com', phone: '+12025550100' }, 'terms_change');
    await make('blocked', { id: 'player-43', email: 'bounce+0ms+2@example.com' }, 'terms_change');
    await make('waiting', { id: 'player-44', email: 'never@example.com' }, 'event_reminder');
    await stack.waitForState(ids.welcome!, ['email_delivered']);
    await stack.waitForState(ids.bounced!, ['sms_delivered']);
    await stack.waitForState(ids.blocked!, ['blocked']);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  it('filters the list with the form, by keyboard, and opens a notice from it', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
    const violations = cspViolations(page);
    await page.goto(`${base}/admin/notices`);
    await page.fill('input[name=token]', ADMIN);
    await Promise.all([page.waitForURL(/\/admin\/notices$/), page.click('button[type=submit]')]);
    const rows = page.locator('#results tbody tr');
    expect(await rows.count()).toBe(4);
    expect(await rows.first().locator('td').first().textContent()).toContain(ids.waiting);
    await page.screenshot({ path: `${DOCS}notices-list.png`, fullPage: true });

    // Filter: the fallback reason from the select, submitted with Enter from a text field.
    await page.selectOption('select[name=reason]', 'email_bounced');
    await page.focus('input[name=category]');
    await page.keyboard.type('terms_change');
    await Promise.all([page.waitForURL(/reason=email_bounced/), page.keyboard.press('Enter')]);
    expect(await rows.count()).toBe(2);
    expect(await page.locator('#summary').textContent()).toBe('2 notices, newest first.');
    expect(await page.locator('select[name=reason]').inputValue()).toBe('email_bounced');
    await page.selectOption('select[name=state]', 'blocked');
    await Promise.all([page.waitForURL(/state=blocked/), page.click('button:text("Filter")')]);
    expect(await rows.count()).toBe(1);
    await page.screenshot({ path: `${DOCS}notices-list-filtered.png`, fullPage: true });

    // Open the notice from its row by keyboard: Tab reaches the row's link, Enter follows it.
    await page.locator(`#results a[href="/admin/notices/${ids.blocked}"]`).focus();
    await Promise.all([page.waitForURL(new RegExp(`/admin/notices/${ids.blocked}$`)), page.keyboard.press('Enter')]);
    expect(await page.locator('#state').textContent()).toBe('blocked');
    expect(await page.locator('#fallback-reason').textContent()).toContain('email_bounced');
    expect(violations, 'the list and the timeline keep to their own CSP').toEqual([]);
  });

  it('reads on a narrow screen: each row a card of labelled values, no sideways scrolling', async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await page.setExtraHTTPHeaders({ authorization: `Bearer ${ADMIN}` });
    await page.goto(`${base}/admin/notices?category=terms_change`);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(width).toBeLessThanOrEqual(390);
    const label = await page
      .locator('#results tbody tr td[data-label="State"]')
      .first()
      .evaluate((td) => getComputedStyle(td, '::before').content);
    expect(label).toBe('"State"');
    await page.screenshot({ path: `${DOCS}notices-list-narrow.png`, fullPage: true });
  });
});
