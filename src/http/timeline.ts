import type { StoredEntry } from '../store/notices.js';
import type { noticeView } from '../notice/view.js';
import { adminNav, NAV_CSS } from './admin-nav.js';
import { markup, styleBlock, type Html } from './html.js';

type View = ReturnType<typeof noticeView>;

const WIDTH = 1000;
const LEFT = 110;
const RIGHT = 30;
const LANE = 56;
const LANES = ['Plan', 'Email', 'Decision', 'SMS'] as const;
const STATUS_COLOURS: Record<string, string> = {
  delivered: '#1a7f37',
  pending: '#9a6700',
  deferred: '#bc4c00',
  bounced: '#cf222e',
  failed: '#cf222e',
  unknown: '#57606a',
};

/** A time relative to acceptance: `+1.4s` under a minute (with tenths), `+2m 30s`, `+3h 5m`, `+7d 2h`. */
function offset(ms: number): string {
  const sign = ms < 0 ? '−' : '+';
  const abs = Math.abs(ms) / 1000;
  if (abs < 60) return `${sign}${Number(abs.toFixed(1))}s`;
  const s = Math.round(abs);
  const [big, small, unit, rest] =
    s >= 86_400
      ? [Math.floor(s / 86_400), Math.floor((s % 86_400) / 3600), 'd', 'h']
      : s >= 3600
        ? [Math.floor(s / 3600), Math.floor((s % 3600) / 60), 'h', 'm']
        : [Math.floor(s / 60), s % 60, 'm', 's'];
  return `${sign}${big}${unit}${small ? ` ${small}${rest}` : ''}`;
}

/** The timeline page's one style block (hashed into its CSP). */
export const TIMELINE_CSS = `${NAV_CSS}
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2328;background:#fff}
main{padding:16px 24px;max-width:${WIDTH + 40}px} @media (max-width:700px){main{padding:12px}}
h1{font-size:20px;margin:8px 0 4px} h2{font-size:16px;margin:20px 0 6px} .meta{color:#57606a;margin:0 0 12px}
h1 code{overflow-wrap:anywhere}
header.notice{margin-bottom:4px} .blocked{margin:0 0 12px;padding:6px 10px;border-left:4px solid #cf222e;background:#ffebe9;white-space:normal;overflow-wrap:anywhere}
dl.summary,dl.fields,dl.timescales{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 12px;margin:0}
dt{color:#57606a} dd{margin:0;overflow-wrap:anywhere}
dl.timescales{gap:6px 12px} dl.timescales dt{font-weight:600;color:#1f2328;white-space:nowrap}
.chart{overflow-x:auto;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;margin-top:12px}
.chart svg{display:block;width:100%;min-width:720px}
.lane{stroke:#d0d7de} .lane-label{font-weight:600;fill:#57606a;font-size:12px} .tick{fill:#57606a;font-size:11px}
.planned{stroke:#8250df;stroke-width:2} .deadline{stroke:#cf222e;stroke-width:2;stroke-dasharray:6 3}
.deadline-label{fill:#cf222e;font-size:12px;font-weight:600} .timeout{fill:#afb8c1}
.requested{fill:#fff;stroke:#0969da;stroke-width:2} .accepted{fill:#0969da}
.decision{fill:#cf222e} .reason{fill:#cf222e;font-weight:600;font-size:13px} .error{fill:#bc4c00;font-size:11px}
.done{fill:#1a7f37;font-size:11px} .cross{fill:#cf222e;font-size:14px}
.webhook-ring{fill:none;stroke:#0969da;stroke-width:2}
.badge{font-size:11px;font-weight:600;border-radius:9px;padding:0 7px;border:1px solid;white-space:nowrap}
.badge-poll{color:#57606a;border-color:#d0d7de;background:#f6f8fa} .badge-webhook{color:#0550ae;border-color:#54aeff;background:#ddf4ff} .badge-saved{color:#1a7f37;border-color:#4ac26b;background:#dafbe1}
svg a:focus{outline:none} svg a:focus-visible>*:first-child{stroke:#1f2328;stroke-width:3} svg a:focus-visible{outline:2px solid #1f2328}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;padding:0;list-style:none;font-size:12px;color:#57606a}
.colour-timeout{color:#afb8c1} .colour-planned{color:#8250df} .colour-deadline{color:#cf222e} .colour-webhook{color:#0969da}
ol.log{list-style:none;padding:0;margin:0}
ol.log>li{border-top:1px solid #d0d7de;padding:8px 4px;display:grid;grid-template-columns:minmax(0,14em) minmax(0,1fr);gap:4px 16px;align-items:start}
ol.log>li:target{background:#fff8c5}
@media (max-width:700px){ol.log>li,dl.timescales{grid-template-columns:minmax(0,1fr)} dl.timescales{gap:0} dl.timescales dd{margin-bottom:6px} dl.fields dd dl.fields{display:block} dl.fields dd dl.fields dd{padding-left:12px}}
.entry-head{display:flex;flex-wrap:wrap;gap:0 8px;align-items:baseline;align-content:flex-start}
.type{font:600 13px ui-monospace,monospace;white-space:nowrap} .when{color:#57606a;font-size:12px}
dl.fields{font-size:13px} dl.fields dl.fields{font-size:inherit} ul.values{margin:0;padding-left:1.2em}
code{font-family:ui-monospace,monospace} .meta code{overflow-wrap:anywhere} time{white-space:nowrap}
:focus-visible{outline:2px solid #0969da;outline-offset:2px}
`;

/**
 * The audit timeline of one notice as a self-contained HTML page: one time axis with the poll
 * plan, each provider call and observation, the channel deadline, the fallback decision and the
 * SMS — the three timescales (provider timeout, poll schedule, channel deadline) side by side —
 * explained once, and the decision log below with each entry's fields as labelled values. No scripts, no
 * external assets; every value is escaped by `markup`.
 */
export function renderTimeline(view: View, events: StoredEntry[]): Html {
  const created = Date.parse(view.createdAt);
  const deadline = Date.parse(view.deadline);
  const times = [created, deadline, ...view.plannedChecks.map(Date.parse), ...events.map((e) => Date.parse(e.at))];
  const start = Math.min(...times);
  const end = Math.max(...times);
  const span = Math.max(end - start, 1000) * 1.06;
  const x = (t: number) => LEFT + ((t - start) / span) * (WIDTH - LEFT - RIGHT);
  const laneY = (lane: (typeof LANES)[number]) => 40 + LANES.indexOf(lane) * LANE;
  const height = 40 + LANES.length * LANE + 30;
  const accepted = events.find((e) => e.type === 'notice.accepted');
  const timeoutMs = Number(accepted?.providerTimeoutMs ?? 0);
  const svg: Html[] = [];

  for (const lane of LANES) {
    const y = laneY(lane);
    svg.push(markup`<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${y}" y2="${y}" class="lane"/>`);
    svg.push(markup`<text x="8" y="${y + 4}" class="lane-label">${lane}</text>`);
  }
  // Axis ticks every fifth of the span.
  for (let i = 0; i <= 5; i += 1) {
    const t = start + (span / 1.06) * (i / 5);
    svg.push(markup`<text x="${x(t)}" y="${height - 8}" class="tick" text-anchor="middle">${offset(t - created)}</text>`);
  }
  // The poll schedule: planned checks as ticks on the plan lane.
  for (const planned of view.plannedChecks) {
    const t = Date.parse(planned);
    svg.push(
      markup`<g data-marker="planned-check"><line x1="${x(t)}" x2="${x(t)}" y1="${laneY('Plan') - 9}" y2="${laneY('Plan') + 9}" class="planned"/><title>planned check ${planned} (${offset(t - created)})</title></g>`,
    );
  }
  // The channel deadline across every lane.
  svg.push(
    markup`<g id="deadline-marker" data-marker="deadline"><line x1="${x(deadline)}" x2="${x(deadline)}" y1="20" y2="${height - 24}" class="deadline"/><text x="${x(deadline) + 4}" y="18" class="deadline-label">channel deadline ${view.deadline}</text><title>channel deadline ${view.deadline}</title></g>`,
  );

  for (const e of events) {
    const t = Date.parse(e.at);
    const label = `#${e.seq} ${e.type} at ${e.at} (${offset(t - created)})`;
    const title = markup`<title>${label}</title>`;
    // Every event marker links to its entry in the log below: reachable by keyboard, and a click explains it.
    const push = (marker: Html) => svg.push(markup`<a href="#entry-${e.seq}" aria-label="${label}">${marker}</a>`);
    const [channel, what] = String(e.type).split('.') as [string, string | undefined];
    if ((channel === 'email' || channel === 'sms') && what) {
      const y = laneY(channel === 'email' ? 'Email' : 'SMS');
      if (e.type === 'email.observed' || e.type === 'sms.observed') {
        const colour = STATUS_COLOURS[e.status] ?? '#57606a';
        const source = sourceOf(e);
        // A webhook's observation wears a ring: the provider told Herald, no status read was made.
        const ring = source === 'webhook' ? markup`<circle cx="${x(t)}" cy="${y}" r="10" class="webhook-ring"/>` : '';
        const sourced = markup`<title>${label}, from a ${source}${e.checksSaved ? `, ${e.checksSaved} planned checks saved` : ''}</title>`;
        push(
          markup`<g data-marker="${channel}-observed" data-status="${e.status}" data-source="${source}">${ring}<circle cx="${x(t)}" cy="${y}" r="6" fill="${colour}"/>${sourced}</g>`,
        );
      } else if (what === 'requested' || what === 'accepted') {
        // The provider timeout: how long this attempt may take, to scale.
        const bar =
          what === 'requested'
            ? markup`<rect x="${x(t)}" y="${y - 14}" width="${Math.max(2, x(t + timeoutMs) - x(t))}" height="4" class="timeout"/>`
            : '';
        push(
          markup`<g data-marker="${channel}-${what}">${bar}<rect x="${x(t) - 5}" y="${y - 5}" width="10" height="10" class="${what}"/>${title}</g>`,
        );
      } else if (what === 'canceled') {
        push(markup`<g data-marker="sms-canceled"><text x="${x(t)}" y="${y + 4}" class="cross" text-anchor="middle">✕</text>${title}</g>`);
      }
    } else if (e.type === 'provider.error') {
      const y = laneY(e.channel === 'sms' ? 'SMS' : 'Email');
      push(
        markup`<g data-marker="provider-error" data-kind="${e.kind}"><text x="${x(t)}" y="${y + 22}" class="error" text-anchor="middle">⚠ ${e.kind}</text>${title}</g>`,
      );
    } else if (e.type === 'fallback.decided' || e.type === 'fallback.blocked') {
      const y = laneY('Decision');
      const reason = e.type === 'fallback.decided' ? String(e.reason) : `blocked: ${String(e.reason)}`;
      // In the right half the label runs leftwards, so that it stays inside the chart.
      const leftwards = x(t) > WIDTH / 2;
      push(
        markup`<g id="fallback-marker" data-marker="fallback" data-reason="${e.reason}"><polygon points="${x(t)},${y - 9} ${x(t) + 9},${y} ${x(t)},${y + 9} ${x(t) - 9},${y}" class="decision"/><text x="${leftwards ? x(t) - 12 : x(t) + 12}" y="${y + 4}" class="reason"${leftwards ? markup` text-anchor="end"` : ''}>${reason}</text>${title}</g>`,
      );
    } else if (e.type === 'notice.completed') {
      push(
        markup`<g data-marker="completed"><text x="${x(t)}" y="${laneY('Decision') + 24}" class="done" text-anchor="middle">■ ${e.state}</text>${title}</g>`,
      );
    }
  }

  const entries = events.map((e) => {
    const { id, seq, type, at, noticeId, ...fields } = e;
    void noticeId;
    return markup`<li id="entry-${seq}"><div class="entry-head"><span>#${seq}</span><code class="type">${type}</code>${sourceBadges(e)}<span class="when"><time datetime="${at}">${at}</time> (${offset(Date.parse(at) - created)})</span><span class="when">entry ${id}</span></div>
${fieldList(fields as Record<string, unknown>, created)}</li>\n`;
  });
  const observations = events.filter((e) => e.type === 'email.observed' || e.type === 'sms.observed');
  const byWebhook = observations.filter((e) => sourceOf(e) === 'webhook').length;
  const saved = observations.reduce((sum, e) => sum + (Number(e.checksSaved) || 0), 0);
  const plan = view.plannedChecks.map((p) => offset(Date.parse(p) - created)).join(', ');

  return markup`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Notice ${view.id} — Herald audit timeline</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
${styleBlock(TIMELINE_CSS)}</head>
<body>
${adminNav('timeline')}
<main id="main">
<header class="notice">
<h1>Notice <code>${view.id}</code></h1>
<p class="meta">Audit timeline, from Herald's decision log. Times are relative to acceptance (<time datetime="${view.createdAt}">${view.createdAt}</time>). <a href="#log">Skip to the decision log</a></p>
${blockedNote(view, events)}
<dl class="summary">
<dt>State</dt><dd id="state">${view.state}</dd>
<dt>Category</dt><dd>${view.category}</dd>
<dt>Recipient</dt><dd>${view.recipientId}</dd>
<dt>Fallback</dt><dd id="fallback-reason">${view.fallback ? markup`${view.fallback.reason} at ${view.fallback.decidedAt}` : 'none'}</dd>
<dt>Policy version</dt><dd>${view.policyVersion}</dd>
<dt>Observations</dt><dd id="observations" data-poll="${observations.length - byWebhook}" data-webhook="${byWebhook}" data-checks-saved="${saved}">${observations.length - byWebhook} from status checks (poll), ${byWebhook} from provider webhooks; ${saved} planned checks saved</dd>
</dl>
</header>
<h2 id="timescales-h">Three timescales</h2>
<dl class="timescales" id="timescales" aria-labelledby="timescales-h">
<dt><span class="colour-timeout" aria-hidden="true">▬</span> Provider timeout</dt><dd>How long one network attempt to a provider may take: <b>${timeoutMs} ms</b>. An attempt that runs out is recorded as a <code>provider.error</code>, never as a failed email, and the notice keeps waiting for the deadline.</dd>
<dt><span class="colour-planned" aria-hidden="true">|</span> Poll schedule</dt><dd>When Herald reads the delivery status: <b>${view.plannedChecks.length} planned checks</b> (${plan}), planned from the deadline backwards, the last at the deadline itself.</dd>
<dt><span class="colour-deadline" aria-hidden="true">┆</span> Channel deadline</dt><dd>The time after which the fallback to SMS is allowed: <b><time datetime="${view.deadline}">${view.deadline}</time></b> (${offset(deadline - created)}). It is checked at or after this time, never before.</dd>
</dl>
<div class="chart" tabindex="0" role="region" aria-label="Timeline chart; each event links to its entry in the decision log">
<svg viewBox="0 0 ${WIDTH} ${height}" role="group" aria-label="Timeline of notice ${view.id}">
${svg.map((part) => markup`${part}\n`)}</svg></div>
<ul class="legend" aria-label="Legend"><li><b class="colour-timeout">▬</b> provider timeout</li><li><b class="colour-planned">|</b> planned check</li><li><b class="colour-deadline">┆</b> channel deadline</li><li>□ requested, ■ accepted by the provider</li><li>● observed status (green delivered, amber pending, red bounced or failed)</li><li><b class="colour-webhook">◎</b> ringed: observed from a provider webhook, not a status check</li><li>◆ fallback decision</li></ul>
<h2 id="log">Decision log</h2>
<p class="meta">${events.length} entries, oldest first; the same as <code>GET /v1/notices/${view.id}/events</code>.</p>
<ol class="log">
${entries}</ol>
</main>
</body></html>`;
}

/**
 * A blocked notice's reason, whole, at the top of the page: the `fallback.blocked` entry's reason
 * and the fallback it stopped. The line wraps; nothing of it is cut off.
 */
function blockedNote(view: View, events: StoredEntry[]): Html | '' {
  const entry = events.findLast((e) => e.type === 'fallback.blocked');
  if (view.state !== 'blocked' || !entry || entry.type !== 'fallback.blocked') return '';
  return markup`<p class="blocked" id="blocked-reason" data-reason="${entry.reason}">Blocked: <code>${entry.reason}</code>. The fallback to SMS (<code>${view.fallback?.reason ?? 'none'}</code>) was decided at ${entry.decidedAt} and SMS was not permitted, so no channel is left.</p>`;
}

/** Where an observation came from; entries written before webhooks existed were all polls. */
function sourceOf(e: StoredEntry): 'poll' | 'webhook' {
  return (e as { source?: unknown }).source === 'webhook' ? 'webhook' : 'poll';
}

/** An observation's badges: `webhook` or `poll`, and the planned checks a webhook's delivery saved. */
function sourceBadges(e: StoredEntry): Html | '' {
  if (e.type !== 'email.observed' && e.type !== 'sms.observed') return '';
  const source = sourceOf(e);
  const saved = Number(e.checksSaved) || 0;
  return markup`<span class="badge badge-${source}" data-source="${source}">${source}</span>${saved ? markup`<span class="badge badge-saved" data-checks-saved="${saved}">${saved} checks saved</span>` : ''}`;
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** `providerTimeoutMs` → `provider timeout (ms)`: a field name as words. */
export function fieldLabel(name: string): string {
  const unit = name.endsWith('Ms') ? ' (ms)' : '';
  const words = name
    .replace(/Ms$/, '')
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase();
  return words + unit;
}

/** A field's value as a person reads it: times with their offset, lists as lists, objects as nested fields. */
function fieldValue(value: unknown, created: number): Html {
  if (value === null || value === undefined || value === '') return markup`<span class="when">none</span>`;
  if (typeof value === 'boolean') return markup`${value ? 'yes' : 'no'}`;
  if (typeof value === 'string' && ISO_TIME.test(value))
    return markup`<time datetime="${value}">${value}</time> <span class="when">(${offset(Date.parse(value) - created)})</span>`;
  if (Array.isArray(value)) {
    if (value.length === 0) return markup`<span class="when">none</span>`;
    return markup`<ul class="values">${value.map((v) => markup`<li>${fieldValue(v, created)}</li>`)}</ul>`;
  }
  if (typeof value === 'object') return fieldList(value as Record<string, unknown>, created);
  return markup`${String(value)}`;
}

function fieldList(fields: Record<string, unknown>, created: number): Html {
  const names = Object.keys(fields);
  if (names.length === 0) return markup`<p class="when">no other fields</p>`;
  return markup`<dl class="fields">${names.map((name) => markup`<dt>${fieldLabel(name)}</dt><dd data-field="${name}">${fieldValue(fields[name], created)}</dd>`)}</dl>`;
}
