import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

/** The operator's files in `ops/`: the Grafana dashboard and the Prometheus alert rules. */
export const OPS = {
  dashboard: fileURLToPath(new URL('../../ops/grafana/herald.json', import.meta.url)),
  rules: fileURLToPath(new URL('../../ops/prometheus/herald-rules.yml', import.meta.url)),
  rulesTests: fileURLToPath(new URL('../../ops/prometheus/herald-rules.test.yml', import.meta.url)),
};

export interface DashboardPanel {
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  targets?: { expr: string; refId: string; datasource?: { type: string; uid: string } }[];
}

/** The dashboard's panels, parsed from its JSON. */
export function dashboardPanels(): DashboardPanel[] {
  return (JSON.parse(readFileSync(OPS.dashboard, 'utf8')) as { panels: DashboardPanel[] }).panels;
}

/** Every PromQL expression of the dashboard and of the alert rules. */
export function opsExpressions(): { dashboard: string[]; rules: string[] } {
  const rules = parse(readFileSync(OPS.rules, 'utf8')) as { groups: { rules: { expr: string }[] }[] };
  return {
    dashboard: dashboardPanels().flatMap((panel) => (panel.targets ?? []).map((target) => target.expr)),
    rules: rules.groups.flatMap((group) => group.rules.map((rule) => String(rule.expr))),
  };
}

/** The Herald metric names the expressions use. */
export function metricNamesIn(expressions: string[]): string[] {
  return [...new Set(expressions.flatMap((expr) => expr.match(/\bherald_[a-z0-9_]+/g) ?? []))].sort();
}

/**
 * Whether a Prometheus text exposition has the series `name`: a family of that name, or the
 * `_bucket`, `_count` or `_sum` series of a histogram family.
 */
export function exposes(text: string, name: string): boolean {
  if (new RegExp(`^# TYPE ${name} `, 'm').test(text)) return true;
  const histogram = /^(.+)_(bucket|count|sum)$/.exec(name);
  return histogram !== null && new RegExp(`^# TYPE ${histogram[1]} histogram$`, 'm').test(text);
}
