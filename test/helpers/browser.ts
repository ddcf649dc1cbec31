import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium, which playwright-core drives (it downloads no browser of its own). */
export const CHROMIUM = '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);
// CI requires the tools its tests need (HERALD_TEST_REQUIRE_TOOLS=1): a missing browser fails, it is not skipped.
if (!hasChromium && process.env.HERALD_TEST_REQUIRE_TOOLS === '1')
  throw new Error(`no Chromium at ${CHROMIUM}: the browser tests cannot run (apt-get install -y chromium)`);
if (!hasChromium) console.warn(`browser test skipped: no Chromium at ${CHROMIUM} (.ci/run installs it with apt-get install -y chromium)`);

/** Where screenshots for the README go. */
export const DOCS = fileURLToPath(new URL('../../docs/', import.meta.url));

/** Headless Chromium, quiet on the network. Whoever launches it closes it. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
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
}

/** Collects the page's Content-Security-Policy violations, as the browser reports them on its console. */
export function cspViolations(page: Page): string[] {
  const violations: string[] = [];
  page.on('console', (message) => {
    if (message.text().includes('Content Security Policy')) violations.push(`${page.url()}: ${message.text()}`);
  });
  return violations;
}
