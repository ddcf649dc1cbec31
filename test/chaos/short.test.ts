import { describe, expect, it } from 'vitest';
import { formatReport, runChaos } from './harness.js';
import { makePlan } from './plan.js';
import { chaosSeed } from './random.js';

/**
 * The short chaos run that CI runs with every `npm test`: fewer notices and faults than
 * `npm run test:chaos`, the same invariants. Its settle bound is generous: a status check that
 * a SIGKILLed worker was running comes back only when BullMQ finds the job stalled (its 30 s
 * lock, then its 30 s stall check), and a slow machine must pass too. It runs three times: with
 * Postmark (status by polling), with SES (status only through its event feed), and with Postmark
 * and Twilio webhooks on, the outbox dropping half of them and repeating or reordering some.
 */
describe.each(['postmark', 'ses', 'postmark-webhooks'] as const)('under fault injection (short run), email through %s', (variant) => {
  const emailProvider = variant === 'ses' ? 'ses' : 'postmark';
  // With webhooks on, half of them lost and some repeated or reordered: polling is the guarantee.
  const webhookFaults = variant === 'postmark-webhooks' ? { drop: 0.5, duplicate: 0.2, reorder: 0.1 } : undefined;
  // Postmark is read by polling; SES only through its event feed (SQS), which the faults must not confuse either.
  it('loses no accepted notice, decides and sends at most once, and logs every change', async () => {
    const seed = chaosSeed();
    console.log(
      `chaos seed ${seed}, ${variant} (replay: CHAOS_SEED=${seed} npx vitest run test/chaos/short.test.ts -t "through ${variant} loses")`,
    );
    const plan = makePlan(seed, {
      notices: 36,
      creationWindowMs: 7_000,
      faultWindowMs: 11_000,
      workers: 2,
      sigkills: 2,
      sigterms: 1,
      redisRestarts: 1,
      providerFaults: 10,
      duplicateJobs: 14,
      emailProvider,
      webhookFaults,
    });
    const report = await runChaos(plan, { settleBoundMs: 90_000 });
    console.log(formatReport(report));
    expect(report.violations).toEqual([]);
    expect(report.notices.notAccepted).toBe(0);
    expect(report.redisRestarts).toHaveLength(1);
    if (webhookFaults) {
      // The webhooks did reach Herald, and some were lost: both paths were taken.
      expect(report.webhooks!.observations).toBeGreaterThan(0);
      expect(report.webhooks!.dropped).toBeGreaterThan(0);
      expect(report.webhooks!.duplicated).toBeGreaterThan(0);
    }
  }, 180_000);
});
