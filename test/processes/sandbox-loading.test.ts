/**
 * A worker process loads the sandbox package only to run the emulators itself: every module it
 * resolves is recorded by a resolve hook (test/fixtures/record-imports.mjs).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { deleteKeys, plainRedis, TEST_ARCHIVE_KEY, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { WorkerProcess } from '../helpers/stack.js';

/** Live providers at an address where nothing listens: a worker that starts calls none of them. */
const LIVE = {
  HERALD_PROVIDERS: 'live',
  HERALD_ARCHIVE_KEY: TEST_ARCHIVE_KEY,
  POSTMARK_SERVER_TOKEN: 'live-looking-token',
  POSTMARK_FROM: 'notices@example.com',
  POSTMARK_API_URL: 'http://127.0.0.1:9',
  TWILIO_ACCOUNT_SID: 'AC00000000000000000000000000000001',
  TWILIO_AUTH_TOKEN: 'live-looking-auth',
  TWILIO_FROM: '+15005550006',
  TWILIO_API_URL: 'http://127.0.0.1:9',
};

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** Starts a worker process with `env` until it runs, stops it, and returns the URLs it resolved. */
async function resolvedBy(env: Record<string, string>): Promise<string[]> {
  const prefix = testPrefix('load');
  const dir = mkdtempSync(join(tmpdir(), 'herald-imports-'));
  const record = join(dir, 'resolved.txt');
  const worker = new WorkerProcess({ ...testEnv(prefix, env), LOG_LEVEL: 'info', RECORD_IMPORTS_TO: record }, [
    '--import',
    './test/fixtures/record-imports.mjs',
  ]);
  cleanups.push(async () => {
    await worker.stop('SIGKILL');
    const redis = plainRedis();
    await deleteKeys(redis, prefix);
    await redis.quit();
    rmSync(dir, { recursive: true, force: true });
  });
  worker.start();
  await waitFor(async () => worker.ready || worker.exitCode !== null, 30_000, 'the worker to run');
  expect(worker.exitCode, worker.output).toBeNull();
  expect(await worker.stop('SIGTERM'), worker.output).toBe(0);
  return readFileSync(record, 'utf8').split('\n').filter(Boolean);
}

const ofSandbox = (urls: string[]) => urls.filter((url) => url.includes('/packages/sandbox/') || url.includes('/@herald/sandbox'));

describe('a worker process', () => {
  describe('with live providers', () => {
    it('loads no module of the sandbox package', async () => {
      const urls = await resolvedBy(LIVE);
      expect(urls.some((url) => url.endsWith('/dist/src/worker.js'))).toBe(true);
      expect(urls.some((url) => url.includes('/node_modules/twilio/'))).toBe(true);
      expect(ofSandbox(urls)).toEqual([]);
    });
  });

  describe('in sandbox mode with no provider URL', () => {
    it('loads the sandbox package to run the emulators itself', async () => {
      const urls = await resolvedBy({});
      expect(ofSandbox(urls)).toContainEqual(expect.stringMatching(/\/packages\/sandbox\/dist\/index\.js$/));
    });
  });
});
