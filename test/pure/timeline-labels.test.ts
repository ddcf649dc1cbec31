import { describe, expect, it } from 'vitest';
import { fieldLabel, renderTimeline } from '../../src/http/timeline.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';

describe('the timeline labels an entry field', () => {
  it('in words, with the unit a name ends in', () => {
    expect(fieldLabel('providerTimeoutMs')).toBe('provider timeout (ms)');
    expect(fieldLabel('smsIdempotencyKey')).toBe('sms idempotency key');
    expect(fieldLabel('contentSha256')).toBe('content sha256');
    expect(fieldLabel('reason')).toBe('reason');
    expect(fieldLabel('lastEmailStatus')).toBe('last email status');
  });
});

describe('the timeline marks where each observation came from', () => {
  const at = (s: number) => new Date(Date.UTC(2026, 10, 1, 12, 0, s)).toISOString();
  const view = {
    id: 'ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa',
    state: 'email_delivered',
    category: 'terms_change',
    recipientId: 'player-42',
    createdAt: at(0),
    deadline: at(50),
    policyVersion: 0,
    plannedChecks: [at(10), at(30), at(50)],
    email: { status: 'delivered', providerMessageId: 'm-1', lastObservedAt: at(12), nextCheckAt: null },
    fallback: null,
    sms: null,
  } as unknown as Parameters<typeof renderTimeline>[0];
  const entry = (seq: number, fields: Record<string, unknown>) =>
    ({ id: `1-${seq}`, seq, at: at(seq), noticeId: view.id, ...fields }) as unknown as StoredEntry;
  const html = renderTimeline(view, [
    entry(1, { type: 'notice.accepted', providerTimeoutMs: 5000 }),
    entry(10, { type: 'email.observed', status: 'pending', providerStatus: 'Sent', nextCheckAt: at(30), source: 'poll' }),
    entry(12, {
      type: 'email.observed',
      status: 'delivered',
      providerStatus: 'Delivered',
      nextCheckAt: null,
      source: 'webhook',
      checksSaved: 2,
      event: 'ev',
    }),
    entry(13, { type: 'email.observed', status: 'pending', providerStatus: 'Sent', nextCheckAt: null }),
  ]).value;

  it('with a webhook or poll badge on each observation, and the checks a webhook saved', () => {
    expect(html.match(/<span class="badge badge-(poll|webhook)" data-source="(poll|webhook)">/g)).toEqual([
      '<span class="badge badge-poll" data-source="poll">',
      '<span class="badge badge-webhook" data-source="webhook">',
      // An observation recorded before sources were: a poll.
      '<span class="badge badge-poll" data-source="poll">',
    ]);
    expect(html).toContain('<span class="badge badge-saved" data-checks-saved="2">2 checks saved</span>');
    expect(html).toMatch(/data-marker="email-observed" data-status="delivered" data-source="webhook"><circle [^>]*class="webhook-ring"/);
    expect(html).toMatch(
      /id="observations" data-poll="2" data-webhook="1" data-checks-saved="2">2 from status checks \(poll\), 1 from provider webhooks; 2 planned checks saved/,
    );
  });
});
