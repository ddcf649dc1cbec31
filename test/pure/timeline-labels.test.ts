import { describe, expect, it } from 'vitest';
import { fieldLabel, renderTimeline, TIMELINE_CSS } from '../../src/http/timeline.js';
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

const at = (s: number) => new Date(Date.UTC(2026, 10, 1, 12, 0, s)).toISOString();
type View = Parameters<typeof renderTimeline>[0];

/** The timeline page of a notice of deadline at(50) and checks at 10, 30 and 50 s, with these fields and entries. */
function timelineOf(fields: Record<string, unknown>, entries: [number, Record<string, unknown>][]): string {
  const view = {
    category: 'terms_change',
    createdAt: at(0),
    deadline: at(50),
    policyVersion: 0,
    plannedChecks: [at(10), at(30), at(50)],
    sms: null,
    ...fields,
  } as unknown as View;
  const entry = ([seq, entryFields]: [number, Record<string, unknown>]) =>
    ({ id: `1-${seq}`, seq, at: at(seq), noticeId: view.id, ...entryFields }) as unknown as StoredEntry;
  return renderTimeline(view, entries.map(entry)).value;
}

describe('the timeline marks where each observation came from', () => {
  const html = timelineOf(
    {
      id: 'ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa',
      state: 'email_delivered',
      recipientId: 'player-42',
      email: { status: 'delivered', providerMessageId: 'm-1', lastObservedAt: at(12), nextCheckAt: null },
      fallback: null,
    },
    [
      [1, { type: 'notice.accepted', providerTimeoutMs: 5000 }],
      [10, { type: 'email.observed', status: 'pending', providerStatus: 'Sent', nextCheckAt: at(30), source: 'poll' }],
      [
        12,
        {
          type: 'email.observed',
          status: 'delivered',
          providerStatus: 'Delivered',
          nextCheckAt: null,
          source: 'webhook',
          checksSaved: 2,
          event: 'ev',
        },
      ],
      [13, { type: 'email.observed', status: 'pending', providerStatus: 'Sent', nextCheckAt: null }],
    ],
  );

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

describe('the timeline of a blocked notice', () => {
  const html = timelineOf(
    {
      id: 'ntc_00bbbbbbbbbbbbbbbbbbbbbbbbbb',
      state: 'blocked',
      recipientId: 'player-43',
      email: { status: 'pending', providerMessageId: 'm-2', lastObservedAt: at(50), nextCheckAt: null },
      fallback: { reason: 'email_deadline_elapsed', decidedAt: at(51) },
    },
    [
      [1, { type: 'notice.accepted', providerTimeoutMs: 5000 }],
      [50, { type: 'email.observed', status: 'pending', providerStatus: 'Sent', nextCheckAt: null, source: 'poll' }],
      [51, { type: 'policy.checked', channel: 'sms', outcome: 'no_consent', policyVersion: 0 }],
      [52, { type: 'fallback.blocked', reason: 'sms_consent_missing', fallbackReason: 'email_deadline_elapsed', decidedAt: at(51) }],
      [53, { type: 'notice.completed', state: 'blocked' }],
    ],
  );

  it('names the blocked reason, whole, in the header, with the fallback it stopped', () => {
    const header = /<header class="notice">([\s\S]*?)<\/header>/.exec(html)![1]!;
    expect(header).toMatch(
      /<p class="blocked" id="blocked-reason" data-reason="sms_consent_missing">Blocked: <code>sms_consent_missing<\/code>\. The fallback to SMS \(<code>email_deadline_elapsed<\/code>\)/,
    );
    expect(header).toContain('<dd id="state">blocked</dd>');
  });

  it('lets the header wrap instead of clipping it', () => {
    const rules = [...TIMELINE_CSS.matchAll(/([^{}]+)\{([^}]*)\}/g)].filter(([, selector]) => /header|\.blocked|\.meta|h1/.test(selector!));
    expect(rules.length).toBeGreaterThan(0);
    for (const [, selector, body] of rules) expect(body, selector).not.toMatch(/ellipsis|nowrap|overflow:\s*hidden|overflow:\s*clip/);
  });

  it('draws the decision label in the chart leftwards when the decision is near the end', () => {
    expect(html).toMatch(
      /data-reason="sms_consent_missing">.*<text x="[\d.]+" y="[\d.]+" class="reason" text-anchor="end">blocked: sms_consent_missing<\/text>/,
    );
  });

  it('has no blocked line for a notice that was not blocked', () => {
    const delivered = timelineOf(
      {
        id: 'ntc_00cccccccccccccccccccccccccc',
        state: 'sms_delivered',
        recipientId: 'player-44',
        email: { status: 'pending', providerMessageId: 'm-3', lastObservedAt: at(50), nextCheckAt: null },
        fallback: { reason: 'email_deadline_elapsed', decidedAt: at(51) },
      },
      [[1, { type: 'notice.accepted' }]],
    );
    expect(delivered).not.toContain('id="blocked-reason"');
  });
});
