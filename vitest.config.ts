import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The full chaos run has its own command (npm run test:chaos); the short one stays here.
    exclude: ['**/node_modules/**', 'test/chaos/full.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // HERALD_TEST_TOPOLOGY=cluster: one Redis Cluster for the run (test/helpers/env.ts).
    globalSetup: ['test/helpers/cluster-setup.ts'],
    fileParallelism: true,
    maxWorkers: 2,
  },
});
