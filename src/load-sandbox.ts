/**
 * The sandbox package (`@herald/sandbox`), loaded when a process runs the emulators itself: only
 * in sandbox mode, with no emulator given by URL. Nothing else of the product imports it, so a
 * live process loads none of it, and Herald's production image does not contain it.
 */
import { ConfigError } from './config.js';

export type SandboxPackage = typeof import('@herald/sandbox');

/** Imports the sandbox package; where it is not installed, says which variables to set instead. */
export async function loadSandbox(): Promise<SandboxPackage> {
  try {
    return await import('@herald/sandbox');
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND' || !String((error as Error).message).includes('@herald/sandbox'))
      throw error;
    throw new ConfigError([
      'HERALD_PROVIDERS=sandbox with a provider URL unset runs the emulators in this process, and this installation has no sandbox package (@herald/sandbox; the production image leaves it out): ' +
        'set the provider URLs to a running sandbox (the compose `sandbox` service)',
    ]);
  }
}
