import { defineConfig } from 'vitest/config';

/** `npm run test:chaos`: the full fault-injection run, alone on the machine. */
export default defineConfig({
  test: {
    include: ['test/chaos/full.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // HERALD_TEST_TOPOLOGY=cluster: one Redis Cluster for the run (test/helpers/env.ts).
    globalSetup: ['test/helpers/cluster-setup.ts'],
    fileParallelism: false,
  },
});
