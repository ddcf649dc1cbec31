/** Bench-only switch between job topologies while they are measured against each other. */
export const JOB_PER_CHECK = process.env.HERALD_BENCH_TOPOLOGY === 'per-check';
