import { ManualClock, type Clock } from '../../src/clock.js';
import { DEFAULT_PRICES } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { NoticeEngine, type EngineDeps, type EngineSettings } from '../../src/notice/engine.js';
import { createPostmarkProvider } from '../../src/providers/postmark.js';
import { createTwilioProvider } from '../../src/providers/twilio.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { QueueScheduler } from '../../queues/index.js';
import { testConfig, testPrefix } from './env.js';
import { cleanUp, startWebUnderTest, type WebUnderTest } from './herald.js';

/**
 * An engine the test drives step by step on its own clock (no worker runs), with the real
 * provider adapters talking to the sandbox.
 */
export function engineUnderTest(
  web: WebUnderTest,
  sandbox: Sandbox,
  clock: Clock,
  settings: Partial<EngineSettings> = {},
  extra: Partial<Pick<EngineDeps, 'statusReads' | 'store'>> = {},
): NoticeEngine {
  const { policies, suppressions } = web.deps;
  return new NoticeEngine({
    ...extra,
    store: extra.store ?? web.deps.store,
    policies,
    suppressions,
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
    // On the engine's clock, which may be another than the web's.
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

export interface EngineStack {
  clock: ManualClock;
  sandbox: Sandbox;
  web: WebUnderTest;
  engine: NoticeEngine;
  close(): Promise<void>;
}

/**
 * What an engine test stands on: the emulators (search index with no lag), the web app on real
 * Redis under its own prefix, and an engine on a manual clock that the test steps itself.
 */
export async function startEngineStack(
  label: string,
  opts: { env?: Record<string, string>; settings?: Partial<EngineSettings>; startAt?: string } = {},
): Promise<EngineStack> {
  const prefix = testPrefix(label);
  const clock = new ManualClock(Date.parse(opts.startAt ?? '2026-11-29T14:00:00Z'));
  const sandbox = await startSandbox({ port: 0, indexLagMs: 0 });
  const web = await startWebUnderTest(testConfig(prefix, { HERALD_MIN_POLL_INTERVAL_MS: '30000', ...opts.env }), clock);
  const engine = engineUnderTest(web, sandbox, clock, opts.settings);
  return {
    clock,
    sandbox,
    web,
    engine,
    close: async () => {
      await web.close();
      await sandbox.close();
      await cleanUp(prefix);
    },
  };
}
