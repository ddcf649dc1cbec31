import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { plainRedis, testConfig, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { cleanUp, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';

/** Herald's error answer, as far as these tests read it. */
type ErrorAnswer = { error: { code: string } };

/** The value of an unlabelled sample in a Prometheus text exposition. */
const sample = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);

describe('/metrics behind HERALD_METRICS_TOKEN', () => {
  let web: WebUnderTest;
  const prefix = testPrefix('mtoken');
  beforeAll(async () => {
    web = await startWebUnderTest(testConfig(prefix, { HERALD_METRICS_TOKEN: METRICS_TOKEN, HERALD_AUTH_FAILURES_PER_MINUTE: '2' }));
  });
  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });
  const scrape = (authorization?: string, remoteAddress = '127.0.0.1') =>
    web.app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {}, remoteAddress });

  it('answers 401 unauthorized without the token or with another one (an API key included), 200 with it', async () => {
    for (const authorization of [
      undefined,
      'Bearer not-the-metrics-token',
      `Basic ${Buffer.from(`x:${METRICS_TOKEN}`).toString('base64')}`,
    ]) {
      const res = await scrape(authorization, '203.0.113.1');
      expect(res.statusCode, authorization).toBe(401);
      expect(res.json().error.code).toBe('unauthorized');
    }
    const ok = await scrape(`Bearer ${METRICS_TOKEN}`);
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toMatch(/^herald_notices_accepted_total /m);
  });
  it('counts wrong tokens as failed authentications of the address, and never refuses the right one', async () => {
    for (let i = 0; i < 2; i += 1) expect((await scrape('Bearer wrong-metrics-token-1', '203.0.113.2')).statusCode).toBe(401);
    expect((await scrape('Bearer wrong-metrics-token-1', '203.0.113.2')).statusCode).toBe(429);
    expect((await scrape(`Bearer ${METRICS_TOKEN}`, '203.0.113.2')).statusCode).toBe(200);
    expect((await scrape('Bearer wrong-metrics-token-1', '203.0.113.3')).statusCode).toBe(401);
  });
});

describe('the metrics cache', () => {
  describe('within HERALD_METRICS_CACHE_MS of a reading (by the injected clock)', () => {
    let web: WebUnderTest;
    const clock = new ManualClock();
    const prefix = testPrefix('mcache');
    beforeAll(async () => {
      web = await startWebUnderTest(testConfig(prefix, { HERALD_METRICS_CACHE_MS: '3000' }), clock);
    });
    afterAll(async () => {
      await web.close();
      await cleanUp(prefix);
    });

    it('serves the same reading of Redis, and reads again once the window has passed', async () => {
      const read = async () => sample((await web.app.inject({ method: 'GET', url: '/metrics' })).body, 'herald_notices_retired_total');
      expect(await read()).toBe(0);
      const redis = plainRedis();
      try {
        await redis.hincrby(web.store.keys.metrics(3), 'retired', 5);
      } finally {
        await redis.quit();
      }
      expect(await read()).toBe(0);
      clock.advance(2999);
      expect(await read()).toBe(0);
      clock.advance(1);
      expect(await read()).toBe(5);
    });
  });

  describe('under a storm of scrapes', () => {
    let server: RedisServer;
    let web: WebUnderTest;
    let probe: Redis;
    const clock = new ManualClock();
    const prefix = testPrefix('mstorm');
    beforeAll(async () => {
      server = await RedisServer.start({ appendfsync: 'everysec' });
      web = await startWebUnderTest(testConfig(prefix, { REDIS_URL: server.url, HERALD_METRICS_CACHE_MS: '5000' }), clock);
      probe = new Redis(server.url);
    });
    afterAll(async () => {
      probe?.disconnect();
      await web?.close();
      await server?.stop();
    });

    /** Commands the private Redis has run, INFO (this probe's own) left out. */
    const commands = async () => {
      const stats = await probe.info('commandstats');
      let calls = 0;
      for (const match of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (match[1] !== 'info') calls += Number(match[2]);
      return calls;
    };

    it('costs Redis one reading per window, however many scrapes arrive at once', async () => {
      const scrape = () => web.app.inject({ method: 'GET', url: '/metrics' });
      const start = await commands();
      expect((await scrape()).statusCode).toBe(200);
      const oneReading = (await commands()) - start;
      expect(oneReading).toBeGreaterThan(16);

      const before = await commands();
      const storm = await Promise.all(Array.from({ length: 20 }, scrape));
      expect(storm.every((r) => r.statusCode === 200)).toBe(true);
      expect((await commands()) - before).toBe(0);

      clock.advance(5000);
      const again = await commands();
      await Promise.all(Array.from({ length: 20 }, scrape));
      // One reading again for all 20 (the first may have loaded scripts the second finds loaded).
      const after = (await commands()) - again;
      expect(after).toBeGreaterThan(16);
      expect(after).toBeLessThanOrEqual(oneReading);
    });
  });
});

describe('HERALD_METRICS_PORT: /metrics on a listener of its own, in the web process', () => {
  let child: ChildProcess | undefined;
  let output = '';
  let apiUrl: string;
  let metricsUrl: string;
  const prefix = testPrefix('mport');
  beforeAll(async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    apiUrl = `http://127.0.0.1:${port}`;
    metricsUrl = `http://127.0.0.1:${metricsPort}`;
    child = spawn(process.execPath, ['dist/src/server.js'], {
      cwd: ROOT,
      env: { ...process.env, ...testEnv(prefix, { PORT: String(port), HERALD_METRICS_PORT: String(metricsPort), LOG_LEVEL: 'info' }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await waitFor(async () => output.includes('herald web listening') || child!.exitCode !== null, 20_000, 'the web process to listen');
    expect(child.exitCode, output).toBeNull();
  });
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
    await cleanUp(prefix);
  });

  it('serves /metrics there and nothing else, and no longer on the API listener', async () => {
    const metrics = await fetch(`${metricsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^herald_notices_accepted_total /m);
    const elsewhere = await fetch(`${metricsUrl}/healthz`);
    expect(elsewhere.status).toBe(404);
    expect(((await elsewhere.json()) as ErrorAnswer).error.code).toBe('not_found');

    const onApi = await fetch(`${apiUrl}/metrics`);
    expect(onApi.status).toBe(404);
    expect(((await onApi.json()) as ErrorAnswer).error.code).toBe('not_found');
    expect((await fetch(`${apiUrl}/healthz`)).status).toBe(200);
    expect(output).toContain(`"metricsUrl":"${metricsUrl}"`);
  });

  it('closes both listeners on SIGTERM and exits 0', async () => {
    const exited = new Promise<number | null>((resolve) => child!.once('exit', (code) => resolve(code)));
    child!.kill('SIGTERM');
    expect(await exited).toBe(0);
    await expect(fetch(`${metricsUrl}/metrics`)).rejects.toThrow();
  });
});
