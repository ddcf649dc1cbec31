/**
 * Herald's sandbox providers (README, Sandbox providers): HTTP emulators of the Postmark and Twilio APIs on one
 * port, driven by the recipient address and by injected faults. See docs/SANDBOX.md.
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
