import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli.js';
import { iso, ManualClock } from '../../src/clock.js';
import type { NoticeEngine } from '../../src/notice/engine.js';
import { loadRules } from '../../src/policy/rules.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { engineUnderTest } from '../helpers/engine.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const prefix = testPrefix('quiet');
const RULES = new URL('../fixtures/rules.json', import.meta.url).pathname;
// 22:30 in Tokyo: inside the JP quiet hours (21:00–08:00), which end at 23:00 UTC.
const LATE_EVENING_JST = Date.parse('2026-11-29T13:30:00Z');
const QUIET_ENDS = Date.parse('2026-11-29T23:00:00Z');
const clock = new ManualClock(LATE_EVENING_JST);
let sandbox: Sandbox;
let web: WebUnderTest;
let engine: NoticeEngine;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, indexLagMs: 0 });
  web = await startWebUnderTest(testConfig(prefix, { HERALD_MIN_POLL_INTERVAL_MS: '30000', HERALD_RULES_FILE: RULES }), clock);
  engine = engineUnderTest(web, sandbox, clock, { rules: loadRules(RULES) });
});
afterAll(async () => {
  await web.close();
  await sandbox.close();
  await cleanUp(prefix);
});

let n = 0;
/** Accepts a notice at the clock's time, sends its email, and runs its deadline step at the deadline. */
async function fallBack(recipient: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<string> {
  clock.set(LATE_EVENING_JST);
  const res = await web.call(
    'POST',
    '/v1/notices',
    noticeBody({ recipient: { id: `q${(n += 1)}`, ...recipient }, deadlineInSeconds: 60, ...extra }),
  );
  expect(res.statusCode).toBe(202);
  const id = res.json().id as string;
  await engine.sendEmail(id);
  clock.set(Date.parse(res.json().deadline));
  await engine.runDeadline(id);
  return id;
}

const events = (id: string) => web.store.events(id);

describe('quiet hours', () => {
  it('record the decision at once with sendNotBefore, and send the SMS when the window opens, from the regional sender', async () => {
    const phone = '+819012340001';
    const id = await fallBack({ email: 'never@example.com', phone, region: 'JP' });
    const decided = (await events(id)).find((e) => e.type === 'fallback.decided')!;
    expect(decided).toMatchObject({ reason: 'email_deadline_elapsed', sendNotBefore: iso(QUIET_ENDS), timingRule: 'quiet_hours' });
    expect((await events(id)).find((e) => e.type === 'policy.checked' && e.channel === 'sms')).toMatchObject({
      outcome: 'allowed',
      rulesVersion: '2026-11-01',
      region: 'JP',
      policyVersion: 0,
    });

    clock.set(QUIET_ENDS - 1000);
    expect(await engine.sendSms(id)).toMatchObject({ kind: 'retry', at: QUIET_ENDS });
    expect(sandbox.sms().filter((m) => m.to === phone)).toHaveLength(0);

    clock.set(QUIET_ENDS);
    expect((await engine.sendSms(id)).note).toBe('sms accepted');
    const sent = sandbox.sms().filter((m) => m.to === phone);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.from).toBe('+815000000000');
    // The email status was read once more just before the SMS left.
    const types = (await events(id)).map((e) => e.type);
    expect(types.slice(types.indexOf('fallback.decided') + 1)).toEqual(['email.observed', 'sms.requested', 'sms.accepted']);
  });

  it('give way to a compliance deadline that would pass before the window opens, and say which rule won', async () => {
    const phone = '+819012340002';
    const id = await fallBack({ email: 'never@example.com', phone, region: 'JP' }, { complianceDeadline: '2026-11-29T14:00:00Z' });
    const decided = (await events(id)).find((e) => e.type === 'fallback.decided')!;
    expect(decided).toMatchObject({ timingRule: 'compliance_deadline', complianceDeadline: '2026-11-29T14:00:00.000Z' });
    expect(decided.sendNotBefore).toBeUndefined();
    // Nothing makes it wait: the deadline step sent it.
    expect((await web.store.get(id))!.state).toBe('sms_sent');
    expect(sandbox.sms().filter((m) => m.to === phone)).toHaveLength(1);
    expect((await engine.sendSms(id)).note).toBe('state is sms_sent');
  });

  it('cancel the waiting SMS when the email is delivered meanwhile', async () => {
    const phone = '+819012340003';
    const id = await fallBack({ email: 'delivered+2s@example.com', phone, region: 'JP' });
    expect((await web.store.get(id))!.state).toBe('sms_pending');
    await new Promise((resolve) => setTimeout(resolve, 2300)); // the emulator delivers the email now
    clock.set(QUIET_ENDS);
    await engine.sendSms(id);
    expect((await web.store.get(id))!.state).toBe('email_delivered');
    expect((await events(id)).find((e) => e.type === 'sms.canceled')).toMatchObject({ reason: 'email_delivered_late' });
    expect(sandbox.sms().filter((m) => m.to === phone)).toHaveLength(0);
  });
});

describe('regional rules', () => {
  it('end a fallback in a region without SMS as blocked with region_blocked', async () => {
    const id = await fallBack({ email: 'never@example.com', phone: '+4915112345678', region: 'DE' });
    expect((await web.store.get(id))!.state).toBe('blocked');
    const all = await events(id);
    expect(all.find((e) => e.type === 'policy.checked' && e.channel === 'sms')).toMatchObject({
      outcome: 'region_blocked',
      rulesVersion: '2026-11-01',
    });
    expect(all.find((e) => e.type === 'fallback.blocked')).toMatchObject({ reason: 'region_blocked' });
  });

  it('take the notice’s region over the recipient policy’s, and the policy’s when the notice has none', async () => {
    await web.call('PUT', '/v1/recipients/traveller/policy', { consent: { email: true, sms: true }, region: 'DE' });
    const fromNotice = await fallBack({ id: 'traveller', email: 'never@example.com', phone: '+12165550100', region: 'US' });
    // Allowed, with nothing to wait for: the deadline step sent it.
    expect((await web.store.get(fromNotice))!.state).toBe('sms_sent');
    const fromPolicy = await fallBack({ id: 'traveller', email: 'never@example.com', phone: '+12165550100' });
    expect((await web.store.get(fromPolicy))!.state).toBe('blocked');
    expect((await events(fromPolicy)).find((e) => e.type === 'policy.checked' && e.channel === 'sms')).toMatchObject({
      region: 'DE',
      policyVersion: 1,
    });
  });
});

describe('herald policy replay', () => {
  it('reports the recorded decisions a proposed rules file flips, and only those', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-replay-'));
    const proposed = join(dir, 'proposed.yaml');
    // Germany opens SMS; Japan drops its quiet hours.
    writeFileSync(proposed, 'version: "2026-12-01"\nregions:\n  JP: { sms: true }\n  DE: { sms: true }\n  "*": { sms: true }\n');
    const out: string[] = [];
    const sink = (into: string[]) => new Writable({ write: (chunk, _e, done) => (into.push(String(chunk)), done()) });
    const code = await runCli(['policy', 'replay', '--rules', proposed, '--from', '1h', '--json'], {
      stdout: sink(out),
      stderr: sink([]),
      env: {
        REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        HERALD_PREFIX: prefix,
        HERALD_API_KEYS: 'replay-test-key-0123456789',
        HERALD_ARCHIVE_URL: `file://${dir}/archive`,
      },
      now: () => Date.now() + 60_000,
    });
    expect(code).toBe(0);
    const report = JSON.parse(out.join(''));
    expect(report.rulesVersion).toBe('2026-12-01');
    const decided = await Promise.all(
      (await web.redis.keys(`${prefix}:{s*}:notice:*`)).map(async (key) => web.store.get(key.split(':notice:')[1]!)),
    );
    const withDecision = decided.filter((n) => n?.fallbackReason);
    expect(report.examined).toBe(withDecision.length);
    // What flips: the Japanese notices that waited for quiet hours, and the German ones that were blocked.
    const expected = withDecision
      .filter((n) => n!.smsSendNotBefore !== undefined || n!.state === 'blocked')
      .map((n) => n!.id)
      .sort();
    expect(expected.length).toBeGreaterThanOrEqual(4);
    expect(report.changed.map((c: { noticeId: string }) => c.noticeId).sort()).toEqual(expected);
    const blocked = report.changed.find((c: { before: { outcome: string } }) => c.before.outcome === 'region_blocked');
    expect(blocked.why).toMatch(/region DE: SMS region_blocked → allowed under rules 2026-12-01/);
  });
});
