import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { sleep } from '../helpers/env.js';
import { startEngineStack, type EngineStack } from '../helpers/engine.js';
import { smsSearchEndsAt } from '../../src/notice/planner.js';

/**
 * The schedule the protocol model found (model/README.md): an SMS request times out, Twilio
 * carries it out a moment later, and a retry that searched at once found nothing and sent a
 * second SMS. An attempt in doubt is now searched for only once the settle margin has passed.
 * The provider's lateness is real time (the emulator's); Herald's steps run on the manual clock.
 */
describe('an SMS send in doubt whose message the provider creates after the client gave up', () => {
  let stack: EngineStack;
  beforeAll(async () => {
    stack = await startEngineStack('in-doubt');
  });
  afterAll(() => stack.close());

  it('is searched for only after the settle margin, found, and never sent twice', async () => {
    const { web, engine, clock, sandbox } = stack;
    const phone = '+12025550188';
    const res = await web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'doubt-1', email: 'never@example.com', phone } }));
    const id = res.json().id as string;
    const deadline = Date.parse(res.json().deadline);
    expect((await engine.sendEmail(id)).note).toBe('email accepted');
    clock.set(deadline);

    // The deadline step decides and sends the SMS. Twilio takes the request, answers nothing
    // within the provider timeout (1 s here), and creates the message 1.5 s after it arrived;
    // the notice's job comes back for the send in doubt.
    sandbox.injectFault({ operation: 'twilio.create', mode: 'hang_then_accept', acceptAfterMs: 1_500, match: phone });
    const first = await engine.runDeadline(id);
    expect(first.note).toMatch(/^fallback decided: email_deadline_elapsed; sms send: timeout; the sms is sent at /);
    expect((await web.store.get(id))?.smsChannel).toMatchObject({ attemptInDoubt: true, attemptSettled: true, attempts: 1 });

    // The retry's backoff (1 s) comes before the margin: the step waits instead of searching.
    clock.advance(1_000);
    const early = await engine.sendSms(id);
    expect(early).toMatchObject({ kind: 'retry', note: 'an attempt is in flight or in doubt' });
    expect(sandbox.requests().filter((r) => r.operation === 'twilio.list')).toEqual([]);

    // Past the margin the search finds the message the provider created late, and adopts it.
    await sleep(1_000);
    clock.advance(3_000);
    expect((await engine.sendSms(id)).note).toBe('sms accepted');
    await sleep(500);
    expect(sandbox.sms().filter((m) => m.to === phone)).toHaveLength(1);
    const events = (await web.call('GET', `/v1/notices/${id}/events`)).json().events as { type: string; resolvedBy?: string }[];
    expect(events.filter((e) => e.type === 'sms.requested')).toHaveLength(1);
    expect(events.find((e) => e.type === 'sms.accepted')?.resolvedBy).toBe('provider_search');
  });
});

/**
 * An SMS in doubt whose search cannot tell (here Twilio's list answers 500, as AWS SMS's search
 * throws while its feed has not shown the message) is searched for until the SMS plan's span has
 * passed since its attempt started (`smsSearchEndsAt`), never sent again, and then recorded
 * `sms.unconfirmed` (`sms_send_unconfirmed`); the notice stays `sms_sending`, out of the due index.
 */
describe('an SMS send in doubt whose provider cannot tell, search after search', () => {
  let stack: EngineStack;
  beforeAll(async () => {
    stack = await startEngineStack('in-doubt-bound');
  });
  afterAll(() => stack.close());

  it('is searched for until the SMS plan has run out since its attempt, then recorded unconfirmed and never sent', async () => {
    const { web, engine, clock, sandbox } = stack;
    const phone = '+12025550189';
    const res = await web.call('POST', '/v1/notices', noticeBody({ recipient: { id: 'doubt-2', email: 'never@example.com', phone } }));
    const id = res.json().id as string;
    const deadline = Date.parse(res.json().deadline);
    expect((await engine.sendEmail(id)).note).toBe('email accepted');
    clock.set(deadline);

    sandbox.injectFault({ operation: 'twilio.create', mode: 'hang', match: phone });
    sandbox.injectFault({ operation: 'twilio.list', mode: 'status_500', count: 3 });
    expect((await engine.runDeadline(id)).note).toMatch(/sms send: timeout/);
    const startedAt = (await web.store.get(id))!.smsChannel.attemptStartedAt!;
    // The SMS plan at a 30 s floor and 20 checks: 8 checks, the last 7650 s after acceptance.
    const searchUntil = startedAt + 7_650_000;
    expect(smsSearchEndsAt(startedAt, { minPollIntervalMs: 30_000, maxChecks: 20 })).toBe(searchUntil);

    clock.advance(3_000);
    expect(await engine.sendSms(id)).toMatchObject({ kind: 'retry', note: 'sms search: server_error' });
    clock.set(searchUntil - 1);
    expect(await engine.sendSms(id)).toMatchObject({ kind: 'retry', note: 'sms search: server_error' });
    expect(await web.store.isDue(id)).toBe(true);

    clock.set(searchUntil);
    expect(await engine.sendSms(id)).toMatchObject({
      kind: 'done',
      note: 'sms send unconfirmed: the provider could not tell by the end of the search',
    });
    const notice = (await web.store.get(id))!;
    expect(notice).toMatchObject({ state: 'sms_sending', smsSearchEndedAt: searchUntil });
    expect(notice.smsChannel).toMatchObject({ attemptInDoubt: true, attemptSettled: true, attempts: 1, status: 'unknown' });
    expect(await web.store.isDue(id)).toBe(false);

    // A duplicate run later, with the list answering again (it would find no message): nothing is sent.
    clock.advance(60_000);
    expect(await engine.sendSms(id)).toMatchObject({ kind: 'done', note: 'the search for the sms in doubt has ended' });
    expect(await engine.drive(id)).toMatchObject({ kind: 'done' });
    expect(sandbox.requests().filter((r) => r.operation === 'twilio.create')).toHaveLength(1);
    expect(sandbox.requests().filter((r) => r.operation === 'twilio.list')).toHaveLength(3);

    const events = (await web.call('GET', `/v1/notices/${id}/events`)).json().events as Record<string, unknown>[];
    expect(events.filter((e) => e.type === 'sms.requested')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'provider.error' && e.operation === 'search')).toHaveLength(3);
    expect(events.filter((e) => e.type === 'sms.unconfirmed')).toEqual([
      expect.objectContaining({
        reason: 'sms_send_unconfirmed',
        checks: 0,
        searchedUntil: new Date(searchUntil).toISOString(),
        at: new Date(searchUntil).toISOString(),
      }),
    ]);
    expect((await web.call('GET', `/v1/notices/${id}`)).json()).toMatchObject({ state: 'sms_sending', sms: { status: 'unknown' } });
  });
});
