import { describe, expect, it } from 'vitest';
import { expandCounters, metricIncrements } from '../../src/store/metrics.js';
import { entryOf } from '../helpers/entries.js';

/** What a metrics hash holds after the script applied these increments (HINCRBY each pair). */
function applied(...increments: (string | number)[][]): Record<string, string> {
  const hash: Record<string, number> = {};
  for (const list of increments) {
    for (let i = 0; i < list.length; i += 2) hash[list[i] as string] = (hash[list[i] as string] ?? 0) + Number(list[i + 1]);
  }
  return Object.fromEntries(Object.entries(hash).map(([field, n]) => [field, String(n)]));
}

describe('metric increments', () => {
  const delivered = metricIncrements(
    [
      entryOf('email.observed', { providerStatus: 'Delivered', status: 'delivered' }),
      entryOf('notice.completed', { state: 'email_delivered', cost: { byChannel: { email: 0.0015 } }, checks: { email: 2, sms: 0 } }),
    ],
    'email_delivered',
  );

  it('adds every counter a transition adds 1 to with a single field, and the rest one by one', () => {
    const fields = delivered.filter((_, i) => i % 2 === 0) as string[];
    expect(fields.filter((field) => field.startsWith('&'))).toHaveLength(1);
    // spend (1500 millionths) and the checks sum (2) are not ones.
    expect(fields.filter((field) => !field.startsWith('&')).sort()).toEqual(['checks_sum', 'spend|email']);
  });

  it('reads back as the separate counters, summed over transitions', () => {
    const accepted = metricIncrements([entryOf('email.accepted')], 'email_sent');
    const counters = new Map<string, number>();
    expandCounters(applied(delivered, delivered, accepted), counters);
    expect(Object.fromEntries(counters)).toEqual({
      'state|email_delivered': 2,
      'entry|email.observed': 2,
      'poll|email|delivered': 2,
      'call|email|status|ok': 2,
      'entry|notice.completed': 2,
      'spend|email': 3000,
      'checks_le|2': 2,
      checks_sum: 4,
      checks_count: 2,
      'state|email_sent': 1,
      'entry|email.accepted': 1,
      'call|email|send|ok': 1,
    });
  });
});
