/**
 * What every email provider's webhooks must show end to end (the web and a worker in processes of
 * their own, the provider's SDK sending through its emulator, which pushes each message's events
 * to the web, signed with the run's key; real Redis): a delivery ends the notice from the webhook,
 * a bounce decides the fallback early, a duplicate is harmless, a dropped webhook leaves the
 * notice to its planned checks. A provider's own file calls `emailWebhookSuite` inside its
 * `describe` and adds what is its own (its signature, its message IDs).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { AnyEntry as StoredEntry } from './entries.js';
import { sleep, testPrefix, waitFor } from './env.js';
import { noticeBody } from './herald.js';
import { startWebhookStack, type WebhookStack } from './webhook-stack.js';

export interface EmailWebhookCase {
  /** HERALD_EMAIL_PROVIDER, and the `provider` label of the webhook metrics. */
  provider: 'sendgrid' | 'mailgun';
  /** A short tag for this suite's addresses, recipients and prefix. */
  tag: string;
  /** The emulator's operations that read a message's status. */
  statusReads: string[];
  /** The bounce webhook: how it is named, and what it records. */
  bounce: { named: string; providerStatus: string; bounceType: string; suppressedAs: string };
  /** Webhook requests a delivered message's events make, each sent twice under `+wh-dup`. */
  duplicatedRequests: number;
}

export interface EmailWebhookSuite {
  stack(): WebhookStack;
  /** A fresh address: `<behaviour>[+<tag>...]+<case tag><n>@example.com`. */
  address(behaviour: string, ...tags: string[]): string;
  /** A fresh fictional number. */
  phone(): string;
  notice(email: string, to: string, deadlineInSeconds: number): ReturnType<typeof noticeBody>;
  label(): number;
  ofType(events: StoredEntry[], type: string): StoredEntry[];
  sentTo(email: string): ReturnType<WebhookStack['sandbox']['emails']>;
  deliveriesOf(messageId: string | undefined): ReturnType<WebhookStack['sandbox']['webhookDeliveries']>;
}

export function emailWebhookSuite(c: EmailWebhookCase): EmailWebhookSuite {
  let stack: WebhookStack;
  let phones = 0;
  let labels = 0;
  beforeAll(async () => {
    stack = await startWebhookStack({ prefix: testPrefix(`${c.tag}-webhooks`), env: { HERALD_EMAIL_PROVIDER: c.provider } });
  });
  afterAll(async () => {
    await stack?.close();
  });

  const suite: EmailWebhookSuite = {
    stack: () => stack,
    address: (behaviour, ...tags) => [behaviour, ...tags, `${c.tag}wh${process.pid}x${++labels}`].join('+') + '@example.com',
    phone: () => `+1${301 + (phones++ % 600)}5550100`,
    notice: (email, to, deadlineInSeconds) =>
      noticeBody({ recipient: { id: `player-${c.tag}wh-${labels}`, email, phone: to }, deadlineInSeconds }),
    label: () => labels,
    ofType: (events, type) => events.filter((e) => e.type === type),
    sentTo: (email) => stack.sandbox.emails().filter((m) => m.to === email),
    deliveriesOf: (messageId) => stack.sandbox.webhookDeliveries().filter((d) => d.messageId === messageId),
  };
  const { address, phone, notice, ofType, sentTo, deliveriesOf } = suite;
  /** The status reads the emulator answered about one address. */
  const statusCalls = (email: string) =>
    stack.sandbox.requests().filter((r) => r.recipient === email && c.statusReads.includes(r.operation)).length;
  const metric = async (line: RegExp): Promise<number> => Number(line.exec((await stack.web.call('GET', '/metrics')).text)?.[1] ?? 0);
  const saved = /^herald_status_checks_saved_total\{channel="email"\} (\d+)/m;
  const duplicates = new RegExp(`^herald_webhook_events_ignored_total\\{provider="${c.provider}",outcome="duplicate"\\} (\\d+)`, 'm');

  it('a signed delivery ends the notice from the webhook: checks saved, no status call after it', async () => {
    const email = address('delivered', '2s');
    const savedBefore = await metric(saved);
    const id = await stack.createNotice(notice(email, phone(), 20));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const events = await stack.events(id);
    const delivered = ofType(events, 'email.observed').filter((e) => e.status === 'delivered');
    expect(delivered).toEqual([expect.objectContaining({ source: 'webhook', providerStatus: 'delivered', event: expect.any(String) })]);
    expect(delivered[0]!.checksSaved).toBeGreaterThan(0);
    expect(ofType(events, 'notice.completed')).toHaveLength(1);
    // The webhook, signed by the emulator, was answered 200.
    const [sent] = sentTo(email);
    expect(deliveriesOf(sent?.messageId).some((d) => d.status === 200)).toBe(true);
    // The plan's first check was due 5 s after creation: past it, no status read was made.
    const calls = statusCalls(email);
    const created = Date.parse(ofType(events, 'notice.accepted')[0]!.at as string);
    await sleep(Math.max(0, created + 7_000 - Date.now()));
    expect(statusCalls(email)).toBe(calls);
    expect(ofType(await stack.events(id), 'email.observed').every((e) => e.source === 'webhook')).toBe(true);
    expect(await metric(saved)).toBeGreaterThanOrEqual(savedBefore + (delivered[0]!.checksSaved as number));
  });

  it(`a ${c.bounce.named} webhook decides the fallback early: one SMS, the address suppressed as ${c.bounce.suppressedAs}`, async () => {
    const to = phone();
    const email = address('bounce', '2s');
    const id = await stack.createNotice(notice(email, to, 30));
    const view = await stack.waitForState(id, ['sms_sent', 'sms_delivered']);
    expect(view.fallback.reason).toBe('email_bounced');
    const events = await stack.events(id);
    expect(ofType(events, 'email.observed').find((e) => e.status === 'bounced')).toMatchObject({
      source: 'webhook',
      providerStatus: c.bounce.providerStatus,
      bounceType: c.bounce.bounceType,
    });
    expect(ofType(events, 'fallback.decided')).toHaveLength(1);
    await waitFor(async () => stack.smsTo(to) > 0, 10_000, 'the SMS');
    expect(stack.smsTo(to)).toBe(1);
    const suppression = await stack.web.call('GET', `/v1/suppressions/email/${encodeURIComponent(email)}`);
    expect(suppression.json).toMatchObject({ source: c.bounce.suppressedAs, noticeId: id });
  });

  it('a duplicated webhook is harmless: one observation of the event, the copy counted as a duplicate', async () => {
    const email = address('delivered', '2s', 'wh-dup');
    const duplicatesBefore = await metric(duplicates);
    const id = await stack.createNotice(notice(email, phone(), 20));
    await stack.waitForState(id, ['email_delivered']);
    const [sent] = sentTo(email);
    await waitFor(
      async () => deliveriesOf(sent?.messageId).filter((d) => d.status === 200).length >= c.duplicatedRequests,
      10_000,
      'both copies of every event',
    );
    const fromWebhooks = ofType(await stack.events(id), 'email.observed').filter((e) => e.source === 'webhook');
    expect(fromWebhooks).toHaveLength(1);
    expect(fromWebhooks[0]).toMatchObject({ status: 'delivered' });
    expect(ofType(await stack.events(id), 'notice.completed')).toHaveLength(1);
    expect(await metric(duplicates)).toBeGreaterThan(duplicatesBefore);
  });

  it('a notice whose webhook was dropped still ends email_delivered, through its planned checks', async () => {
    const email = address('delivered', '1s', 'wh-drop');
    const id = await stack.createNotice(notice(email, phone(), 8));
    const view = await stack.waitForState(id, ['email_delivered', 'sms_pending', 'sms_sent', 'sms_delivered']);
    expect(view.state).toBe('email_delivered');
    const observed = ofType(await stack.events(id), 'email.observed');
    expect(observed.find((e) => e.status === 'delivered')).toMatchObject({ source: 'poll' });
    expect(observed.some((e) => e.source === 'webhook')).toBe(false);
    const [sent] = sentTo(email);
    const dropped = deliveriesOf(sent?.messageId);
    expect(dropped.length).toBeGreaterThan(0);
    expect(dropped.every((d) => d.faults.includes('drop') && d.status === undefined)).toBe(true);
    expect(statusCalls(email)).toBeGreaterThan(0);
  });

  return suite;
}
