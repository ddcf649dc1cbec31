import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { countChecks, layoutChecks, planChecks, planSmsChecks, nextCheckAfter } from '../../src/notice/planner.js';

const S = 1000;
const limits = { minPollIntervalMs: 30 * S, maxChecks: 20 };

describe('the poll planner', () => {
  describe('when the policy of the SPEC example is given (first after 120 s, spaced 180 s, deadline in 600 s)', () => {
    const plan = planChecks(0, 600 * S, { firstCheckAfterSeconds: 120, minCheckIntervalSeconds: 180 }, limits);
    it('starts with the first check, ends at the deadline, and keeps every gap at least the interval', () => {
      expect(plan.ok).toBe(true);
      if (!plan.ok) return;
      expect(plan.checks[0]).toBe(120 * S);
      expect(plan.checks.at(-1)).toBe(600 * S);
      for (let i = 1; i < plan.checks.length; i += 1) {
        expect(plan.checks[i]! - plan.checks[i - 1]!).toBeGreaterThanOrEqual(180 * S);
      }
      expect(plan.checks).toEqual([120 * S, 420 * S, 600 * S]);
    });
  });

  describe('when no policy is given', () => {
    it('plans a few checks for a ten-minute deadline, never closer than the floor', () => {
      const plan = planChecks(0, 600 * S, undefined, limits);
      expect(plan.ok).toBe(true);
      if (!plan.ok) return;
      expect(plan.checks.length).toBeGreaterThanOrEqual(3);
      expect(plan.checks.length).toBeLessThanOrEqual(6);
      expect(plan.checks.at(-1)).toBe(600 * S);
      for (let i = 1; i < plan.checks.length; i += 1) expect(plan.checks[i]! - plan.checks[i - 1]!).toBeGreaterThanOrEqual(30 * S);
    });
    it('checks only at the deadline when it is closer than two floors', () => {
      const plan = planChecks(0, 40 * S, undefined, limits);
      expect(plan).toMatchObject({ ok: true, checks: [40 * S] });
    });
    it('stays within the budget for a day-long deadline', () => {
      const plan = planChecks(0, 86_400 * S, undefined, limits);
      expect(plan.ok && plan.checks.length <= 20).toBe(true);
    });
  });

  describe('when the request breaks a rule', () => {
    it('refuses a first check below the floor', () => {
      expect(planChecks(0, 600 * S, { firstCheckAfterSeconds: 1 }, limits)).toMatchObject({
        ok: false,
        field: 'policy.firstCheckAfterSeconds',
      });
    });
    it('refuses per-second polling', () => {
      expect(planChecks(0, 600 * S, { minCheckIntervalSeconds: 1 }, limits)).toMatchObject({
        ok: false,
        field: 'policy.minCheckIntervalSeconds',
      });
    });
    it('refuses a plan over the budget instead of thinning it', () => {
      const plan = planChecks(0, 86_400 * S, { firstCheckAfterSeconds: 30, minCheckIntervalSeconds: 30 }, limits);
      expect(plan).toMatchObject({ ok: false });
      if (!plan.ok) expect(plan.message).toMatch(/budget of 20/);
    });
    it('refuses a first check that leaves no room before the deadline check', () => {
      expect(planChecks(0, 200 * S, { firstCheckAfterSeconds: 120, minCheckIntervalSeconds: 180 }, limits)).toMatchObject({
        ok: false,
        field: 'policy',
      });
    });
    it('refuses a deadline more than 366 days ahead, and a policy delay longer than that', () => {
      expect(planChecks(0, 367 * 86_400 * S, undefined, limits)).toMatchObject({ ok: false, field: 'deadline' });
      expect(planChecks(0, 600 * S, { firstCheckAfterSeconds: 1e300 }, limits)).toMatchObject({
        ok: false,
        field: 'policy.firstCheckAfterSeconds',
      });
    });
    it('refuses a plan of billions of checks by counting them, without laying them out', () => {
      const plan = planChecks(0, 365 * 86_400 * S, { firstCheckAfterSeconds: 30, minCheckIntervalSeconds: 30 }, limits);
      expect(plan).toMatchObject({ ok: false, field: 'policy.minCheckIntervalSeconds' });
      expect(() => layoutChecks(0, 8_000 * 365 * 86_400 * S, 30 * S, 30 * S)).toThrow(RangeError);
    });
    it('refuses a deadline in the past', () => {
      expect(planChecks(1000, 1000, undefined, limits)).toMatchObject({ ok: false, field: 'deadline' });
    });
  });

  it('counts exactly the checks it lays out', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000_000 }),
        fc.integer({ min: 1, max: 5_000_000 }),
        fc.integer({ min: 1, max: 5_000_000 }),
        (span, first, interval) => {
          fc.pre(countChecks(span, first, interval) <= 1000);
          expect(layoutChecks(0, span, first, interval)).toHaveLength(countChecks(span, first, interval));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('spaces SMS checks from the floor, doubling, within the budget', () => {
    const checks = planSmsChecks(0, { minPollIntervalMs: 30 * S, maxChecks: 3 });
    expect(checks).toEqual([30 * S, 90 * S, 210 * S]);
  });

  it('finds the next check strictly after now', () => {
    expect(nextCheckAfter([10, 20, 30], 20)).toBe(30);
    expect(nextCheckAfter([10, 20, 30], 30)).toBeUndefined();
  });
});
