import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compare, report, type ProviderResult } from '../../bench/compare.js';
import { judge, SCENARIOS, type RunFacts, type Scenario } from '../../bench/compare-scenarios.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { REDIS_URL } from '../helpers/env.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const delivered = SCENARIOS.find((s) => s.key === 'delivered')!;
/** The delivered scenario's expectation on an address that is never delivered: a run must be judged wrong. */
const mislabelled: Scenario = { ...delivered, key: 'mislabelled', title: 'mislabelled', email: () => 'never', deadlineSeconds: () => 3 };

let sandbox: Sandbox;
let results: ProviderResult[];
beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  results = await compare({
    root: ROOT,
    redisUrl: REDIS_URL,
    sandbox,
    email: ['postmark', 'infrai'],
    sms: [],
    scenarios: [delivered, mislabelled],
  });
}, 240_000);
afterAll(() => sandbox?.close());

describe('npm run compare', () => {
  it('judges each provider from what its run left behind', () => {
    expect(results.map((r) => [r.provider, r.row, r.skipped])).toEqual([
      ['postmark', 'email', undefined],
      ['infrai', 'email', undefined],
    ]);
    for (const provider of results) {
      const [ok, wrong] = provider.results;
      expect(ok!.verdict).toMatchObject({ correct: true, notes: [] });
      expect(ok!.verdict.learnedAfterMs).toBeGreaterThanOrEqual(0);
      expect(ok!.messages).toBe(1);
      expect(wrong!.verdict.correct).toBe(false);
      expect(wrong!.verdict.notes.join(' ')).toMatch(/ended sms_(delivered|sent), expected email_delivered/);
    }
    // Each provider's own calls, counted from the sandbox's request log.
    expect(Object.keys(results[0]!.results[0]!.calls)).toEqual(expect.arrayContaining(['postmark.send', 'postmark.details']));
    expect(Object.keys(results[1]!.results[0]!.calls)).toEqual(expect.arrayContaining(['infrai.email.send', 'infrai.email.events']));
    const table = report(results, { seconds: 1, date: '2026-12-01' });
    expect(table).toContain('| postmark | email | 1/2 (wrong: mislabelled)');
    expect(table).toContain('| infrai | email | 1/2 (wrong: mislabelled)');
  });

  it('finds a duplicate from the messages the emulator holds, not from the state alone', () => {
    const run = results[1]!.results[0]!;
    const facts: RunFacts = {
      row: 'email',
      scenario: delivered,
      email: 'delivered@example.com',
      phone: '+12025550100',
      createdAt: 0,
      deadline: 10_000,
      state: 'email_delivered',
      fallback: null,
      events: [],
      emails: [sandbox.emails()[0]!, sandbox.emails()[0]!],
      sms: [],
      requests: [],
      faultApplied: undefined,
      smsSuppressed: false,
    };
    expect(run.verdict.correct).toBe(true);
    expect(judge(facts)).toMatchObject({ correct: false, notes: ['2 emails at the provider (duplicate)'] });
    expect(judge({ ...facts, emails: [sandbox.emails()[0]!], faultApplied: false }).notes).toEqual([
      'the injected send fault never applied (no send role for this emulator in the sandbox)',
    ]);
  });
});
