/** The benchmark's table: each figure beside its in-run baseline, the ratio, and the target. */

export interface Row {
  figure: string;
  herald: number;
  baseline: number;
  /** What the baseline is. */
  baselineIs: string;
  unit: string;
  /** Herald ÷ baseline, unless given (e.g. a scale-out factor). */
  ratio?: number;
  target?: string;
  met?: boolean;
}

const fmt = (n: number, unit: string): string => {
  if (!Number.isFinite(n)) return '—';
  const digits = Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2;
  return `${n.toFixed(digits)}${unit ? ` ${unit}` : ''}`;
};

export function ratioOf(row: Row): number {
  return row.ratio ?? row.herald / row.baseline;
}

export function table(rows: Row[]): string {
  const cells = rows.map((r) => [
    r.figure,
    fmt(r.herald, r.unit),
    `${fmt(r.baseline, r.unit)} (${r.baselineIs})`,
    Number.isFinite(ratioOf(r)) ? `${ratioOf(r).toFixed(2)}×` : '—',
    r.target ? `${r.target} ${r.met ? 'met' : 'MISSED'}` : '',
  ]);
  const head = ['figure', 'Herald', 'in-run baseline', 'ratio', 'target'];
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)].join('\n');
}
