import type { Logger } from 'pino';

/** Bound on a graceful shutdown: well under the 30 s most platforms wait before SIGKILL. */
export const SHUTDOWN_BOUND_MS = 20_000;

/**
 * On SIGTERM or SIGINT: run `close` (stop taking work, let running work finish, close
 * connections) and exit 0; exit 1 if it fails or outlasts the bound. A second signal forces.
 */
export function exitOnSignals(close: () => Promise<void>, log: Logger): void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    closing = true;
    log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      log.error({ boundMs: SHUTDOWN_BOUND_MS }, 'shutdown outlasted its bound: exiting');
      process.exit(1);
    }, SHUTDOWN_BOUND_MS);
    timer.unref();
    close().then(
      () => {
        log.info('shut down cleanly');
        process.exit(0);
      },
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** Makes `close` idempotent: every call returns the first call's promise. */
export function once(close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () => (closing ??= close());
}
