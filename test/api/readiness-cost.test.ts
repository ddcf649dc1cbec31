/**
 * `/readyz` needs no credentials, so what it costs Redis is bounded: a flood of readiness checks
 * shares one reading of the archive backlog, and its PINGs are reused briefly. Counted on a
 * `redis-server` of the test's own (INFO commandstats), with the web app on real Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { testConfig, testPrefix } from '../helpers/env.js';
import { RedisServer } from '../helpers/redis-server.js';
import { startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

let server: RedisServer;
let web: WebUnderTest;
let probe: Redis;

beforeAll(async () => {
  server = await RedisServer.start();
  web = await startWebUnderTest(testConfig(testPrefix('readyz'), { REDIS_URL: server.url }));
  probe = new Redis(server.url);
});
afterAll(async () => {
  probe?.disconnect();
  await web?.close();
  await server?.stop();
});

/** Commands the server has run, by name, per INFO commandstats. */
async function commandCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const line of (await probe.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match) counts[match[1]!] = Number(match[2]);
  }
  return counts;
}
const total = (counts: Record<string, number>) =>
  Object.entries(counts)
    .filter(([name]) => name !== 'info')
    .reduce((sum, [, n]) => sum + n, 0);

describe('GET /readyz', () => {
  it('answers 200 ready, and 100 concurrent checks cost Redis no more than one reading', async () => {
    expect((await web.app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });
    const before = await commandCounts();
    const answers = await Promise.all(Array.from({ length: 100 }, () => web.app.inject({ method: 'GET', url: '/readyz' })));
    expect(answers.every((a) => a.statusCode === 200)).toBe(true);
    const after = await commandCounts();
    // The first answer above read the backlog; within its window the hundred share it, and their PINGs.
    expect(total(after) - total(before)).toBeLessThanOrEqual(4);
  });
});
