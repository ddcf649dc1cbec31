import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig, testPrefix } from '../helpers/env.js';
import { freePort } from '../helpers/redis-server.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { buildApp } from '../../src/app.js';
import { systemClock } from '../../src/clock.js';
import { composeWeb } from '../../src/compose.js';
import { createLogger } from '../../src/logger.js';

describe('the web side when Redis is unreachable', () => {
  let app: Awaited<ReturnType<typeof buildApp>>;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const config = testConfig(testPrefix('down'), { REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    const parts = composeWeb(config, { clock: systemClock, logger: createLogger('test', 'silent'), connectionName: 'test' });
    for (const q of Object.values(parts.deps.queues)) q.on('error', () => undefined);
    app = await buildApp(parts.deps);
    close = async () => {
      await app.close();
      await parts.close();
    };
  });
  afterAll(async () => close());

  it('answers POST /v1/notices with 503 unavailable, not a hang', async () => {
    // A hang is an answer that never comes; the bound is far above any command timeout, so that
    // a loaded machine's slowness is not taken for one (speed is the benchmarks' to measure).
    const hang = new Promise<'hang'>((resolve) => setTimeout(() => resolve('hang'), 15_000).unref());
    const res = await Promise.race([
      app.inject({
        method: 'POST',
        url: '/v1/notices',
        payload: noticeBody(),
        headers: { authorization: 'Bearer test-api-key-0123456789' },
      }),
      hang,
    ]);
    expect(res).not.toBe('hang');
    if (res === 'hang') return;
    expect(res.statusCode).toBe(503);
    expect(res.json().error.code).toBe('unavailable');
  }, 20_000);

  it('is alive but not ready', async () => {
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json().error.code).toBe('unavailable');
  });
});

describe('the web side when Redis is reachable', () => {
  let web: WebUnderTest;
  const prefix = testPrefix('up');
  beforeAll(async () => {
    web = await startWebUnderTest(testConfig(prefix));
  });
  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });
  it('is ready', async () => {
    expect((await web.call('GET', '/readyz')).json()).toEqual({ status: 'ready' });
  });

  it("keeps BullMQ's scripts off the connection that pipelines automatically", async () => {
    // Accepting a notice runs Herald's scripts and BullMQ's; each kind stays on its own connection.
    expect((await web.call('POST', '/v1/notices', noticeBody())).statusCode).toBe(202);
    const scripts = (redis: unknown) => Object.keys((redis as { scriptsSet: Record<string, unknown> }).scriptsSet);
    expect(web.deps.redis.options.enableAutoPipelining).toBe(true);
    expect(scripts(web.deps.redis)).toContain('createNotice');
    expect(scripts(web.deps.redis).filter((name) => name.startsWith('addStandardJob'))).toEqual([]);
    expect(web.deps.queueRedis.options.enableAutoPipelining).toBe(false);
    expect(scripts(web.deps.queueRedis).some((name) => name.startsWith('addStandardJob'))).toBe(true);
  });

  it("is not ready while only its queues' connection is down", async () => {
    const other = await startWebUnderTest(testConfig(prefix));
    try {
      other.deps.queueRedis.disconnect();
      const ready = await other.call('GET', '/readyz');
      expect(ready.statusCode).toBe(503);
      expect(ready.json().error.code).toBe('unavailable');
    } finally {
      await other.close();
    }
  });
});
