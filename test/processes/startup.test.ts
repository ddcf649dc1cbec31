import { createServer, type Server } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { deleteKeys, plainRedis, REDIS_URL, testArchiveUrl, testPrefix } from '../helpers/env.js';
import { freePort } from '../helpers/redis-server.js';
import { runEntryPoint } from '../helpers/web-process.js';

/** `npm start`'s entry point with only the given environment, until it exits (or 30 s). */
const runToExit = (env: Record<string, string>) => runEntryPoint('dist/src/dev.js', env, 30_000);

// The port tests reach Redis (the worker starts before the web listens): their keys go after.
const PREFIX = testPrefix('port-in-use');
afterAll(async () => {
  const redis = plainRedis();
  await deleteKeys(redis, PREFIX);
  await redis.quit();
});

const held: Server[] = [];
afterEach(async () => {
  await Promise.all(held.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Holds a port on 127.0.0.1, as another program would. */
async function holdPort(): Promise<number> {
  const port = await freePort();
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
  held.push(server);
  return port;
}

describe('npm start, when it cannot start', { timeout: 60_000 }, () => {
  it('without Redis: exits non-zero with one line that says how to start one, instead of retrying for ever', async () => {
    const started = Date.now();
    const { code, output } = await runToExit({
      REDIS_URL: 'redis://127.0.0.1:1',
      PORT: '0',
      HERALD_SANDBOX_PORT: String(await freePort()),
    });
    expect(code).toBe(1);
    // The bound is the ("within 10 s"), a hang detector rather than a speed figure.
    expect(Date.now() - started).toBeLessThan(10_000);
    const lines = output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('Redis does not answer at redis://127.0.0.1:1');
    expect(lines[0]).toContain('redis-server');
    expect(lines[0]).toContain('REDIS_URL');
  });

  it("with the API's port in use: names PORT", async () => {
    const port = await holdPort();
    const { code, output } = await runToExit({
      REDIS_URL,
      HERALD_PREFIX: PREFIX,
      HERALD_ARCHIVE_URL: testArchiveUrl(),
      PORT: String(port),
      HERALD_SANDBOX_PORT: String(await freePort()),
    });
    expect(code).toBe(1);
    expect(output).toContain(`herald: port ${port} on 127.0.0.1 is in use; set PORT to a free port.`);
  });

  it("with the emulators' port in use: names HERALD_SANDBOX_PORT", async () => {
    const port = await holdPort();
    const { code, output } = await runToExit({
      REDIS_URL,
      HERALD_PREFIX: PREFIX,
      HERALD_ARCHIVE_URL: testArchiveUrl(),
      PORT: '0',
      HERALD_SANDBOX_PORT: String(port),
    });
    expect(code).toBe(1);
    expect(output).toContain(`herald: port ${port} on 127.0.0.1 is in use; set HERALD_SANDBOX_PORT to a free port.`);
  });
});
