import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // HERALD_TEST_TOPOLOGY=sentinel: the run's shared Sentinel setup (test/helpers/topology-setup.ts).
    globalSetup: ['test/helpers/topology-setup.ts'],
    include: ['test/**/*.test.ts'],
    // The full chaos run has its own command (npm run test:chaos); the short one stays here.
    exclude: ['**/node_modules/**', 'test/chaos/full.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
