import type { Clock } from '../../src/clock.js';
import { DEFAULT_PRICES } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { NoticeEngine, type EngineSettings } from '../../src/notice/engine.js';
import { createPostmarkProvider } from '../../src/providers/postmark.js';
import { createTwilioProvider } from '../../src/providers/twilio.js';
import type { Sandbox } from '../../src/sandbox/index.js';
import { PolicyStore } from '../../src/store/policies.js';
import { SuppressionStore } from '../../src/store/suppressions.js';
import { QueueScheduler } from '../../queues/index.js';
import type { WebUnderTest } from './herald.js';

/**
 * An engine the test drives step by step on its own clock (no worker runs), with the real
 * provider adapters talking to the sandbox.
 */
export function engineUnderTest(web: WebUnderTest, sandbox: Sandbox, clock: Clock, settings: Partial<EngineSettings> = {}): NoticeEngine {
  const prefix = web.store.keys.prefix;
  return new NoticeEngine({
    store: web.store,
    policies: new PolicyStore(web.redis, prefix),
    suppressions: new SuppressionStore(web.redis, prefix),
    email: createPostmarkProvider({
      serverToken: 't',
      from: 'herald@example.com',
      messageStream: 'outbound',
      apiUrl: sandbox.url,
      timeoutMs: 1000,
    }),
    sms: createTwilioProvider({
      accountSid: 'AC00000000000000000000000000000000',
      authToken: 't',
      from: '+15005550006',
      apiUrl: sandbox.url,
      timeoutMs: 1000,
    }),
    clock,
    log: createLogger('test', 'silent'),
    schedule: new QueueScheduler(web.queues, clock),
    settings: {
      providerTimeoutMs: 1000,
      minPollIntervalMs: 30_000,
      maxChecksPerNotice: 20,
      prices: DEFAULT_PRICES,
      rules: undefined,
      ...settings,
    },
  });
}
