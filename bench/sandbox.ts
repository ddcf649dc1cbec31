/**
 * The emulators as the benchmark runs them: no added latency, and running counts of the
 * messages they accepted. The counts are what progress probes read: `emails()` copies every
 * message, and calling it in a loop would load the very process that answers Herald.
 */
import type { AddressInfo } from 'node:net';
import { buildSandboxApp, type Sandbox } from '@herald/sandbox';

export interface BenchSandbox extends Sandbox {
  /** Emails and SMS the emulators accepted since the last reset. */
  accepted: { emails: number; sms: number };
}

export async function startBenchSandbox(): Promise<BenchSandbox> {
  const { app, controls, abortPending } = buildSandboxApp({ indexLagMs: 0, slowMs: 0 });
  const accepted = { emails: 0, sms: 0 };
  app.addHook('onResponse', async (request, reply) => {
    if (request.method !== 'POST') return;
    if (request.url === '/email' && reply.statusCode === 200) accepted.emails += 1;
    else if (request.url.endsWith('/Messages.json') && reply.statusCode === 201) accepted.sms += 1;
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return {
    ...controls,
    url: `http://127.0.0.1:${port}`,
    port,
    accepted,
    reset: () => {
      controls.reset();
      accepted.emails = 0;
      accepted.sms = 0;
    },
    close: async () => {
      abortPending();
      await app.close();
    },
  };
}
