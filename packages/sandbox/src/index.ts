/**
 * Herald's sandbox providers: HTTP emulators of every provider Herald supports, on one port,
 * driven by the recipient address and by injected faults (docs/SANDBOX.md). A package of its own:
 * Herald loads it only in sandbox mode, and its production image does not contain it.
 */
import type { AddressInfo } from 'node:net';
import { buildSandboxApp } from './server.js';
import type { Sandbox, SandboxOptions } from './types.js';

export type {
  ActiveFault,
  Fault,
  FaultMode,
  FaultRole,
  Operation,
  Sandbox,
  SandboxEmail,
  SandboxOptions,
  SandboxRequest,
  SandboxSms,
} from './types.js';
export { buildSandboxApp } from './server.js';
// What the emulators publish: the feeds' account, queues and topics, and the credentials they refuse.
export { SANDBOX_ACCOUNT_ID, SANDBOX_MAX_RECEIVE_COUNT, SANDBOX_QUEUE_NAMES, SANDBOX_REGION, SANDBOX_TOPIC_ARNS } from './sqs-api.js';
export { BAD_TOKEN } from './postmark-api.js';
export { BAD_SENDGRID_KEY } from './sendgrid-api.js';
export { UNKNOWN_MAILGUN_DOMAIN } from './mailgun-api.js';
export { NO_CREDIT_KEY } from './infrai-api.js';
export {
  WEBHOOK_PROVIDERS,
  type WebhookDeliveryRecord,
  type WebhookFaultRates,
  type WebhookProvider,
  type WebhookTarget,
} from './webhooks.js';
export { mailgunWebhookSigningKey, sendgridWebhookKeys, type SendgridWebhookKeys } from './webhook-keys.js';

/** Starts the sandbox and resolves once it listens (port 0, the default, picks a free port). */
export async function startSandbox(opts: SandboxOptions = {}): Promise<Sandbox> {
  const host = opts.host ?? '127.0.0.1';
  const { app, controls, abortPending } = buildSandboxApp(opts);
  await app.listen({ port: opts.port ?? 0, host });
  const port = (app.server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;

  return {
    url: `http://${urlHost(host)}:${port}`,
    port,
    close: () => {
      closed ??= (async () => {
        abortPending();
        await app.close();
      })();
      return closed;
    },
    ...controls,
  };
}

/** A host for URLs: wildcard listeners are reached on loopback, IPv6 literals take brackets. */
export function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
