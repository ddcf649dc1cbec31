import { defineConfig } from 'vitest/config';

/** `npm run test:chaos`: the full fault-injection run, alone on the machine. */
export default defineConfig({
  test: {
    // HERALD_TEST_TOPOLOGY=sentinel or cluster: the run's shared Sentinel setup or Redis Cluster.
    globalSetup: ['test/helpers/topology-setup.ts', 'test/helpers/cluster-setup.ts'],
    include: ['test/chaos/full.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: false,
  },
});
