import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { cleanUp, noticeBody } from '../helpers/herald.js';
import { hasPromtool, promtool } from '../helpers/promtool.js';
import { WebProcess } from '../helpers/web-process.js';

/** The value of an unlabelled sample in a Prometheus text exposition, undefined when absent. */
const sample = (text: string, name: string) => {
  const found = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return found ? Number(found[1]) : undefined;
};
const scrape = async (web: WebProcess) => (await web.call('GET', '/metrics', undefined, { headers: { authorization: '' } })).text;

describe('web replicas on one prefix: the cluster-wide series come from one of them', () => {
  const prefix = testPrefix('mowner');
  const env = testEnv(prefix);
  let a: WebProcess;
  let b: WebProcess;
  let c: WebProcess | undefined;
  beforeAll(async () => {
    [a, b] = await Promise.all([new WebProcess(env).start(), new WebProcess(env).start()]);
    const created = await a.call('POST', '/v1/notices', noticeBody(), { headers: { 'idempotency-key': 'owner-1' } });
    expect(created.status, created.text).toBe(202);
  }, 90_000);
  afterAll(async () => {
    await Promise.all([a, b, c].map((web) => web?.stop('SIGKILL')));
    await cleanUp(prefix);
  });

  it('exports them on exactly one scrape, with herald_cluster_metrics_owner summing to 1 and the build on both', async () => {
    const [first, second] = [await scrape(a), await scrape(b)];
    expect(sample(first, 'herald_cluster_metrics_owner')).toBe(1);
    expect(sample(second, 'herald_cluster_metrics_owner')).toBe(0);
    // Summed over the replicas, a counter of all notices counts each notice once.
    expect((sample(first, 'herald_notices_accepted_total') ?? 0) + (sample(second, 'herald_notices_accepted_total') ?? 0)).toBe(1);
    expect(second).not.toMatch(/^herald_(queue_jobs|live_notices|log_unarchived_entries|events_undelivered)\b/m);
    for (const text of [first, second]) {
      expect(text).toMatch(/^herald_build_info\{version="[^"]+",node="[^"]+"\} 1$/m);
      expect(text).toMatch(/^herald_web_nodejs_eventloop_lag_seconds /m);
    }
    // Scraped again, each keeps its part.
    expect(sample(await scrape(b), 'herald_cluster_metrics_owner')).toBe(0);
    expect(sample(await scrape(a), 'herald_notices_accepted_total')).toBe(1);
  });

  it.skipIf(!hasPromtool)("passes promtool check metrics on the owner's scrape and on the other's", async () => {
    for (const text of [await scrape(a), await scrape(b)]) {
      const checked = await promtool(['check', 'metrics'], text);
      expect(checked.output, checked.output).toBe('');
      expect(checked.code).toBe(0);
    }
  });

  it("hands them over at the other's next scrape when the owner shuts down (SIGTERM releases its lease)", async () => {
    await a.stop('SIGTERM');
    const text = await waitFor(
      async () => {
        const text = await scrape(b);
        return sample(text, 'herald_cluster_metrics_owner') === 1 && text;
      },
      10_000,
      'the other replica to take the cluster series over',
    );
    expect(sample(text, 'herald_notices_accepted_total')).toBe(1);
  });

  it('hands them over within the lease when the owner is killed', async () => {
    c = await new WebProcess(env).start();
    expect(sample(await scrape(b), 'herald_cluster_metrics_owner')).toBe(1);
    expect(sample(await scrape(c), 'herald_cluster_metrics_owner')).toBe(0);
    await b.stop('SIGKILL');
    const killedAt = Date.now();
    const text = await waitFor(
      async () => {
        const text = await scrape(c!);
        return sample(text, 'herald_cluster_metrics_owner') === 1 && text;
      },
      40_000,
      'the surviving replica to take the cluster series over',
    );
    expect(sample(text, 'herald_notices_accepted_total')).toBe(1);
    // Not before the killed owner's lease ran out (15 s from its last renewal, at most 5 s before the kill).
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(5_000);
  }, 60_000);
});
