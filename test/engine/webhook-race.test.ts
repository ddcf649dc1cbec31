import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { NoticeEngine } from '../../src/notice/engine.js';
import { StepContext } from '../../src/notice/steps/context.js';
import { noProviderCalls, recordWebhookEvent } from '../../src/notice/steps/webhook.js';
import { createPostmarkProvider } from '../../src/providers/postmark.js';
import type { EmailProvider } from '../../src/providers/types.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { QueueScheduler } from '../../queues/index.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const prefix = testPrefix('webhook-race');
const clock = new ManualClock(Date.parse('2026-11-29T14:00:00Z'));
const log = createLogger('test', 'silent');
let sandbox: Sandbox;
let web: WebUnderTest;
/** The web's side: records webhook events, with no provider to call. */
let webhooks: StepContext;
/** Runs while a status check's read is on its way back, after the provider answered. */
let whileReading: (() => Promise<void>) | undefined;
let engine: NoticeEngine;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, indexLagMs: 0 });
  web = await startWebUnderTest(testConfig(prefix, { HERALD_MIN_POLL_INTERVAL_MS: '30000' }), clock);
  const postmark = createPostmarkProvider({
    serverToken: 't',
    from: 'herald@example.com',
    messageStream: 'outbound',
    apiUrl: sandbox.url,
    timeoutMs: 1000,
  });
  const email: EmailProvider = {
    name: postmark.name,
    verify: () => postmark.verify(),
    send: (message) => postmark.send(message),
    findByIdempotencyKey: (...args) => postmark.findByIdempotencyKey(...args),
    status: async (...args) => {
      const observation = await postmark.status(...args);
      await whileReading?.();
      return observation;
    },
  };
  const settings = {
    providerTimeoutMs: 1000,
    minPollIntervalMs: 30_000,
    maxChecksPerNotice: 20,
    prices: web.deps.config.prices,
    rules: undefined,
  };
  const deps = {
    store: web.deps.store,
    policies: web.deps.policies,
    suppressions: web.deps.suppressions,
    clock,
    log,
    schedule: new QueueScheduler(web.queues, clock),
    settings,
  };
  engine = new NoticeEngine({ ...deps, email, sms: noProviderCalls().sms });
  webhooks = new StepContext({ ...deps, ...noProviderCalls() });
});
afterAll(async () => {
  await web.close();
  await sandbox.close();
  await cleanUp(prefix);
});

describe('when a webhook delivers the email while a planned check is reading its status', () => {
  it('the check is recorded (its call was made) without undoing the delivery: the email stays delivered', async () => {
    const created = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({ recipient: { id: 'p1', email: 'never@example.com' }, deadlineInSeconds: 600 }),
    );
    const id = created.json().id as string;
    expect((await engine.sendEmail(id)).note).toBe('email accepted');
    const sent = (await web.store.get(id))!;
    const messageId = sent.emailChannel.providerMessageId!;

    clock.set(Date.parse(created.json().plannedChecks[0]));
    // The check reads "Sent" (pending); before its answer is recorded, the provider's Delivery webhook arrives.
    whileReading = async () => {
      const outcome = await recordWebhookEvent(webhooks, 'postmark', {
        channel: 'email',
        providerMessageId: messageId,
        noticeId: id,
        eventId: 'delivery-1',
        observation: { providerStatus: 'Delivered', status: 'delivered', engagement: [] },
      });
      expect(outcome).toBe('recorded');
    };
    await engine.pollEmail(id);
    whileReading = undefined;

    const notice = (await web.store.get(id))!;
    expect(notice.state).toBe('email_delivered');
    expect(notice.emailChannel.status).toBe('delivered');
    const observed = (await web.store.events(id)).filter((e) => e.type === 'email.observed');
    expect(observed.map((e) => [e.source, e.status, e.late ?? false])).toEqual([
      ['webhook', 'delivered', false],
      ['poll', 'pending', false],
    ]);
  });
});
