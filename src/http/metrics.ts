import type { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { Gauge, Registry } from 'prom-client';
import type { AppDeps } from './deps.js';
import type { Clock } from '../clock.js';
import { readBacklog, type BacklogSummary } from '../retention/backlog.js';
import { CHECK_LATENESS_BUCKETS_MS, CHECKS_BUCKETS, DECISION_LAG_BUCKETS_MS, readMetricCounters, SPEND_SCALE } from '../store/metrics.js';
import { sameSecret } from './admin-auth.js';
import { sendTooManyFailures, type AuthFailures } from './auth-failures.js';
import { errorBody } from './errors.js';
import { registerProcessMetrics } from './process-metrics.js';
import { MetricsOwnerLease } from '../store/metrics-owner.js';
import { listQueues } from '../../queues/index.js';

export type Sample = { value: number; labels?: Record<string, string | number>; metricName?: string };

/** One reading of everything /metrics reports from Redis and BullMQ. */
export type MetricsSnapshot = {
  counters: Map<string, number>;
  queues: Record<string, Record<string, number>>;
  /** Per queue: how long its longest-waiting runnable job has waited, in seconds (0: none waits). */
  oldestWaiting: Record<string, number>;
  live: number;
  awaitingRetirement: number;
  backlog: BacklogSummary;
  /** Events to callers: deliveries by outcome, what waits, and the endpoints. */
  events: {
    outcomes: Record<string, number>;
    undelivered: number;
    /** Age of the oldest event not yet delivered (or given up), in seconds; 0: none waits. */
    oldestUndeliveredSeconds: number;
    endpoints: { enabled: number; disabled: number; failing: number };
    /** The endpoints an operator must look at: disabled ones and failing ones (at most 50). */
    attention: { id: string; tenant: string; url: string; state: 'disabled' | 'failing'; reason: string; since: number }[];
  };
};
type Snapshot = MetricsSnapshot;

/** A Prometheus metric family computed from a snapshot: what /metrics serves and the overview draws. */
export interface SeriesDefinition {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  samples: (s: Snapshot) => Sample[];
}

/** A prom-client metric serving a definition's samples from the scrape's snapshot. */
function mirrored({ name, help, type, samples }: SeriesDefinition) {
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
 * Herald's metric families, computed from one snapshot. `/metrics` serves them and the admin
 * overview draws them (src/http/overview.ts), so the two never disagree.
 */
export function metricSeries(currency: string, providers: { email: string; sms: string }): SeriesDefinition[] {
  const providerOf = (channel: string): string => (channel === 'email' || channel === 'sms' ? providers[channel] : channel);
  const def = (name: string, help: string, type: SeriesDefinition['type'], samples: SeriesDefinition['samples']) => ({
    name,
    help,
    type,
    samples,
  });
  return [
    def('herald_notices_accepted_total', 'Notices accepted through the API.', 'counter', (s) => [
      { value: s.counters.get('entry|notice.accepted') ?? 0 },
    ]),
    def('herald_transitions_total', 'Notice state changes, by the state entered.', 'counter', (s) => byFields(s, 'state', ['state'])),
    def('herald_log_entries_total', 'Decision-log entries written, by type.', 'counter', (s) => byFields(s, 'entry', ['type'])),
    def('herald_status_polls_total', 'Status reads that returned a status, by channel and normalized status.', 'counter', (s) =>
      byFields(s, 'poll', ['channel', 'status']),
    ),
    def('herald_provider_calls_total', 'Provider calls, by provider, operation and outcome (ok or the error kind).', 'counter', (s) =>
      byFields(s, 'call', ['channel', 'operation', 'outcome'], (l) => ({ provider: providerOf(l.channel!), ...l })),
    ),
    def(
      'herald_webhook_observations_total',
      'Statuses recorded from provider webhooks (no provider call), by channel and normalized status.',
      'counter',
      (s) => byFields(s, 'webhook', ['channel', 'status']),
    ),
    def(
      'herald_webhook_events_ignored_total',
      'Verified webhook events that recorded nothing, by provider and outcome (unknown_message, duplicate, not_applicable, other_provider: not the provider of the attempt, over_limit: the notice had completed and taken its share).',
      'counter',
      (s) => byFields(s, 'whevent', ['provider', 'outcome']),
    ),
    def('herald_status_checks_saved_total', 'Planned status checks made unnecessary by a webhook, by channel.', 'counter', (s) =>
      byFields(s, 'saved', ['channel']),
    ),
    def('herald_provider_errors_total', 'Provider errors, by channel and kind.', 'counter', (s) =>
      byFields(s, 'perr', ['channel', 'kind']),
    ),
    def('herald_fallback_decisions_total', 'Fallbacks to SMS decided, by reason.', 'counter', (s) => byFields(s, 'fallback', ['reason'])),
    def('herald_fallback_blocked_total', 'Fallbacks that could not use SMS, by reason.', 'counter', (s) =>
      byFields(s, 'blocked', ['reason']),
    ),
    def('herald_sms_sent_total', 'SMS handed to the provider.', 'counter', (s) => [{ value: s.counters.get('entry|sms.accepted') ?? 0 }]),
    def(
      'herald_unreplicated_writes_total',
      'Writes that should have waited for a replica (the creation, a send about to leave) and went ahead without one, by write and reason (no_replica, timeout).',
      'counter',
      (s) => byFields(s, 'unreplicated', ['write', 'reason']),
    ),
    def(
      'herald_feed_messages_total',
      'SQS messages the feed sweep read (SES, AWS SMS), by provider and outcome: recorded, ignored, foreign_topic, not_sns, refused, address_mismatch, unreadable, poison_deleted.',
      'counter',
      (s) => byFields(s, 'feed', ['provider', 'outcome']),
    ),
    def('herald_reconciler_repairs_total', 'Overdue notices the reconciler drove forward.', 'counter', (s) => [
      { value: s.counters.get('entry|notice.reconciled') ?? 0 },
    ]),
    def('herald_fallback_decision_lag_seconds', 'decidedAt − deadline of deadline fallbacks.', 'histogram', (s) =>
      histogram(s, 'herald_fallback_decision_lag_seconds', 'lag', DECISION_LAG_BUCKETS_MS, 1000),
    ),
    def(
      'herald_status_check_lateness_seconds',
      'How much later than planned each planned status check ran (the status limiter or too few workers), by channel.',
      'histogram',
      (s) =>
        (['email', 'sms'] as const).flatMap((channel) =>
          histogram(s, 'herald_status_check_lateness_seconds', `checklate_${channel}`, CHECK_LATENESS_BUCKETS_MS, 1000).map((sample) => ({
            ...sample,
            labels: { ...sample.labels, channel },
          })),
        ),
    ),
    def(
      'herald_estimated_spend_total',
      `Estimated provider spend of completed notices, by channel, in the configured currency (${currency}).`,
      'counter',
      (s) => byFields(s, 'spend', ['channel']).map((sample) => ({ ...sample, value: sample.value / SPEND_SCALE })),
    ),
    def('herald_status_checks_per_notice', 'Email and SMS status checks of each completed notice.', 'histogram', (s) =>
      histogram(s, 'herald_status_checks_per_notice', 'checks', CHECKS_BUCKETS, 1),
    ),
    def('herald_queue_jobs', 'Jobs in each queue, by state.', 'gauge', (s) =>
      Object.entries(s.queues).flatMap(([queue, counts]) =>
        Object.entries(counts).map(([state, value]) => ({ value, labels: { queue, state } })),
      ),
    ),
    def('herald_live_notices', 'Notices not yet in a terminal state.', 'gauge', (s) => [{ value: s.live }]),
    def(
      'herald_event_deliveries_total',
      'Delivery attempts of events to callers, by outcome (delivered, failed: retried later, gone: the endpoint answered 410, given_up: still failing when the retries ran out, dropped: the endpoint was deleted or disabled).',
      'counter',
      (s) => Object.entries(s.events.outcomes).map(([outcome, value]) => ({ value, labels: { outcome } })),
    ),
    def('herald_events_undelivered', 'Events queued for an endpoint and not yet delivered.', 'gauge', (s) => [
      { value: s.events.undelivered },
    ]),
    def(
      'herald_event_oldest_undelivered_seconds',
      'Age of the oldest event not yet delivered to its endpoint (0: none waits).',
      'gauge',
      (s) => [{ value: s.events.oldestUndeliveredSeconds }],
    ),
    def(
      'herald_event_endpoints',
      'Event endpoints, by state (enabled, failing: enabled with failing deliveries, disabled).',
      'gauge',
      (s) => [
        { value: s.events.endpoints.enabled, labels: { state: 'enabled' } },
        { value: s.events.endpoints.failing, labels: { state: 'failing' } },
        { value: s.events.endpoints.disabled, labels: { state: 'disabled' } },
      ],
    ),
    def('herald_notices_retired_total', 'Finished notices Redis let go of, their records in the archive.', 'counter', (s) => [
      { value: s.counters.get('retired') ?? 0 },
    ]),
    def(
      'herald_notices_awaiting_retirement',
      'Finished notices past HERALD_NOTICE_KEEP_HOT still in Redis (waiting for the archive, or the next sweep).',
      'gauge',
      (s) => [{ value: s.awaitingRetirement }],
    ),
    def('herald_log_unarchived_entries', 'Decision-log entries in Redis that the archive does not hold yet, by shard.', 'gauge', (s) =>
      s.backlog.shards.map((shard) => ({ value: shard.unarchived, labels: { shard: String(shard.shard) } })),
    ),
    def(
      'herald_log_oldest_unarchived_seconds',
      'Age of the oldest decision-log entry not yet archived (0: all archived).',
      'gauge',
      (s) => [{ value: s.backlog.oldestUnarchivedSeconds }],
    ),
    def('herald_log_stream_entries', 'Decision-log entries held in Redis, archived ones inside the hot window included.', 'gauge', (s) => [
      { value: s.backlog.streamEntries },
    ]),
    def(
      'herald_queue_oldest_waiting_seconds',
      'How long the longest-waiting runnable job of each queue has waited (0: none waits).',
      'gauge',
      (s) => Object.entries(s.oldestWaiting).map(([queue, value]) => ({ value, labels: { queue } })),
    ),
  ];
}

/**
 * `/metrics`: Prometheus text. Herald's counters live in Redis (incremented by the transition
 * scripts) and queue depths are read from BullMQ at scrape time: these cluster-wide series are
 * the same whichever web process reads them, so only one process exports them, the owner of the
 * lease of `MetricsOwnerLease` (`herald_cluster_metrics_owner` 1), and summing over the replicas
 * counts them once. Every process exports its own series: its runtime (prom-client's default
 * metrics, `herald_web_`), `herald_build_info` and `herald_cluster_metrics_owner`.
 */
export async function metricsRoutes(app: FastifyInstance, deps: AppDeps, failures: AuthFailures): Promise<void> {
  const own = new Registry();
  registerProcessMetrics(own, 'herald_web_');
  const owner = new Gauge({
    name: 'herald_cluster_metrics_owner',
    help: '1 when this process exports the cluster-wide series (read from Redis and BullMQ), 0 when another does: their sum over the replicas is 1.',
    registers: [own],
  });
  const cluster = new Registry();
  const metrics = metricSeries(deps.config.prices.currency, { email: deps.config.emailProvider, sms: deps.config.smsProvider }).map(
    mirrored,
  );
  for (const metric of metrics) cluster.registerMetric(metric as never);
  const everything = Registry.merge([own, cluster]);
  // Everything read from Redis comes from one snapshot, shared by the scrapes of the cache window.
  const snapshot = sharedMetricsSnapshot(deps);
  const lease = new MetricsOwnerLease(deps.redis, deps.store.keys);
  app.addHook('onClose', async () => {
    await lease.release().catch((error: unknown) => deps.logger.warn({ err: error }, 'releasing the metrics owner lease failed'));
  });

  const token = deps.config.metrics.token;
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (token !== undefined) {
      const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
      if (!bearer || !sameSecret(bearer[1]!, token)) {
        const blocked = bearer ? await failures.fail(request.ip) : undefined;
        if (blocked !== undefined) return sendTooManyFailures(reply, blocked);
        return reply.status(401).send(errorBody('unauthorized', 'Send Authorization: Bearer <HERALD_METRICS_TOKEN>.'));
      }
    }
    const owns = await lease.owns(performance.now());
    owner.set(owns ? 1 : 0);
    if (!owns) return reply.header('content-type', own.contentType).send(await own.metrics());
    const current = await snapshot();
    for (const metric of metrics) metric.use(current);
    return reply.header('content-type', everything.contentType).send(await everything.metrics());
  });
}

const readings = new WeakMap<AppDeps, () => Promise<Snapshot>>();

/**
 * The snapshot reader of one app's dependencies, shared by `/metrics` and the admin overview:
 * within one `HERALD_METRICS_CACHE_MS` window both show the same reading.
 */
export function sharedMetricsSnapshot(deps: AppDeps): () => Promise<MetricsSnapshot> {
  let read = readings.get(deps);
  if (!read) {
    read = snapshotCache(() => readSnapshot(deps), deps.clock, deps.config.metrics.cacheMs);
    readings.set(deps, read);
  }
  return read;
}

/** One reading of everything /metrics reports from Redis and BullMQ. */
async function readSnapshot(deps: AppDeps): Promise<Snapshot> {
  const counters = await readMetricCounters(deps.redis, deps.store.keys);
  const now = deps.clock.now();
  const queues: Snapshot['queues'] = {};
  const oldestWaiting: Snapshot['oldestWaiting'] = {};
  for (const { label, queue } of listQueues(deps.queues)) {
    queues[label] = await queue.getJobCounts('wait', 'active', 'delayed', 'completed', 'failed', 'prioritized');
    oldestWaiting[label] = await oldestWaitingSeconds(queue, now);
  }
  return {
    counters,
    queues,
    oldestWaiting,
    live: await deps.store.liveCount(),
    awaitingRetirement: await deps.store.awaitingRetirement(now),
    backlog: await readBacklog(deps.redis, deps.store.keys, now),
    events: await readEventFigures(deps, now),
  };
}

async function readEventFigures(deps: AppDeps, now: number): Promise<Snapshot['events']> {
  const [outcomes, undelivered, endpoints] = await Promise.all([
    deps.eventEndpoints.outcomes(),
    deps.eventEndpoints.undelivered(),
    deps.eventEndpoints.list(),
  ]);
  const disabled = endpoints.filter((e) => e.disabledAt !== undefined).length;
  const failing = endpoints.filter((e) => e.disabledAt === undefined && e.failingSince !== undefined).length;
  return {
    outcomes,
    undelivered: undelivered.count,
    oldestUndeliveredSeconds: undelivered.oldestAt === undefined ? 0 : Math.max(0, Math.round((now - undelivered.oldestAt) / 1000)),
    endpoints: { enabled: endpoints.length - disabled - failing, disabled, failing },
    attention: endpoints
      .flatMap((e): Snapshot['events']['attention'] =>
        e.disabledAt !== undefined
          ? [
              {
                id: e.id,
                tenant: e.tenant,
                url: e.url,
                state: 'disabled' as const,
                reason: String(e.disabledReason ?? 'failing'),
                since: e.disabledAt,
              },
            ]
          : e.failingSince !== undefined
            ? [{ id: e.id, tenant: e.tenant, url: e.url, state: 'failing' as const, reason: 'deliveries failing', since: e.failingSince }]
            : [],
      )
      .slice(0, 50),
  };
}

/**
 * How long a queue's longest-waiting runnable job has waited: the head of `wait` since it was
 * first due (created, plus the delay it was added with), or a delayed job past its time that no
 * worker has promoted yet (no worker runs) since that time, whichever is older. A job its step
 * moved back to delayed counts from its first due time: an upper bound.
 */
async function oldestWaitingSeconds(queue: Queue, now: number): Promise<number> {
  const [head] = await queue.getJobs(['wait', 'prioritized'], 0, 0, true);
  // The delayed set is ordered by due time: its first job is the one due first.
  const [firstDelayed] = await queue.getJobs(['delayed'], 0, 0, true);
  const dueAt = (job: typeof head) => (job ? job.timestamp + Number(job.delay ?? job.opts.delay ?? 0) : Infinity);
  const dueSince = [dueAt(head), dueAt(firstDelayed)].filter((at) => at <= now || at === Infinity);
  const since = Math.min(...dueSince);
  return Number.isFinite(since) ? Math.max(0, Math.round((now - since) / 1000)) : 0;
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
