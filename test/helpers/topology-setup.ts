/**
 * Vitest global set-up: `HERALD_TEST_TOPOLOGY=sentinel` starts one Sentinel setup for the whole
 * run (a master, a replica, three sentinels: test/helpers/sentinel.ts) and hands its variables
 * to every test process through HERALD_TEST_REDIS_ENV, which `testEnv` and `plainRedis`
 * (test/helpers/env.ts) honour. Without it (the default: one node at REDIS_URL) it does nothing.
 */
import { SentinelSetup } from './sentinel.js';

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
  const topology = process.env.HERALD_TEST_TOPOLOGY ?? 'single';
  // A Cluster is test/helpers/cluster-setup.ts's, the other global set-up.
  if (topology === 'single' || topology === 'cluster') return undefined;
  if (topology !== 'sentinel') throw new Error(`HERALD_TEST_TOPOLOGY=${topology}: expected single, sentinel or cluster`);
  const sentinel = await SentinelSetup.start();
  process.env.HERALD_TEST_REDIS_ENV = JSON.stringify(sentinel.env);
  return async () => {
    delete process.env.HERALD_TEST_REDIS_ENV;
    await sentinel.stop();
  };
}
