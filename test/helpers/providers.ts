/** Helpers for adapter tests: the real SDKs against an in-process sandbox. */
import { expect } from 'vitest';
import { ProviderError } from '../../src/providers/types.js';

export { ACCOUNT_SID, AUTH_TOKEN, sleep, startOfSecond } from './sandbox.js';

/** The ProviderError a call rejects with, and how long it took to reject. */
export async function failure(call: Promise<unknown>): Promise<ProviderError & { elapsedMs: number }> {
  const started = Date.now();
  try {
    await call;
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return Object.assign(error as ProviderError, { elapsedMs: Date.now() - started });
  }
  throw new Error('expected the call to fail with a ProviderError');
}

let counter = 0;
/** A label that makes a sandbox address unique within the run. */
export const unique = (): string => `${process.pid}x${++counter}`;
