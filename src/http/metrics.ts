import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { AppDeps } from '../app.js';
import type { Clock } from '../clock.js';
import { readBacklog, type BacklogSummary } from '../retention/backlog.js';
import { logMirrorBacklogGauges } from '../retention/metrics.js';
import { CHECKS_BUCKETS, DECISION_LAG_BUCKETS_MS, readMetricCounters, SPEND_SCALE } from '../store/metrics.js';
import { sameSecret } from './admin-auth.js';
import { sendTooManyFailures, type AuthFailures } from './auth-failures.js';
import { errorBody } from './errors.js';

const PROVIDER_OF: Record<string, string> = { email: 'postmark', sms: 'twilio' };

type Sample = { value: number; labels?: Record<string, string | number>; metricName?: string };
type Snapshot = {
  counters: Map<string, number>;
  queues: Record<string, Record<string, number>>;
  live: number;
  awaitingRetirement: number;
  backlog: BacklogSummary;
};

/** A metric whose samples are computed from the scrape's snapshot of Redis. */
function mirrored(name: string, help: string, type: 'counter' | 'gauge' | 'histogram', samples: (s: Snapshot) => Sample[]) {
  let snapshot: Snapshot | undefined;
  return {
    name,
    use(s: Snapshot) {
      snapshot = s;
    },
    get: async () => ({ name, help, type, aggregator: 'sum' as const, values: snapshot ? samples(snapshot) : [] }),
  };
}

/** Histogram samples from per-bucket counts `<field>_le|<le>`, `<field>_sum(_ms)` and `<field>_count`; `scale` divides values. */
function histogram(s: Snapshot, name: string, field: string, buckets: readonly number[], scale: number): Sample[] {
  let cumulative = 0;
  const samples: Sample[] = [];
  for (const le of [...buckets, '+Inf'] as const) {
    cumulative += s.counters.get(`${field}_le|${le}`) ?? 0;
    samples.push({ metricName: `${name}_bucket`, labels: { le: le === '+Inf' ? '+Inf' : le / scale }, value: cumulative });
  }
  const sum = s.counters.get(`${field}_sum_ms`) ?? s.counters.get(`${field}_sum`) ?? 0;
  samples.push({ metricName: `${name}_sum`, value: sum / scale });
  samples.push({ metricName: `${name}_count`, value: s.counters.get(`${field}_count`) ?? 0 });
  return samples;
}

/** Counter samples for every field `<prefix>|a|b|...`, labelled by `labelNames`. */
function byFields(
  s: Snapshot,
  prefix: string,
  labelNames: string[],
  map?: (labels: Record<string, string>) => Record<string, string>,
): Sample[] {
  const samples: Sample[] = [];
  for (const [field, value] of s.counters) {
    const parts = field.split('|');
    if (parts[0] !== prefix || parts.length !== labelNames.length + 1) continue;
    const labels = Object.fromEntries(labelNames.map((l, i) => [l, parts[i + 1]!]));
    samples.push({ value, labels: map ? map(labels) : labels });
  }
  return samples;
}

/**
 * `/metrics`: Prometheus text. Herald's counters live in Redis (incremented by the transition
 * scripts), so any web process reports the totals of all workers; queue depths are read from
 * BullMQ at scrape time; the process's own runtime metrics are added by prom-client.
 */
export async function metricsRoutes(app: FastifyInstance, deps: AppDeps, failures: AuthFailures): Promise<void> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'herald_web_' });
  const metrics = [
    mirrored('herald_notices_accepted_total', 'Notices accepted through the API.', 'counter', (s) => [
      { value: s.counters.get('entry|notice.accepted') ?? 0 },
    ]),
    mirrored('herald_transitions_total', 'Notice state changes, by the state entered.', 'counter', (s) => byFields(s, 'state', ['state'])),
    mirrored('herald_log_entries_total', 'Decision-log entries written, by type.', 'counter', (s) => byFields(s, 'entry', ['type'])),
    mirrored('herald_status_polls_total', 'Status reads that returned a status, by channel and normalized status.', 'counter', (s) =>
      byFields(s, 'poll', ['channel', 'status']),
    ),
    mirrored('herald_provider_calls_total', 'Provider calls, by provider, operation and outcome (ok or the error kind).', 'counter', (s) =>
      byFields(s, 'call', ['channel', 'operation', 'outcome'], (l) => ({ provider: PROVIDER_OF[l.channel!] ?? l.channel!, ...l })),
    ),
    mirrored('herald_provider_errors_total', 'Provider errors, by channel and kind.', 'counter', (s) =>
      byFields(s, 'perr', ['channel', 'kind']),
    ),
    mirrored('herald_fallback_decisions_total', 'Fallbacks to SMS decided, by reason.', 'counter', (s) =>
      byFields(s, 'fallback', ['reason']),
    ),
    mirrored('herald_fallback_blocked_total', 'Fallbacks that could not use SMS, by reason.', 'counter', (s) =>
      byFields(s, 'blocked', ['reason']),
    ),
    mirrored('herald_sms_sent_total', 'SMS handed to the provider.', 'counter', (s) => [
      { value: s.counters.get('entry|sms.accepted') ?? 0 },
    ]),
    mirrored('herald_reconciler_repairs_total', 'Overdue notices the reconciler drove forward.', 'counter', (s) => [
      { value: s.counters.get('entry|notice.reconciled') ?? 0 },
    ]),
    mirrored('herald_fallback_decision_lag_seconds', 'decidedAt − deadline of deadline fallbacks.', 'histogram', (s) =>
      histogram(s, 'herald_fallback_decision_lag_seconds', 'lag', DECISION_LAG_BUCKETS_MS, 1000),
    ),
    mirrored(
      'herald_estimated_spend_total',
      `Estimated provider spend of completed notices, by channel, in the configured currency (${deps.config.prices.currency}).`,
      'counter',
      (s) => byFields(s, 'spend', ['channel']).map((sample) => ({ ...sample, value: sample.value / SPEND_SCALE })),
    ),
    mirrored('herald_status_checks_per_notice', 'Email and SMS status checks of each completed notice.', 'histogram', (s) =>
      histogram(s, 'herald_status_checks_per_notice', 'checks', CHECKS_BUCKETS, 1),
    ),
    mirrored('herald_queue_jobs', 'Jobs in each queue, by state.', 'gauge', (s) =>
      Object.entries(s.queues).flatMap(([queue, counts]) =>
        Object.entries(counts).map(([state, value]) => ({ value, labels: { queue, state } })),
      ),
    ),
    mirrored('herald_live_notices', 'Notices not yet in a terminal state.', 'gauge', (s) => [{ value: s.live }]),
    mirrored('herald_notices_retired_total', 'Finished notices Redis let go of, their records in the archive.', 'counter', (s) => [
      { value: s.counters.get('retired') ?? 0 },
    ]),
    mirrored(
      'herald_notices_awaiting_retirement',
      'Finished notices past HERALD_NOTICE_KEEP_HOT still in Redis (waiting for the archive, or the next sweep).',
      'gauge',
      (s) => [{ value: s.awaitingRetirement }],
    ),
  ];
  for (const metric of metrics) registry.registerMetric(metric as never);
  // Everything read from Redis comes from one snapshot, shared by the scrapes of the cache window.
  const snapshot = snapshotCache(() => readSnapshot(deps), deps.clock, deps.config.metrics.cacheMs);
  for (const gauge of logMirrorBacklogGauges(async () => (await snapshot()).backlog)) registry.registerMetric(gauge);

  const token = deps.config.metrics.token;
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (token !== undefined) {
      const wait = failures.retryAfter(request.ip);
      if (wait !== undefined) return sendTooManyFailures(reply, wait);
      const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
      if (!bearer || !sameSecret(bearer[1]!, token)) {
        const blocked = bearer ? await failures.record(request.ip) : undefined;
        if (blocked !== undefined) return sendTooManyFailures(reply, blocked);
        return reply.status(401).send(errorBody('unauthorized', 'Send Authorization: Bearer <HERALD_METRICS_TOKEN>.'));
      }
    }
    const current = await snapshot();
    for (const metric of metrics) metric.use(current);
    return reply.header('content-type', registry.contentType).send(await registry.metrics());
  });
}

/** One reading of everything /metrics reports from Redis and BullMQ. */
async function readSnapshot(deps: AppDeps): Promise<Snapshot> {
  const counters = await readMetricCounters(deps.redis, deps.store.keys);
  const queues: Snapshot['queues'] = {};
  for (const queue of Object.values(deps.queues)) {
    queues[queue.name] = await queue.getJobCounts('wait', 'active', 'delayed', 'completed', 'failed', 'prioritized');
  }
  const now = deps.clock.now();
  return {
    counters,
    queues,
    live: await deps.store.liveCount(),
    awaitingRetirement: await deps.store.awaitingRetirement(now),
    backlog: await readBacklog(deps.redis, deps.store.keys, now),
  };
}

/**
 * The snapshot of the last `cacheMs` (by the injected clock), so that a scrape storm costs Redis
 * one reading per window; scrapes that arrive while it is read wait for the same reading. A
 * failed reading is not kept.
 */
export function snapshotCache<T>(read: () => Promise<T>, clock: Clock, cacheMs: number): () => Promise<T> {
  let cached: { at: number; value: Promise<T> } | undefined;
  return () => {
    const now = clock.now();
    if (cached && now - cached.at < cacheMs && now >= cached.at) return cached.value;
    const entry = { at: now, value: read() };
    entry.value.catch(() => {
      if (cached === entry) cached = undefined;
    });
    cached = entry;
    return entry.value;
  };
}
