import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../../src/store/policies.js';
import { collectDecisions, replayDecisions } from '../../src/policy/replay.js';
import { parseRules } from '../../src/policy/rules.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';

const current = parseRules('{"version":"v1","regions":{"DE":{"sms":true},"*":{"sms":true}}}', 'v1.json');
const proposed = parseRules(
  '{"version":"v2","regions":{"DE":{"sms":false},"JP":{"sms":true,"timezone":"Asia/Tokyo","quietHours":{"start":"21:00","end":"08:00"}},"*":{"sms":true}}}',
  'v2.json',
);

let seq = 0;
function trail(noticeId: string, region: string, decidedAt: string, extra: Record<string, unknown> = {}): StoredEntry[] {
  const e = (type: string, fields: Record<string, unknown>) =>
    ({ id: `${(seq += 1)}-0`, seq, type, noticeId, at: decidedAt, ...fields }) as StoredEntry;
  return [
    e('notice.accepted', { recipientId: `r-${noticeId}`, hasPhone: true }),
    e('policy.checked', { channel: 'email', outcome: 'allowed', policyVersion: 0 }),
    e('policy.checked', {
      channel: 'sms',
      outcome: 'allowed',
      policyVersion: 0,
      rulesVersion: 'v1',
      region,
      recipientId: `r-${noticeId}`,
      hasPhone: true,
      ...extra,
    }),
    e('fallback.decided', { reason: 'email_deadline_elapsed', decidedAt }),
  ];
}

describe('policy replay', () => {
  it('reports the notices whose outcome a changed rule flips, and only those', async () => {
    const entries = [
      ...trail('n-de', 'DE', '2026-11-29T06:00:00.000Z'),
      ...trail('n-us', 'US', '2026-11-29T06:00:00.000Z'),
      ...trail('n-jp-day', 'JP', '2026-11-29T06:00:00.000Z'), // 15:00 in Tokyo
      ...trail('n-jp-night', 'JP', '2026-11-29T13:30:00.000Z'), // 22:30 in Tokyo
    ];
    // The same entries twice (hot in Redis and in the archive) change nothing.
    const records = await collectDecisions([...entries, ...entries]);
    expect(records).toHaveLength(4);
    const report = await replayDecisions(records, proposed, async () => DEFAULT_POLICY);
    expect(report.examined).toBe(4);
    expect(report.changed.map((c) => c.noticeId).sort()).toEqual(['n-de', 'n-jp-night']);
    const de = report.changed.find((c) => c.noticeId === 'n-de')!;
    expect(de.after).toMatchObject({ outcome: 'region_blocked' });
    expect(de.why).toMatch(/region DE: SMS allowed → region_blocked under rules v2/);
    const night = report.changed.find((c) => c.noticeId === 'n-jp-night')!;
    expect(night.after).toMatchObject({ outcome: 'allowed', sendNotBefore: '2026-11-29T23:00:00.000Z', timingRule: 'quiet_hours' });
  });

  it('reports nothing when the rules do not change', async () => {
    const records = await collectDecisions(trail('n-same', 'DE', '2026-11-29T06:00:00.000Z'));
    expect((await replayDecisions(records, current, async () => DEFAULT_POLICY)).changed).toEqual([]);
  });

  it('skips notices whose trail the period cut', async () => {
    const cut = trail('n-cut', 'DE', '2026-11-29T06:00:00.000Z').slice(3);
    expect(await collectDecisions(cut)).toEqual([]);
  });
});
