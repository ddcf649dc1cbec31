import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli.js';
import { plainRedis, testPrefix } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';

const redis = plainRedis();
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    prefix: testPrefix('keep'),
    env: { HERALD_POLICY_VERSIONS_KEPT: '3', HERALD_SUPPRESSIONS_MAX: '2' },
  });
});
afterAll(async () => {
  await stack.close();
  redis.disconnect();
});

const putPolicy = async (recipientId: string, sms: boolean) => {
  const res = await stack.web.call('PUT', `/v1/recipients/${recipientId}/policy`, { consent: { email: true, sms } });
  expect(res.statusCode).toBe(200);
  return res.json().version as number;
};

async function replay(args: string[]): Promise<any> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-keep-'));
  const rules = join(dir, 'rules.yaml');
  writeFileSync(rules, 'version: "2026-12-01"\nregions:\n  "*": { sms: true }\n');
  const out: string[] = [];
  const sink = (into: string[]) => new Writable({ write: (chunk, _e, done) => (into.push(String(chunk)), done()) });
  const code = await runCli(['policy', 'replay', '--rules', rules, '--from', '1h', '--json', ...args], {
    stdout: sink(out),
    stderr: sink([]),
    env: stack.env,
    now: () => Date.now() + 60_000,
  });
  expect(code).toBe(0);
  return JSON.parse(out.join(''));
}

describe('recipient policy versions (HERALD_POLICY_VERSIONS_KEPT=3)', () => {
  it('keeps the last three versions; numbering goes on; the current policy is the last', async () => {
    for (let i = 1; i <= 5; i += 1) expect(await putPolicy('keeper', i % 2 === 0)).toBe(i);
    const hash = await redis.hgetall(stack.web.store.keys.recipientPolicy('keeper'));
    expect(
      Object.keys(hash)
        .filter((field) => /^v\d+$/.test(field))
        .sort(),
    ).toEqual(['v3', 'v4', 'v5']);
    const current = (await stack.web.call('GET', '/v1/recipients/keeper/policy')).json();
    expect(current).toMatchObject({ version: 5, consent: { email: true, sms: false } });
  });

  it('herald policy replay lists a decision whose policy version was dropped instead of replaying it against a stand-in', async () => {
    // SMS consent withdrawn in version 1: the fallback is blocked (sms_consent_missing).
    expect(await putPolicy('replayed', false)).toBe(1);
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'replayed', email: 'never@example.com', phone: '+12025550100' }, deadlineInSeconds: 1 }),
    );
    const view = await stack.waitForState(id, ['blocked']);
    expect(view.policyVersion).toBe(1);

    const kept = await replay([]);
    expect(kept.policyVersionDropped).toEqual([]);
    expect(kept.changed.map((c: { noticeId: string }) => c.noticeId)).not.toContain(id);

    for (let i = 0; i < 3; i += 1) await putPolicy('replayed', false);
    const dropped = await replay([]);
    expect(dropped.policyVersionDropped).toEqual([{ noticeId: id, recipientId: 'replayed', policyVersion: 1 }]);
    expect(dropped.examined).toBe(kept.examined - 1);
    expect(dropped.changed.map((c: { noticeId: string }) => c.noticeId)).not.toContain(id);

    // Against today's policies every decision is replayed.
    const current = await replay(['--current-policies']);
    expect(current.policyVersionDropped).toEqual([]);
    expect(current.examined).toBe(kept.examined);
  });
});

describe('the suppression list bound (HERALD_SUPPRESSIONS_MAX=2)', () => {
  const add = (channel: string, address: string, reason = 'asked us') =>
    stack.web.call('POST', '/v1/suppressions', { channel, address, reason });

  it('refuses a new manual address when the channel holds two, with 507 suppression_list_full, and stores nothing', async () => {
    expect((await add('email', 'one@example.com')).statusCode).toBe(201);
    expect((await add('email', 'two@example.com')).statusCode).toBe(201);
    const full = await add('email', 'three@example.com');
    expect(full.statusCode).toBe(507);
    expect(full.json().error).toMatchObject({ code: 'suppression_list_full', details: { channel: 'email', max: 2 } });
    expect((await stack.web.call('GET', '/v1/suppressions/email/three@example.com')).statusCode).toBe(404);

    // An address already listed may still be updated; the other channel has its own bound.
    const again = await add('email', 'ONE@example.com', 'asked again');
    expect(again.statusCode).toBe(201);
    expect((await stack.web.call('GET', '/v1/suppressions/email/one@example.com')).json().reason).toBe('asked again');
    expect((await add('sms', '+12025550199')).statusCode).toBe(201);

    // Lifting one makes room.
    expect((await stack.web.call('DELETE', '/v1/suppressions/email/two@example.com')).statusCode).toBe(204);
    expect((await add('email', 'three@example.com')).statusCode).toBe(201);
  });

  it('still records a provider opt-out when the list is full: Herald never forgets a STOP', async () => {
    expect((await add('sms', '+12025550198')).statusCode).toBe(201);
    expect((await add('sms', '+12025550197')).statusCode).toBe(507);
    // The emulator answers 21610 (opted out) for numbers ending in 03.
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'stopped', email: 'never@example.com', phone: '+12035550103' }, deadlineInSeconds: 1 }),
    );
    await stack.waitForState(id, ['sms_failed']);
    const optOut = await stack.web.call('GET', '/v1/suppressions/sms/+12035550103');
    expect(optOut.statusCode).toBe(200);
    expect(optOut.json()).toMatchObject({ source: 'twilio_opt_out', noticeId: id });
    expect(await redis.hlen(`${stack.config.prefix}:{sup}:sms`)).toBe(3);
  });
});
