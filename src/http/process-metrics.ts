import { collectDefaultMetrics, Gauge, type Registry } from 'prom-client';
import { packageVersion } from '../cli/version.js';

/** prom-client's gauges named like counters, sums of the by-type gauges beside them (`…_active_handles{type}`); promtool's lint refuses the names. */
const COUNTER_NAMED_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/**
 * The process's own series, on the web's and the worker's /metrics: prom-client's runtime
 * metrics under `prefix` (event-loop lag, heap, GC, CPU, file descriptors) and
 * `herald_build_info{version,node} 1`, which names the Herald and the Node.js each replica runs
 * (`count by (version) (herald_build_info)` during a rollout).
 */
export function registerProcessMetrics(registry: Registry, prefix: 'herald_web_' | 'herald_worker_'): void {
  collectDefaultMetrics({ register: registry, prefix });
  for (const name of COUNTER_NAMED_GAUGES) registry.removeSingleMetric(`${prefix}${name}`);
  const info = new Gauge({
    name: 'herald_build_info',
    help: 'Always 1; its labels name the Herald version and the Node.js version this process runs.',
    labelNames: ['version', 'node'],
    registers: [registry],
  });
  info.set({ version: packageVersion(), node: process.versions.node }, 1);
}
