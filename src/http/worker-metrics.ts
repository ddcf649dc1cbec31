/**
 * The worker's own `/metrics` and `/healthz` (HERALD_WORKER_METRICS_PORT). Everything here is of
 * this one process — its runtime, the jobs it runs, the provider calls it makes — so an operator
 * sums it over the worker replicas; the figures every process would read alike from Redis are the
 * web's (src/http/metrics.ts), exported by one web replica only.
 */
import type { Processor } from 'bullmq';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { Gauge, Histogram, Registry } from 'prom-client';
import type { CallRecorder } from '../providers/timed.js';
import { registerProcessMetrics } from './process-metrics.js';
import { errorBody, quotedPath } from './errors.js';

/** Provider call durations, in seconds: a status read takes tens of milliseconds, a timeout up to HERALD_PROVIDER_TIMEOUT_MS (120 s at most). */
export const PROVIDER_CALL_BUCKETS_SECONDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120] as const;

/** The metrics of one worker process, on a registry of its own (tests run several workers in one process). */
export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly running: Gauge<'queue'>;
  private readonly calls: Histogram<'provider' | 'operation' | 'outcome'>;

  constructor() {
    registerProcessMetrics(this.registry, 'herald_worker_');
    this.running = new Gauge({
      name: 'herald_jobs_running',
      help: 'Jobs this worker process is running now, by queue.',
      labelNames: ['queue'],
      registers: [this.registry],
    });
    this.calls = new Histogram({
      name: 'herald_provider_call_duration_seconds',
      help: 'Provider calls this worker process made, by provider, operation (send, status, search, cancel) and outcome (ok, or timeout, rate_limited, server_error, rejected, error), and how long each took.',
      labelNames: ['provider', 'operation', 'outcome'],
      buckets: [...PROVIDER_CALL_BUCKETS_SECONDS],
      registers: [this.registry],
    });
  }

  /** The processor of `queue`, counted in `herald_jobs_running` while it runs (its series shown at 0 from the start). */
  counted<T>(queue: string, processor: Processor<T>): Processor<T> {
    this.running.inc({ queue }, 0);
    return async (job, token, signal) => {
      this.running.inc({ queue });
      try {
        return await processor(job, token, signal);
      } finally {
        this.running.dec({ queue });
      }
    };
  }

  /** Records one provider call (src/providers/timed.ts). */
  readonly recordCall: CallRecorder = ({ provider, operation, outcome, seconds }) => {
    this.calls.observe({ provider, operation, outcome }, seconds);
  };
}

/** What `/healthz` reports of the worker: its Redis connections' states and its BullMQ workers. */
export interface WorkerHealth {
  redis: Record<string, string>;
  workers: { running: number; total: number };
}

/** The worker's metrics listener: `/metrics` (Prometheus text) and `/healthz` (200 while Redis is ready and every BullMQ worker runs, else 503). */
export async function buildWorkerMetricsApp(metrics: WorkerMetrics, health: () => WorkerHealth, logger: Logger): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 1024,
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .status(404)
      .send(errorBody('not_found', `No route ${request.method} ${quotedPath(request.url)}; this listener serves /metrics and /healthz.`)),
  );
  app.get('/metrics', async (_request, reply) =>
    reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
  app.get('/healthz', async (_request, reply) => {
    const state = health();
    const down = Object.entries(state.redis).filter(([, status]) => status !== 'ready');
    if (down.length > 0 || state.workers.running < state.workers.total) {
      const why = [
        ...down.map(([role, status]) => `the ${role} Redis connection is ${status}`),
        ...(state.workers.running < state.workers.total
          ? [`${state.workers.total - state.workers.running} BullMQ workers are not running`]
          : []),
      ];
      return reply.status(503).send(errorBody('unavailable', `Not healthy: ${why.join('; ')}.`, state));
    }
    return { status: 'ok', ...state };
  });
  return app;
}
