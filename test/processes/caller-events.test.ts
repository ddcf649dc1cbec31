/**
 * Events to callers end to end: the web and a worker in processes of their own, the emulators,
 * real Redis, and an endpoint on a local HTTP server. Each delivery is verified with the
 * `standardwebhooks` package's own verifier, as a caller would verify it.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { WorkerProcess } from '../helpers/stack.js';
import { startWebhookStack, type WebhookStack } from '../helpers/webhook-stack.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A caller's listener: records every POST; `answer` decides the status (or holds the request open). */
class Listener {
  readonly received: Received[] = [];
  answer: (request: Received, nth: number) => number | 'hang' = () => 200;
  private server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const request = { path: req.url ?? '', headers: req.headers, body };
        this.received.push(request);
        const status = this.answer(request, this.received.filter((r) => r.path === request.path).length);
        if (status === 'hang') return;
        res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  close(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

const ADMIN_TOKEN = 'admin-token-of-the-events-test';
let stack: WebhookStack;
let listener: Listener;
let n = 0;
const label = () => `ev${process.pid}x${++n}`;

beforeAll(async () => {
  listener = await new Listener().start();
  stack = await startWebhookStack({
    prefix: testPrefix('events'),
    env: {
      HERALD_ALLOW_PRIVATE_EVENT_URLS: '1',
      HERALD_EVENT_RETRY_BASE_MS: '300',
      HERALD_MIRROR_RECLAIM_MS: '2000',
      HERALD_ADMIN_TOKEN: ADMIN_TOKEN,
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await listener?.close();
});

/** Subscribes an endpoint at `path` of the listener; returns its ID and secret. */
async function subscribe(path: string, events = ['notice.completed', 'fallback.decided', 'notice.failed']) {
  const created = await stack.web.call('POST', '/v1/event-endpoints', { url: `${listener.url}${path}`, events });
  expect(created.status, created.text).toBe(201);
  expect(created.json.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  return created.json as { id: string; secret: string };
}

/** The events `path` received for `noticeId`, each verified with the endpoint's secret. */
function verified(path: string, secret: string, noticeId: string) {
  const webhook = new Webhook(secret);
  return listener
    .at(path)
    .map((r) => ({
      ...r,
      event: webhook.verify(r.body, r.headers as Record<string, string>) as { type: string; data: Record<string, unknown> },
    }))
    .filter((r) => r.event.data.noticeId === noticeId);
}

const notice = (email: string, phone = '+12025550100', deadlineInSeconds = 4) =>
  noticeBody({ recipient: { id: `player-${label()}`, email, phone }, deadlineInSeconds, metadata: { campaign: 'winter-cup' } });

describe('events to callers', () => {
  it('posts one verified notice.completed for a delivered notice, with no content and no address', async () => {
    const path = `/delivered-${label()}`;
    const { secret } = await subscribe(path);
    const email = `delivered+1s+${label()}@example.com`;
    const id = await stack.createNotice(notice(email));
    await stack.waitForState(id, ['email_delivered']);
    await waitFor(async () => verified(path, secret, id).length >= 1, 20_000, 'the notice.completed event');
    const events = verified(path, secret, id);
    expect(events.map((e) => e.event.type)).toEqual(['notice.completed']);
    const [delivery] = events;
    expect(delivery!.headers['webhook-id']).toMatch(new RegExp(`^evt_${id}_\\d+$`));
    expect(delivery!.event.data).toMatchObject({
      noticeId: id,
      tenant: 'default',
      state: 'email_delivered',
      fallbackReason: null,
      metadata: { campaign: 'winter-cup' },
    });
    expect(delivery!.event.data.checks).toEqual(expect.objectContaining({ email: expect.any(Number) }));
    expect(delivery!.body).not.toContain(email);
    expect(delivery!.body).not.toContain('Terms');
  });

  it('posts fallback.decided and then notice.completed for a notice that fell back to SMS', async () => {
    const path = `/fallback-${label()}`;
    const { secret } = await subscribe(path);
    const phone = '+12025550100';
    const id = await stack.createNotice(notice(`never+${label()}@example.com`, phone, 2));
    await stack.waitForState(id, ['sms_delivered']);
    await waitFor(async () => verified(path, secret, id).length >= 2, 20_000, 'both events');
    const events = verified(path, secret, id);
    expect(events.map((e) => e.event.type).sort()).toEqual(['fallback.decided', 'notice.completed']);
    const decided = events.find((e) => e.event.type === 'fallback.decided')!;
    expect(decided.event.data).toMatchObject({ state: 'sms_pending', fallbackReason: 'email_deadline_elapsed' });
    expect(events.find((e) => e.event.type === 'notice.completed')!.event.data).toMatchObject({ state: 'sms_delivered' });
    expect(decided.body).not.toContain(phone);
  });

  it('retries an endpoint answering 500 twice, then 200: three posts, one webhook-id, the attempts listed', async () => {
    const path = `/flaky-${label()}`;
    const { id: endpointId, secret } = await subscribe(path, ['notice.completed']);
    listener.answer = (request, nth) => (request.path === path && nth <= 2 ? 500 : 200);
    const id = await stack.createNotice(notice(`delivered+1s+${label()}@example.com`));
    await waitFor(async () => verified(path, secret, id).length >= 3, 30_000, 'the third post');
    const posts = verified(path, secret, id);
    expect(posts).toHaveLength(3);
    expect(new Set(posts.map((p) => p.headers['webhook-id'])).size).toBe(1);
    const deliveries = (await stack.web.call('GET', `/v1/event-endpoints/${endpointId}/deliveries`)).json.deliveries as {
      outcome: string;
      attempts: number;
      status: number;
    }[];
    expect(deliveries.slice(0, 3).map((d) => [d.outcome, d.attempts, d.status])).toEqual([
      ['delivered', 3, 200],
      ['failed', 2, 500],
      ['failed', 1, 500],
    ]);
    listener.answer = () => 200;
  });

  it('disables an endpoint that answers 410: it gets nothing more, and /metrics and /admin say so', async () => {
    const path = `/gone-${label()}`;
    const { id: endpointId, secret } = await subscribe(path, ['notice.completed']);
    listener.answer = (request) => (request.path === path ? 410 : 200);
    const first = await stack.createNotice(notice(`delivered+1s+${label()}@example.com`));
    await waitFor(async () => listener.at(path).length >= 1, 20_000, 'the first post');
    await waitFor(
      async () =>
        ((await stack.web.call('GET', '/v1/event-endpoints')).json.endpoints as { id: string; disabled: unknown }[]).some(
          (e) => e.id === endpointId && e.disabled !== null,
        ),
      10_000,
      'the endpoint disabled',
    );
    const second = await stack.createNotice(notice(`delivered+1s+${label()}@example.com`));
    await stack.waitForState(second, ['email_delivered']);
    // The second notice's event is dispatched to no one: the endpoint is disabled.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(verified(path, secret, first)).toHaveLength(1);
    expect(verified(path, secret, second)).toHaveLength(0);
    const metrics = (await stack.web.call('GET', '/metrics')).text;
    expect(metrics).toMatch(/^herald_event_deliveries_total\{outcome="gone"\} [1-9]/m);
    expect(metrics).toMatch(/^herald_event_endpoints\{state="disabled"\} [1-9]/m);
    const overview = await stack.web.call('GET', '/admin', undefined, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(overview.text).toMatch(
      new RegExp(`<tr data-endpoint="${endpointId}"><td><code>${endpointId}</code>[^<]*</td><td>default</td><td>disabled: gone</td>`),
    );
    listener.answer = () => 200;
  });

  it('delivers what was written while no worker ran, and a delivery whose worker was killed mid-POST, after a restart', async () => {
    const path = `/crash-${label()}`;
    const { secret } = await subscribe(path, ['notice.completed']);
    // The first delivery is held open: the worker is killed while it is in flight.
    listener.answer = (request, nth) => (request.path === path && nth === 1 ? 'hang' : 200);
    const inFlight = await stack.createNotice(notice(`delivered+1s+${label()}@example.com`));
    await waitFor(async () => listener.at(path).length >= 1, 20_000, 'the delivery in flight');
    await stack.worker.stop('SIGKILL');
    // Written by the web while no worker runs: a notice canceled before any send.
    const canceled = await stack.createNotice(notice(`delivered+1s+${label()}@example.com`, '+12025550100', 600));
    const cancel = await stack.web.call('POST', `/v1/notices/${canceled}/cancel`);
    expect([200, 409]).toContain(cancel.status);
    const restarted = new WorkerProcess({ ...stack.env, LOG_LEVEL: 'info' }).start();
    try {
      await waitFor(async () => restarted.ready, 60_000, 'the new worker');
      await waitFor(async () => verified(path, secret, inFlight).length >= 2, 40_000, 'the killed delivery made again');
      if (cancel.status === 200)
        await waitFor(async () => verified(path, secret, canceled).length >= 1, 20_000, 'the event written with no worker');
      const again = verified(path, secret, inFlight);
      expect(new Set(again.map((r) => r.headers['webhook-id'])).size).toBe(1);
    } finally {
      await restarted.stop('SIGTERM');
      listener.answer = () => 200;
    }
  });
});

describe('event endpoints through the API', () => {
  it('refuses a URL to a private address unless allowed, and an unknown event type', async () => {
    const strict = await startWebhookStack({ prefix: testPrefix('events-strict'), env: { HERALD_ALLOW_PRIVATE_EVENT_URLS: '0' } });
    try {
      for (const url of [
        'http://127.0.0.1:9/hook',
        'http://169.254.169.254/latest/meta-data',
        'http://10.1.2.3/x',
        'http://[::1]:80/x',
        'http://localhost:8080/x',
      ]) {
        const refused = await strict.web.call('POST', '/v1/event-endpoints', { url, events: ['notice.completed'] });
        expect(refused.status, url).toBe(400);
        expect(refused.json.error.code).toBe('validation_failed');
      }
      const unknown = await strict.web.call('POST', '/v1/event-endpoints', { url: 'https://example.com/x', events: ['notice.opened'] });
      expect(unknown.status).toBe(400);
      expect((await strict.web.call('GET', '/v1/event-endpoints')).json).toEqual({ endpoints: [] });
    } finally {
      await strict.close();
    }
  });

  it('lists an endpoint without its secret, and deletes it', async () => {
    const { id } = await subscribe(`/listed-${label()}`);
    const listed = (await stack.web.call('GET', '/v1/event-endpoints')).json.endpoints as Record<string, unknown>[];
    const mine = listed.find((e) => e.id === id)!;
    expect(mine).toMatchObject({ id, events: ['notice.completed', 'fallback.decided', 'notice.failed'], disabled: null });
    expect(mine).not.toHaveProperty('secret');
    expect((await stack.web.call('DELETE', `/v1/event-endpoints/${id}`)).status).toBe(204);
    expect((await stack.web.call('DELETE', `/v1/event-endpoints/${id}`)).status).toBe(404);
    expect((await stack.web.call('GET', `/v1/event-endpoints/${id}/deliveries`)).status).toBe(404);
  });
});
