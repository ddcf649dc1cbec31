import type { StoredEntry } from '../store/notices.js';
import type { noticeView } from '../notice/view.js';
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

/** A time relative to acceptance: `+2m 30s`, or with tenths under a minute (`+1.4s`). */
function offset(ms: number): string {
  const sign = ms < 0 ? '−' : '+';
  const abs = Math.abs(ms) / 1000;
  if (abs < 60) return `${sign}${Number(abs.toFixed(1))}s`;
  const s = Math.round(abs);
  return `${sign}${Math.floor(s / 60)}m${s % 60 ? ` ${s % 60}s` : ''}`;
}

/** The timeline page's one style block (hashed into its CSP). */
export const TIMELINE_CSS = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0 0 4px} .meta{color:#57606a;margin-bottom:16px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;margin:0 0 16px} dt{color:#57606a}
svg{width:100%;max-width:${WIDTH}px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa}
.lane{stroke:#d0d7de} .lane-label{font-weight:600;fill:#57606a;font-size:12px} .tick{fill:#57606a;font-size:11px}
.planned{stroke:#8250df;stroke-width:2} .deadline{stroke:#cf222e;stroke-width:2;stroke-dasharray:6 3}
.deadline-label{fill:#cf222e;font-size:12px;font-weight:600} .timeout{fill:#afb8c1}
.requested{fill:#fff;stroke:#0969da;stroke-width:2} .accepted{fill:#0969da}
.decision{fill:#cf222e} .reason{fill:#cf222e;font-weight:600;font-size:13px} .error{fill:#bc4c00;font-size:11px}
.done{fill:#1a7f37;font-size:11px} .cross{fill:#cf222e;font-size:14px}
.legend span{margin-right:16px} table{border-collapse:collapse;margin-top:16px;font-size:12px} td,th{border-bottom:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
code{font-family:ui-monospace,monospace;word-break:break-all}
.colour-timeout{color:#afb8c1} .colour-planned{color:#8250df} .colour-deadline{color:#cf222e}
header form{float:right} header button{font:inherit}
`;

/**
 * The audit timeline of one notice as a self-contained HTML page: one time axis with the poll
 * plan, each provider call and observation, the channel deadline, the fallback decision and the
 * SMS — the three timescales (provider timeout, poll schedule, channel deadline) side by side —
 * and the raw decision log below. No scripts, no external assets; every value is escaped by `markup`.
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
    const title = markup`<title>#${e.seq} ${e.type} at ${e.at} (${offset(t - created)})</title>`;
    const [channel, what] = String(e.type).split('.') as [string, string | undefined];
    if ((channel === 'email' || channel === 'sms') && what) {
      const y = laneY(channel === 'email' ? 'Email' : 'SMS');
      if (e.type === 'email.observed' || e.type === 'sms.observed') {
        const colour = STATUS_COLOURS[e.status] ?? '#57606a';
        svg.push(
          markup`<g data-marker="${channel}-observed" data-status="${e.status}"><circle cx="${x(t)}" cy="${y}" r="6" fill="${colour}"/>${title}</g>`,
        );
      } else if (what === 'requested' || what === 'accepted') {
        // The provider timeout: how long this attempt may take, to scale.
        const bar =
          what === 'requested'
            ? markup`<rect x="${x(t)}" y="${y - 14}" width="${Math.max(2, x(t + timeoutMs) - x(t))}" height="4" class="timeout"/>`
            : '';
        svg.push(
          markup`<g data-marker="${channel}-${what}">${bar}<rect x="${x(t) - 5}" y="${y - 5}" width="10" height="10" class="${what}"/>${title}</g>`,
        );
      } else if (what === 'canceled') {
        svg.push(
          markup`<g data-marker="sms-canceled"><text x="${x(t)}" y="${y + 4}" class="cross" text-anchor="middle">✕</text>${title}</g>`,
        );
      }
    } else if (e.type === 'provider.error') {
      const y = laneY(e.channel === 'sms' ? 'SMS' : 'Email');
      svg.push(
        markup`<g data-marker="provider-error" data-kind="${e.kind}"><text x="${x(t)}" y="${y + 22}" class="error" text-anchor="middle">⚠ ${e.kind}</text>${title}</g>`,
      );
    } else if (e.type === 'fallback.decided' || e.type === 'fallback.blocked') {
      const y = laneY('Decision');
      const reason = e.type === 'fallback.decided' ? String(e.reason) : `blocked: ${String(e.reason)}`;
      svg.push(
        markup`<g id="fallback-marker" data-marker="fallback" data-reason="${e.reason}"><polygon points="${x(t)},${y - 9} ${x(t) + 9},${y} ${x(t)},${y + 9} ${x(t) - 9},${y}" class="decision"/><text x="${x(t) + 12}" y="${y + 4}" class="reason">${reason}</text>${title}</g>`,
      );
    } else if (e.type === 'notice.completed') {
      svg.push(
        markup`<g data-marker="completed"><text x="${x(t)}" y="${laneY('Decision') + 24}" class="done" text-anchor="middle">■ ${e.state}</text>${title}</g>`,
      );
    }
  }

  const rows = events.map((e) => {
    const { id, seq, type, at, noticeId, ...fields } = e;
    void id;
    void noticeId;
    return markup`<tr><td>${seq}</td><td>${at}</td><td>${offset(Date.parse(at) - created)}</td><td><code>${type}</code></td><td><code>${JSON.stringify(fields)}</code></td></tr>\n`;
  });

  return markup`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Notice ${view.id} — Herald audit timeline</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
${styleBlock(TIMELINE_CSS)}</head>
<body>
<header><form method="post" action="/admin/logout"><button type="submit">Log out</button></form></header>
<h1>Notice <code>${view.id}</code></h1>
<div class="meta">Audit timeline, from Herald's decision log. Times are relative to acceptance (${view.createdAt}).</div>
<dl>
<dt>State</dt><dd id="state">${view.state}</dd>
<dt>Channel deadline</dt><dd>${view.deadline} (${offset(deadline - created)})</dd>
<dt>Fallback</dt><dd id="fallback-reason">${view.fallback ? markup`${view.fallback.reason} at ${view.fallback.decidedAt}` : 'none'}</dd>
<dt>Poll plan</dt><dd>${view.plannedChecks.length} checks: ${view.plannedChecks.map((p) => offset(Date.parse(p) - created)).join(', ')}</dd>
<dt>Provider timeout</dt><dd>${timeoutMs} ms per attempt</dd>
<dt>Policy version</dt><dd>${view.policyVersion}</dd>
</dl>
<svg viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="Timeline of notice ${view.id}">
${svg.map((part) => markup`${part}\n`)}</svg>
<p class="legend"><span><b class="colour-timeout">▬</b> provider timeout (per attempt)</span><span><b class="colour-planned">|</b> poll schedule (planned checks)</span><span><b class="colour-deadline">┆</b> channel deadline</span><span>● observed status (green delivered, amber pending, red bounced/failed)</span><span>◆ fallback decision</span></p>
<h2>Decision log</h2>
<table><thead><tr><th>seq</th><th>at</th><th>offset</th><th>type</th><th>fields</th></tr></thead><tbody>
${rows}</tbody></table>
</body></html>`;
}
