/**
 * One delivery attempt of an event, on real Redis, against an endpoint on a local HTTP server,
 * the clock set by the test: retries back off and stop `retryForMs` after the event, disabling an
 * endpoint still failing; a deleted endpoint drops what was queued for it; a delivery never
 * connects to a private address unless allowed, whatever the name resolves to then.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { deliverEvent, MAX_RETRY_DELAY_MS, retryDelayMs } from '../../src/events/deliver.js';
import { isPrivateAddress } from '../../src/events/endpoint-url.js';
import { EventEndpointStore, type EventEndpoint } from '../../src/store/event-endpoints.js';
import { Keys } from '../../src/store/keys.js';
import { deleteKeys, plainRedis, testPrefix } from '../helpers/env.js';

const prefix = testPrefix('evdeliver');
const redis = plainRedis();
const endpoints = new EventEndpointStore(redis, new Keys(prefix));
let server: Server;
let url = '';
let status = 500;
let posts = 0;
const silent = { warn: () => undefined, info: () => undefined };

beforeAll(async () => {
  server = createServer((req, res) => {
    posts += 1;
    req.resume();
    req.on('end', () => res.writeHead(status).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

let n = 0;
async function endpointAt(target: string, now: number): Promise<EventEndpoint> {
  const endpoint: EventEndpoint = {
    id: `ep_test${++n}`,
    tenant: 'default',
    url: target,
    events: ['notice.completed'],
    secret: `whsec_${Buffer.alloc(24, n).toString('base64')}`,
    createdAt: now,
    disabledAt: undefined,
    disabledReason: undefined,
    lastDeliveredAt: undefined,
    failingSince: undefined,
  };
  expect(await endpoints.create(endpoint, 100)).toBe(true);
  return endpoint;
}
const job = (endpointId: string, at: number, attempts = 0) => ({
  endpointId,
  eventId: `evt_ntc_test_${n}`,
  type: 'notice.completed',
  noticeId: 'ntc_test',
  at,
  body: '{"type":"notice.completed"}',
  attempts,
});

describe('a delivery attempt', () => {
  it('retries with growing delays while the event is younger than retryForMs, then gives up and disables the endpoint', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const endpoint = await endpointAt(url, clock.now());
    const settings = { retryForMs: 60_000, retryBaseMs: 5_000, allowPrivateUrls: true };
    const deps = { endpoints, clock, logger: silent, settings, random: () => 0.5 };
    status = 500;
    const eventAt = clock.now();
    const first = await deliverEvent(deps, job(endpoint.id, eventAt));
    expect(first).toEqual({ kind: 'retry', at: clock.now() + retryDelayMs(5_000, 1, () => 0.5), attempts: 1 });
    clock.advance(50_000);
    const late = await deliverEvent(deps, job(endpoint.id, eventAt, 4));
    // The fifth retry would come after the minute the event may be retried for.
    expect(late).toEqual({ kind: 'done', outcome: 'given_up' });
    const stored = await endpoints.get(endpoint.id);
    expect(stored).toMatchObject({ disabledReason: 'failing' });
    expect((await endpoints.deliveries(endpoint.id)).map((d) => d.outcome)).toEqual(['given_up', 'failed']);
    expect((await endpoints.outcomes()).given_up).toBeGreaterThan(0);
  });

  it('drops an event queued for an endpoint deleted since, without posting', async () => {
    const clock = new ManualClock();
    const endpoint = await endpointAt(url, clock.now());
    await endpoints.markUndelivered([{ endpointId: endpoint.id, eventId: job(endpoint.id, 0).eventId, at: clock.now() }]);
    expect((await endpoints.undelivered()).count).toBeGreaterThan(0);
    const before = (await endpoints.undelivered()).count;
    await endpoints.delete(endpoint.id);
    const postsBefore = posts;
    const step = await deliverEvent(
      { endpoints, clock, logger: silent, settings: { retryForMs: 60_000, retryBaseMs: 10, allowPrivateUrls: true } },
      job(endpoint.id, clock.now()),
    );
    expect(step).toEqual({ kind: 'done', outcome: 'dropped' });
    expect(posts).toBe(postsBefore);
    expect((await endpoints.undelivered()).count).toBe(before - 1);
  });

  it('never connects to a private address unless allowed: an address literal, or a name that resolves to one', async () => {
    const clock = new ManualClock();
    const port = (server.address() as AddressInfo).port;
    for (const target of [url, `http://localhost:${port}/hook`]) {
      const endpoint = await endpointAt(target, clock.now());
      const postsBefore = posts;
      const step = await deliverEvent(
        { endpoints, clock, logger: silent, settings: { retryForMs: 60_000, retryBaseMs: 10, allowPrivateUrls: false } },
        job(endpoint.id, clock.now()),
      );
      expect(step.kind, target).toBe('retry');
      expect(posts, target).toBe(postsBefore);
      const [record] = await endpoints.deliveries(endpoint.id);
      expect(record!.error).toMatch(/private/);
    }
  });
});

describe('the backoff and the address check', () => {
  it('waits about base × 2^(n−1) for the n-th retry, jittered in its upper half, at most an hour', () => {
    expect(retryDelayMs(5_000, 1, () => 0)).toBe(2_500);
    expect(retryDelayMs(5_000, 1, () => 0.999)).toBeLessThanOrEqual(5_000);
    expect(retryDelayMs(5_000, 3, () => 0)).toBe(10_000);
    expect(retryDelayMs(5_000, 40, () => 0.999)).toBeLessThanOrEqual(MAX_RETRY_DELAY_MS);
  });

  it('takes loopback, link-local, private and mapped addresses for private, public ones not', () => {
    for (const address of [
      '127.0.0.1',
      '10.0.0.8',
      '172.20.1.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      'not-an-ip',
    ]) {
      expect(isPrivateAddress(address), address).toBe(true);
    }
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8'])
      expect(isPrivateAddress(address), address).toBe(false);
  });
});
