import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // HERALD_TEST_TOPOLOGY=sentinel or cluster: the run's shared Sentinel setup or Redis Cluster.
    globalSetup: ['test/helpers/topology-setup.ts', 'test/helpers/cluster-setup.ts'],
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
