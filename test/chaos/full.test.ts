import { describe, expect, it } from 'vitest';
import { formatReport, runChaos } from './harness.js';
import { makePlan } from './plan.js';
import { chaosSeed } from './random.js';

/** `npm run test:chaos`: the long seeded run over hundreds of notices. Not part of `npm test`. */
describe('under fault injection (full run)', () => {
  it('loses no accepted notice, decides and sends at most once, and logs every change', async () => {
    const seed = chaosSeed();
    console.log(`chaos seed ${seed} (replay: CHAOS_SEED=${seed} npm run test:chaos)`);
    const plan = makePlan(seed, {
      notices: 240,
      creationWindowMs: 40_000,
      faultWindowMs: 55_000,
      workers: 3,
      sigkills: 8,
      sigterms: 3,
      redisRestarts: 2,
      providerFaults: 60,
      duplicateJobs: 120,
      unconfirmedSms: true,
    });
    const report = await runChaos(plan, { settleBoundMs: 120_000 });
    console.log(formatReport(report));
    expect(report.violations).toEqual([]);
    expect(report.notices.planned).toBeGreaterThanOrEqual(200);
    expect(report.notices.notAccepted).toBe(0);
    expect(report.redisRestarts.length).toBeGreaterThanOrEqual(1);
  }, 600_000);
});
