import type { FastifyInstance } from 'fastify';
import type { AppDeps } from './deps.js';
import { formatDuration } from '../durations.js';
import { hourlyStats, noticeStats, STATS_HOUR_MS, type NoticeStats } from '../notice/stats.js';
import { isTerminal, type NoticeState } from '../notice/states.js';
import { adminNav, NAV_CSS } from './admin-nav.js';
import { barChart, columnChart } from './charts.js';
import { markup, sendPage, styleBlock, type Html } from './html.js';
import { metricSeries, sharedMetricsSnapshot, type MetricsSnapshot, type Sample } from './metrics.js';

/** Hours of history the overview charts from the stats counters. */
export const OVERVIEW_HOURS = 24;

/** The overview's one style block (hashed into its CSP). */
export const OVERVIEW_CSS = `${NAV_CSS}
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{padding:16px 24px;max-width:1280px}
h1{font-size:20px;margin:8px 0 2px} h2{font-size:16px;margin:0 0 2px} .meta,.note{color:#57606a} .note{font-size:12px;margin:0 0 8px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,560px),1fr));gap:16px;margin-top:16px}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px;min-width:0}
.body{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:12px;align-items:start}
#outcomes{grid-column:1/-1} #outcomes .body{grid-template-columns:repeat(3,minmax(0,1fr))}
@media (max-width:700px){main{padding:12px} .body,#outcomes .body{grid-template-columns:minmax(0,1fr)}}
svg.chart{width:100%;height:auto;display:block} .fill{fill:#0969da} .baseline{stroke:#8c959f} .axis{fill:#57606a;font-size:12px}
.wait{fill:#9a6700} .active{fill:#1a7f37} .delayed{fill:#8c959f} .failed{fill:#cf222e}
.key span{margin-right:10px;font-size:12px} .k-wait{color:#9a6700} .k-active{color:#1a7f37} .k-delayed{color:#8c959f} .k-failed{color:#cf222e}
table{border-collapse:collapse;font-size:12px;width:100%} th,td{text-align:left;padding:2px 6px;border-bottom:1px solid #eaeef2;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
caption{text-align:left;font-weight:600;padding:6px 0 2px}
.queue-chart{max-width:400px} .scroll{overflow-x:auto} code{font-family:ui-monospace,monospace;white-space:nowrap}
.sub{padding-left:12px;font-weight:400}
details summary{cursor:pointer;margin-top:6px} :focus-visible{outline:2px solid #0969da;outline-offset:2px}
`;

/** A Prometheus sample's identity as the page writes it: `name{label=value,…}`, labels sorted. */
export function sampleKey(name: string, labels: Record<string, string | number> = {}): string {
  const pairs = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .sort();
  return pairs.length ? `${name}{${pairs.join(',')}}` : name;
}

const count = (n: number) => n.toLocaleString('en-US');
const percent = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;
const seconds = (s: number) => (s === 0 ? '0 s' : formatDuration(s * 1000));

/** A number of the page that is a /metrics sample: it carries the sample's key and exact value. */
function metricCell(key: string, value: number, shown: string): Html {
  return markup`<td class="n" data-metric="${key}" data-value="${value}">${shown}</td>`;
}

interface Figures {
  /** Samples of every series, by `sampleKey`. */
  samples: Map<string, number>;
  /** Samples of one family (histogram parts under their own names), in the order /metrics lists them. */
  family(name: string): { key: string; sample: Sample }[];
}

function figuresOf(snapshot: MetricsSnapshot, currency: string, providers: { email: string; sms: string }): Figures {
  const byFamily = new Map<string, { key: string; sample: Sample }[]>();
  const samples = new Map<string, number>();
  for (const series of metricSeries(currency, providers)) {
    const list = series.samples(snapshot).map((sample) => ({ key: sampleKey(sample.metricName ?? series.name, sample.labels), sample }));
    byFamily.set(series.name, list);
    for (const { key, sample } of list) samples.set(key, sample.value);
  }
  return { samples, family: (name) => byFamily.get(name) ?? [] };
}

function hourLabel(iso: string): string {
  return iso.slice(11, 16);
}

function fallbackSection(figures: Figures, hours: NoticeStats[], window: NoticeStats): Html {
  const bars = hours.map((h) => ({
    label: hourLabel(h.from),
    value: h.fallbackRate,
    title: `${h.from.slice(0, 13)}h UTC: ${percent(h.fallbackRate)} of ${count(h.notices)} notices fell back`,
  }));
  const reasons = Object.entries(window.fallbackByReason).sort(([a], [b]) => a.localeCompare(b));
  const decided = figures.family('herald_fallback_decisions_total');
  const blocked = figures.family('herald_fallback_blocked_total');
  const accepted = figures.samples.get('herald_notices_accepted_total') ?? 0;
  const hourRows = hours
    .filter((h) => h.notices > 0)
    .map(
      (h) =>
        markup`<tr><td>${h.from.slice(0, 13)}h</td><td class="n" data-hour="${h.from}" data-notices="${h.notices}">${count(h.notices)}</td><td class="n">${percent(h.fallbackRate)}</td></tr>`,
    );
  return markup`<section id="fallback" aria-labelledby="fallback-h"><h2 id="fallback-h">Fallback rate over time</h2>
<p class="note">Share of the notices created in each UTC hour whose fallback was decided (sent or blocked), the last ${OVERVIEW_HOURS} hours; the same counters as <code>/v1/stats</code>.</p>
<div class="body">${columnChart({ bars, max: 1, ariaLabel: 'Fallback rate per hour of creation', labelEvery: 6, topLabel: () => '100%' })}
<div><table id="fallback-window" data-from="${window.window.from}" data-to="${window.window.to}"><caption>Last ${OVERVIEW_HOURS} hours</caption>
<tr><th>notices</th><td class="n" data-stat="notices">${count(window.notices)}</td></tr>
<tr><th>fallback rate</th><td class="n" data-stat="fallbackRate" data-value="${window.fallbackRate}">${percent(window.fallbackRate)}</td></tr>
${reasons.map(([reason, n]) => markup`<tr><th><code>${reason}</code></th><td class="n" data-stat="fallbackByReason.${reason}">${count(n)}</td></tr>`)}
</table>
<table><caption>Since the counters began</caption>
${metricRow('accepted', 'herald_notices_accepted_total', accepted)}
${decided.map(({ key, sample }) => metricRow(markup`decided <a href="/admin/notices?reason=${encodeURIComponent(String(sample.labels?.reason))}"><code>${sample.labels?.reason}</code></a>`, key, sample.value))}
${blocked.map(({ key, sample }) => metricRow(markup`blocked <code>${sample.labels?.reason}</code>`, key, sample.value))}
</table>
${hourRows.length ? markup`<details><summary>Hours with notices</summary><table><tr><th>hour (UTC)</th><th class="n">notices</th><th class="n">fallback</th></tr>${hourRows}</table></details>` : ''}
</div></div></section>`;
}

/** The outcomes the overview counts: each a terminal state, under the name an operator asks for. */
export const OUTCOMES = [
  { state: 'email_delivered', label: 'delivered', note: 'by email' },
  { state: 'sms_delivered', label: 'fallen back', note: 'delivered by SMS after the fallback' },
  { state: 'sms_failed', label: 'SMS failed', note: 'the fallback SMS was undeliverable' },
  { state: 'blocked', label: 'blocked', note: 'no channel permitted' },
  { state: 'failed', label: 'failed', note: 'content gone or unreadable' },
  { state: 'canceled', label: 'canceled', note: 'through the API, before any send' },
] as const satisfies readonly { state: NoticeState; label: string; note: string }[];

/** How notices ended, and the provider errors met on the way, by provider. */
function outcomeSection(figures: Figures, window: NoticeStats): Html {
  // A state never entered has no /metrics sample yet: its 0 is shown without claiming one.
  const sinceCell = (state: string) => {
    const key = sampleKey('herald_transitions_total', { state });
    const value = figures.samples.get(key);
    return value === undefined ? markup`<td class="n" data-since="${state}" data-value="0">0</td>` : metricCell(key, value, count(value));
  };
  const inWindow = (state: string) => window.byState[state] ?? 0;
  const unfinished = Object.entries(window.byState)
    .filter(([state]) => !isTerminal(state as NoticeState))
    .reduce((sum, [, n]) => sum + n, 0);
  const rows = OUTCOMES.map((o) => ({
    label: o.label,
    segments: [
      {
        value: inWindow(o.state),
        title: `${o.label} (${o.state}): ${count(inWindow(o.state))} of the last ${OVERVIEW_HOURS} hours' notices`,
      },
    ],
  }));
  // Every failed provider call is counted by the entry that records it (provider.error), under the provider of its channel.
  const errors = figures.family('herald_provider_calls_total').filter(({ sample }) => sample.labels?.outcome !== 'ok');
  const providers = [...new Set(errors.map(({ sample }) => String(sample.labels?.provider)))].sort();
  const errorsOf = (provider: string) => errors.filter(({ sample }) => String(sample.labels?.provider) === provider);
  const total = (provider: string) => errorsOf(provider).reduce((sum, { sample }) => sum + sample.value, 0);
  return markup`<section id="outcomes" aria-labelledby="outcomes-h"><h2 id="outcomes-h">Outcomes and provider errors</h2>
<p class="note">How notices ended (their final state), the last ${OVERVIEW_HOURS} hours by creation hour as <code>/v1/stats</code> counts them, and all time, since the counters began (<code>herald_transitions_total</code>). Provider errors: the calls of <code>herald_provider_calls_total</code> that failed, by operation and error kind.</p>
<div class="body">${barChart({ rows, ariaLabel: `Outcomes of the last ${OVERVIEW_HOURS} hours' notices` })}
<table id="outcome-counts"><tr><th>outcome</th><th class="n">last ${OVERVIEW_HOURS} h</th><th class="n">all time</th></tr>
${OUTCOMES.map(
  (o) =>
    markup`<tr data-outcome="${o.state}" title="${o.note}"><th>${o.label}${o.label === o.state ? '' : markup` <code>${o.state}</code>`}</th><td class="n" data-stat="byState.${o.state}">${count(inWindow(o.state))}</td>${sinceCell(o.state)}</tr>`,
)}
<tr><th>not finished yet</th><td class="n" data-stat="unfinished">${count(unfinished)}</td><td class="n">—</td></tr>
</table>
<table id="provider-errors"><caption>Provider errors by provider, all time</caption>
${
  providers.length === 0
    ? markup`<tr><td>No provider error yet.</td></tr>`
    : providers.map(
        (provider) =>
          markup`<tr><th><code>${provider}</code></th><td class="n" data-provider-errors="${provider}" data-value="${total(provider)}">${count(total(provider))}</td></tr>
${errorsOf(provider).map(({ key, sample }) => metricRow(markup`<span class="sub">${sample.labels?.operation}: <code>${sample.labels?.outcome}</code></span>`, key, sample.value))}`,
      )
}
</table></div></section>`;
}

function metricRow(label: string | Html, key: string, value: number, shown = count(value)): Html {
  return markup`<tr><th>${label}</th>${metricCell(key, value, shown)}</tr>`;
}

/** A histogram family as columns of its buckets (not cumulative) and a table of its samples. */
function histogramSection(opts: {
  id: string;
  title: string;
  note: string | Html;
  figures: Figures;
  name: string;
  unit: (le: string) => string;
  mean: (sum: number, n: number) => string;
  sumUnit: string;
}): Html {
  const parts = opts.figures.family(opts.name);
  const buckets = parts.filter((p) => p.sample.metricName === `${opts.name}_bucket`);
  const sum = parts.find((p) => p.sample.metricName === `${opts.name}_sum`)!;
  const n = parts.find((p) => p.sample.metricName === `${opts.name}_count`)!;
  let previous = 0;
  const rows = buckets.map(({ key, sample }) => {
    const le = String(sample.labels?.le);
    const inBucket = sample.value - previous;
    previous = sample.value;
    return { key, le, inBucket, cumulative: sample.value };
  });
  const bars = rows.map((r) => ({ label: opts.unit(r.le), value: r.inBucket, title: `≤ ${opts.unit(r.le)}: ${count(r.inBucket)}` }));
  return markup`<section id="${opts.id}" aria-labelledby="${opts.id}-h"><h2 id="${opts.id}-h">${opts.title}</h2>
<p class="note">${opts.note} Since the counters began: Herald keeps no history of this histogram, Prometheus does.</p>
<div class="body">${columnChart({ bars, ariaLabel: opts.title, labelEvery: 2, topLabel: (max) => `${count(max)} ${max === 1 ? 'notice' : 'notices'}` })}
<div><table><tr><th>count</th>${metricCell(n.key, n.sample.value, count(n.sample.value))}</tr>
<tr><th>sum${opts.sumUnit}</th>${metricCell(sum.key, sum.sample.value, String(sum.sample.value))}</tr>
<tr><th>mean</th><td class="n">${opts.mean(sum.sample.value, n.sample.value)}</td></tr></table>
<details><summary>Buckets</summary><table><tr><th>≤</th><th class="n">in bucket</th><th class="n">cumulative</th></tr>
${rows.map((r) => markup`<tr><td>${opts.unit(r.le)}</td><td class="n">${count(r.inBucket)}</td>${metricCell(r.key, r.cumulative, count(r.cumulative))}</tr>`)}
</table></details></div></div></section>`;
}

function spendSection(figures: Figures, window: NoticeStats, currency: string): Html {
  const spend = figures.family('herald_estimated_spend_total');
  const money = (v: number) => `${v.toFixed(4)} ${currency}`;
  const rows = spend.map(({ sample }) => ({
    label: String(sample.labels?.channel),
    segments: [{ value: sample.value, title: `${sample.labels?.channel}: ${money(sample.value)}` }],
  }));
  return markup`<section id="spend" aria-labelledby="spend-h"><h2 id="spend-h">Spend by channel</h2>
<p class="note">Estimated provider spend of completed notices at the configured unit prices (<code>HERALD_PRICES</code>), since the counters began; the last ${OVERVIEW_HOURS} hours by creation hour, as <code>/v1/stats</code>.</p>
<div class="body">${rows.length ? barChart({ rows, ariaLabel: 'Estimated spend by channel' }) : markup`<p class="note">No completed notice yet.</p>`}
<div><table><caption>Since the counters began</caption>
${spend.map(({ key, sample }) => metricRow(String(sample.labels?.channel), key, sample.value, money(sample.value)))}
</table><table><caption>Last ${OVERVIEW_HOURS} hours</caption>
<tr><th>email</th><td class="n">${money(window.estimatedSpend.byChannel.email)}</td></tr>
<tr><th>sms</th><td class="n">${money(window.estimatedSpend.byChannel.sms)}</td></tr>
<tr><th>total</th><td class="n">${money(window.estimatedSpend.total)}</td></tr></table></div></div></section>`;
}

const QUEUE_STATES = ['wait', 'active', 'delayed', 'failed'] as const;

function queueSection(figures: Figures): Html {
  const queues = [...new Set(figures.family('herald_queue_jobs').map(({ sample }) => String(sample.labels?.queue)))];
  const jobs = (queue: string, state: string) => figures.samples.get(sampleKey('herald_queue_jobs', { queue, state })) ?? 0;
  const rows = queues.map((queue) => ({
    label: queue,
    segments: QUEUE_STATES.map((state) => {
      const value = jobs(queue, state);
      return { value, title: `${queue}: ${count(value)} ${state}`, className: state };
    }),
  }));
  const cell = (queue: string, state: string) => {
    const value = jobs(queue, state);
    return metricCell(sampleKey('herald_queue_jobs', { queue, state }), value, count(value));
  };
  const oldest = (queue: string) => {
    const key = sampleKey('herald_queue_oldest_waiting_seconds', { queue });
    return metricCell(key, figures.samples.get(key) ?? 0, seconds(figures.samples.get(key) ?? 0));
  };
  return markup`<section id="queues" aria-labelledby="queues-h"><h2 id="queues-h">Queue depth and oldest waiting job</h2>
<p class="note">Jobs in each queue now (no history is kept: Bull Board at <a href="/admin/queues">/admin/queues</a> shows the jobs). The oldest waiting job is the runnable job that has waited longest since it was due.</p>
<p class="key"><span class="k-wait">■ waiting</span><span class="k-active">■ active</span><span class="k-delayed">■ delayed</span><span class="k-failed">■ failed</span></p>
<div class="queue-chart">${barChart({ rows, ariaLabel: 'Jobs per queue by state' })}</div>
<div class="scroll" tabindex="0" role="region" aria-label="Queue numbers"><table><tr><th>queue</th><th class="n">waiting</th><th class="n">active</th><th class="n">delayed</th><th class="n">failed</th><th class="n">completed</th><th class="n">oldest waiting</th></tr>
${queues.map((q) => markup`<tr><td><code>${q}</code></td>${cell(q, 'wait')}${cell(q, 'active')}${cell(q, 'delayed')}${cell(q, 'failed')}${cell(q, 'completed')}${oldest(q)}</tr>`)}
</table></div></section>`;
}

function mirrorSection(figures: Figures): Html {
  const shards = figures.family('herald_log_unarchived_entries').map(({ key, sample }) => ({
    key,
    shard: String(sample.labels?.shard),
    unarchived: sample.value,
  }));
  const bars = shards.map((s) => ({
    label: s.shard,
    value: s.unarchived,
    title: `shard ${s.shard}: ${count(s.unarchived)} entries not archived yet`,
  }));
  const oldest = figures.samples.get('herald_log_oldest_unarchived_seconds') ?? 0;
  const row = (label: string, key: string, value: number, shown = count(value)) => metricRow(label, key, value, shown);
  return markup`<section id="mirror" aria-labelledby="mirror-h"><h2 id="mirror-h">Log-mirror lag and retirement backlog</h2>
<p class="note">Now (no history is kept). Decision-log entries the archive does not hold yet, by shard; finished notices past <code>HERALD_NOTICE_KEEP_HOT</code> still in Redis.</p>
<div class="body">${columnChart({ bars, ariaLabel: 'Entries not archived yet, by shard', labelEvery: 2, topLabel: (max) => `${count(max)} ${max === 1 ? 'entry' : 'entries'}` })}
<div><table>
<tr><th>not archived</th><td class="n">${count(shards.reduce((sum, s) => sum + s.unarchived, 0))}</td></tr>
${row('oldest not archived', 'herald_log_oldest_unarchived_seconds', oldest, seconds(oldest))}
${row('log entries in Redis', 'herald_log_stream_entries', figures.samples.get('herald_log_stream_entries') ?? 0)}
${row('awaiting retirement', 'herald_notices_awaiting_retirement', figures.samples.get('herald_notices_awaiting_retirement') ?? 0)}
${row('retired', 'herald_notices_retired_total', figures.samples.get('herald_notices_retired_total') ?? 0)}
${row('live notices', 'herald_live_notices', figures.samples.get('herald_live_notices') ?? 0)}
</table>
<details><summary>By shard</summary><table><tr><th>shard</th><th class="n">not archived</th></tr>
${shards.map((s) => markup`<tr><td>${s.shard}</td>${metricCell(s.key, s.unarchived, count(s.unarchived))}</tr>`)}
</table></details></div></div></section>`;
}

/** Events to callers: deliveries by outcome, what waits, and every endpoint that is disabled or failing. */
function eventsSection(snapshot: MetricsSnapshot): Html {
  const { outcomes, undelivered, oldestUndeliveredSeconds, endpoints, attention } = snapshot.events;
  const outcomeRow = (outcome: string) =>
    markup`<tr><th><code>${outcome}</code></th><td class="n" data-event-outcome="${outcome}">${count(outcomes[outcome] ?? 0)}</td></tr>`;
  return markup`<section id="events" aria-labelledby="events-h"><h2 id="events-h">Events to callers</h2>
<p class="note">Deliveries of <code>notice.completed</code>, <code>fallback.decided</code> and <code>notice.failed</code> to the callers' endpoints. A disabled endpoint receives nothing until a caller deletes it and subscribes again.</p>
<div class="body"><table>
<tr><th>endpoints enabled</th><td class="n" data-endpoints="enabled">${count(endpoints.enabled)}</td></tr>
<tr><th>failing</th><td class="n" data-endpoints="failing">${count(endpoints.failing)}</td></tr>
<tr><th>disabled</th><td class="n" data-endpoints="disabled">${count(endpoints.disabled)}</td></tr>
<tr><th>events undelivered</th><td class="n" data-events-undelivered="${undelivered}">${count(undelivered)}</td></tr>
<tr><th>oldest undelivered</th><td class="n">${seconds(oldestUndeliveredSeconds)}</td></tr>
${['delivered', 'failed', 'gone', 'given_up', 'dropped'].map(outcomeRow)}
</table>
${
  attention.length === 0
    ? markup`<p class="note">No endpoint is failing or disabled.</p>`
    : markup`<table id="endpoints-attention"><tr><th>endpoint</th><th>tenant</th><th>state</th><th>since</th></tr>
${attention.map((e) => markup`<tr data-endpoint="${e.id}"><td><code>${e.id}</code> ${e.url}</td><td>${e.tenant}</td><td>${e.state}: ${e.reason}</td><td>${new Date(e.since).toISOString()}</td></tr>`)}
</table>`
}</div></section>`;
}

/** The admin overview: Herald's health at a glance, every figure from the reading `/metrics` serves. */
export function renderOverview(opts: {
  snapshot: MetricsSnapshot;
  hours: NoticeStats[];
  window: NoticeStats;
  currency: string;
  /** The chosen providers, which /metrics names in its provider label. */
  providers: { email: string; sms: string };
  now: number;
}): Html {
  const figures = figuresOf(opts.snapshot, opts.currency, opts.providers);
  const ms = (le: string) => (le === '+Inf' ? '∞' : Number(le) < 1 ? `${Math.round(Number(le) * 1000)} ms` : `${le} s`);
  return markup`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Herald — overview</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
${styleBlock(OVERVIEW_CSS)}</head>
<body>
${adminNav('overview')}
<main id="main">
<h1>Overview</h1>
<p class="meta">Read at ${new Date(opts.now).toISOString()} from the same reading <code>/metrics</code> serves (refreshed every <code>HERALD_METRICS_CACHE_MS</code>). Reload for new figures.</p>
<div class="cards">
${outcomeSection(figures, opts.window)}
${fallbackSection(figures, opts.hours, opts.window)}
${histogramSection({
  id: 'lateness',
  title: 'Deadline lateness',
  note: markup`How long after the channel deadline each deadline fallback was decided (decidedAt − deadline); the notices whose decision came late are <a href="/admin/notices?view=late">listed here</a>.`,
  figures,
  name: 'herald_fallback_decision_lag_seconds',
  unit: ms,
  mean: (sum, n) => (n ? ms(String(sum / n)) : '—'),
  sumUnit: ' (s)',
})}
${histogramSection({
  id: 'checks',
  title: 'Checks per notice',
  note: 'Email and SMS status checks of each completed notice.',
  figures,
  name: 'herald_status_checks_per_notice',
  unit: (le) => (le === '+Inf' ? '∞' : le),
  mean: (sum, n) => (n ? (sum / n).toFixed(2) : '—'),
  sumUnit: '',
})}
${spendSection(figures, opts.window, opts.currency)}
${queueSection(figures)}
${mirrorSection(figures)}
${eventsSection(opts.snapshot)}
</div></main></body></html>`;
}

/** The hours the overview charts: the last `OVERVIEW_HOURS`, ending with the one holding `now`. */
export function overviewWindow(now: number): { from: number; to: number } {
  const to = (Math.floor(now / STATS_HOUR_MS) + 1) * STATS_HOUR_MS;
  return { from: to - OVERVIEW_HOURS * STATS_HOUR_MS, to };
}

/** The tenants notices may belong to: `default` (HERALD_API_KEYS) and every tenant a key was made for. */
export async function knownTenants(deps: AppDeps): Promise<string[]> {
  const keys = await deps.apiKeys.list();
  return [...new Set(['default', ...keys.map((k) => k.tenant)])];
}

/** `GET /admin`: the overview page (registered in the admin scope, behind its gate). */
export async function overviewRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const snapshot = sharedMetricsSnapshot(deps);
  app.get<{ Querystring: { tenant?: string } }>('/admin', { schema: { hide: true } }, async (request, reply) => {
    const now = deps.clock.now();
    const { from, to } = overviewWindow(now);
    // Every tenant's notices together, or one tenant's (?tenant=).
    const tenants =
      typeof request.query.tenant === 'string' && request.query.tenant !== '' ? [request.query.tenant] : await knownTenants(deps);
    const [current, hours, window] = await Promise.all([
      snapshot(),
      hourlyStats(deps.redis, deps.store.keys, deps.config.prices, from, to, tenants),
      noticeStats(deps.redis, deps.store.keys, deps.config.prices, from, to, tenants),
    ]);
    return sendPage(
      reply,
      renderOverview({
        snapshot: current,
        hours,
        window,
        currency: deps.config.prices.currency,
        providers: { email: deps.config.emailProvider, sms: deps.config.smsProvider },
        now,
      }),
      OVERVIEW_CSS,
    );
  });
}
