import { markup, type Html } from './html.js';

/**
 * Small charts drawn on the server as SVG for the admin pages: no script, no outside asset, every
 * label escaped by `markup`. Colours come from the page's style block through classes, since the
 * pages' CSP allows no inline style.
 */

export interface Bar {
  /** Axis label; empty leaves the slot unlabelled. */
  label: string;
  value: number;
  /** The tooltip and the accessible name of the bar. */
  title: string;
}

const WIDTH = 360;

/** Vertical columns over a shared baseline, labelled below every `labelEvery`-th slot. */
export function columnChart(opts: {
  bars: Bar[];
  max?: number;
  ariaLabel: string;
  labelEvery?: number;
  topLabel?: (max: number) => string;
}): Html {
  const height = 150;
  const top = 20;
  const bottom = 24;
  const left = 8;
  const plot = height - top - bottom;
  const max = Math.max(opts.max ?? 0, ...opts.bars.map((b) => b.value), 0);
  const slot = (WIDTH - 2 * left) / Math.max(opts.bars.length, 1);
  const every = opts.labelEvery ?? 1;
  const parts = opts.bars.map((bar, i) => {
    const h = max > 0 ? (bar.value / max) * plot : 0;
    const x = left + i * slot;
    const label =
      bar.label && i % every === 0
        ? markup`<text x="${x + slot / 2}" y="${height - 8}" class="axis" text-anchor="middle">${bar.label}</text>`
        : '';
    return markup`<g class="bar"><rect x="${x + slot * 0.12}" y="${top + plot - h}" width="${slot * 0.76}" height="${Math.max(h, bar.value > 0 ? 1 : 0)}" class="fill"/><title>${bar.title}</title></g>${label}`;
  });
  return markup`<svg viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${opts.ariaLabel}" class="chart">
<line x1="${left}" x2="${WIDTH - left}" y1="${top + plot}" y2="${top + plot}" class="baseline"/>
<text x="${left}" y="13" class="axis">${max > 0 ? (opts.topLabel ?? String)(max) : 'none yet'}</text>
${parts}</svg>`;
}

/** One horizontal bar per row, stacked from segments when a row has several (`class` colours each). */
export function barChart(opts: {
  rows: { label: string; segments: { value: number; title: string; className?: string }[] }[];
  ariaLabel: string;
}): Html {
  const labelWidth = 100;
  const rowHeight = 22;
  const height = opts.rows.length * rowHeight + 8;
  const max = Math.max(0, ...opts.rows.map((r) => r.segments.reduce((sum, s) => sum + s.value, 0)));
  const scale = (WIDTH - labelWidth - 12) / (max || 1);
  const rows = opts.rows.map((row, i) => {
    const y = 4 + i * rowHeight;
    let x = labelWidth;
    const segments = row.segments.map((segment) => {
      const w = segment.value * scale;
      const rect = markup`<g class="bar"><rect x="${x}" y="${y + 3}" width="${segment.value > 0 ? Math.max(w, 1) : 0}" height="${rowHeight - 8}" class="${segment.className ?? 'fill'}"/><title>${segment.title}</title></g>`;
      x += w;
      return rect;
    });
    return markup`<text x="${labelWidth - 6}" y="${y + rowHeight / 2 + 3}" class="axis" text-anchor="end">${row.label}</text>${segments}`;
  });
  return markup`<svg viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${opts.ariaLabel}" class="chart">
<line x1="${labelWidth}" x2="${labelWidth}" y1="0" y2="${height}" class="baseline"/>
${rows}</svg>`;
}
