import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { dashboardPanels, metricNamesIn, OPS, opsExpressions } from '../helpers/ops-files.js';
import { hasPromtool, promtool } from '../helpers/promtool.js';

describe.skipIf(!hasPromtool)('the Prometheus alert rules in ops/prometheus', () => {
  it('pass promtool check rules', async () => {
    const checked = await promtool(['check', 'rules', OPS.rules]);
    expect(checked.output).toMatch(/SUCCESS: 7 rules found/);
    expect(checked.code, checked.output).toBe(0);
  });

  it('fire on series as Herald exports them, after their `for`, and stay quiet on a healthy service (promtool test rules)', async () => {
    const tested = await promtool(['test', 'rules', OPS.rulesTests]);
    expect(tested.output).toMatch(/SUCCESS/);
    expect(tested.code, tested.output).toBe(0);
  });

  it('alert on fallback rate, deadline lateness, oldest waiting job, mirror lag, provider error rate and undelivered caller events', () => {
    const names = metricNamesIn(opsExpressions().rules);
    for (const series of [
      'herald_fallback_decisions_total',
      'herald_fallback_decision_lag_seconds_bucket',
      'herald_queue_oldest_waiting_seconds',
      'herald_log_oldest_unarchived_seconds',
      'herald_provider_call_duration_seconds_count',
      'herald_event_oldest_undelivered_seconds',
    ])
      expect(names).toContain(series);
  });
});

describe('the Grafana dashboard in ops/grafana', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-dashboard-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is JSON whose every query panel reads the dashboard datasource', () => {
    const panels = dashboardPanels().filter((panel) => panel.type !== 'row');
    expect(panels.length).toBeGreaterThanOrEqual(15);
    for (const panel of panels) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
    }
  });

  it.skipIf(!hasPromtool)('has queries that are valid PromQL (promtool checks them as recording rules)', async () => {
    // Grafana's interval variables become a fixed range: PromQL knows no variables.
    const exprs = opsExpressions().dashboard.map((expr) => expr.replaceAll('$__rate_interval', '5m'));
    const file = join(dir, 'dashboard-queries.yml');
    writeFileSync(
      file,
      stringify({ groups: [{ name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `herald:dashboard:query_${i}`, expr })) }] }),
    );
    const checked = await promtool(['check', 'rules', file]);
    expect(checked.code, checked.output).toBe(0);
    expect(checked.output).toContain(`SUCCESS: ${exprs.length} rules found`);
  });
});
