import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { ACCOUNT_SID, sleep, twilioApi } from '../helpers/sandbox.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox();
});
afterAll(() => sandbox.close());
beforeEach(() => sandbox.reset());

const FROM = '+15005550006';
const SERVICE = `MG${'a'.repeat(32)}`;
const RFC_2822 = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} \+0000$/;
const sms = (to: string, body = 'Your terms change on Friday.') => ({ To: to, From: FROM, Body: body });

describe('Twilio emulator', () => {
  describe('when basic auth does not match the account in the path', () => {
    it('answers 401 with code 20003', async () => {
      const wrongUser = await twilioApi(sandbox.url, 'POST', '/Messages.json', sms('+12025550100'), {
        user: `AC${'f'.repeat(32)}`,
        password: 'x',
      });
      expect(wrongUser.status).toBe(401);
      expect(wrongUser.body).toEqual({
        code: 20003,
        message: 'Authenticate',
        more_info: 'https://www.twilio.com/docs/errors/20003',
        status: 401,
      });
      const badToken = await twilioApi(sandbox.url, 'GET', '/Messages.json', undefined, { user: ACCOUNT_SID, password: 'bad-token' });
      expect(badToken.status).toBe(401);
      expect(sandbox.sms()).toHaveLength(0);
    });
  });

  describe('POST Messages.json', () => {
    it('creates a message resource shaped like Twilio’s', async () => {
      const created = await twilioApi(sandbox.url, 'POST', '/Messages.json', sms('+12025550100'));
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        account_sid: ACCOUNT_SID,
        api_version: '2010-04-01',
        body: 'Your terms change on Friday.',
        date_sent: null,
        direction: 'outbound-api',
        error_code: null,
        from: FROM,
        num_segments: '1',
        status: 'queued',
        to: '+12025550100',
      });
      expect(created.body.sid).toMatch(/^SM[0-9a-f]{32}$/);
      expect(created.body.date_created).toMatch(RFC_2822);
      expect(created.body.uri).toBe(`/2010-04-01/Accounts/${ACCOUNT_SID}/Messages/${created.body.sid}.json`);

      await sleep(1100);
      const fetched = await twilioApi(sandbox.url, 'GET', `/Messages/${created.body.sid}.json`);
      expect(fetched.body).toMatchObject({ status: 'delivered', date_sent: expect.stringMatching(RFC_2822) });
    });

    it('starts Messaging Service messages as accepted', async () => {
      const created = await twilioApi(sandbox.url, 'POST', '/Messages.json', {
        To: '+12025550100',
        MessagingServiceSid: SERVICE,
        Body: 'hi',
      });
      expect(created.body).toMatchObject({ status: 'accepted', from: null, messaging_service_sid: SERVICE });
    });

    it('validates like Twilio: 21604, 21602, 21603, 21211', async () => {
      const codes = [];
      const forms: Record<string, string>[] = [
        { From: FROM, Body: 'x' },
        { To: '+12025550100', From: FROM },
        { To: '+12025550100', Body: 'x' },
        { To: '12345', From: FROM, Body: 'x' },
      ];
      for (const form of forms) {
        const answer = await twilioApi(sandbox.url, 'POST', '/Messages.json', form);
        codes.push([answer.status, answer.body.code]);
      }
      expect(codes).toEqual([
        [400, 21604],
        [400, 21602],
        [400, 21603],
        [400, 21211],
      ]);
    });

    it('refuses opted-out numbers (…03) with 400 code 21610', async () => {
      const answer = await twilioApi(sandbox.url, 'POST', '/Messages.json', sms('+14155550103'));
      expect(answer).toMatchObject({ status: 400, body: { code: 21610, status: 400 } });
      expect(sandbox.sms()).toHaveLength(0);
    });

    it('fails flaky numbers (…04) with 500, then 429 with Retry-After 1, then creates', async () => {
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await twilioApi(sandbox.url, 'POST', '/Messages.json', sms('+12025550104')));
      expect(answers.map((a) => [a.status, a.body.code ?? null])).toEqual([
        [500, 20500],
        [429, 20429],
        [201, null],
      ]);
      expect(answers[1]?.headers.get('retry-after')).toBe('1');
    });
  });

  describe('GET Messages.json', () => {
    it('pages with next_page_uri until the last page, newest first', async () => {
      const sids: string[] = [];
      for (let i = 0; i < 5; i++) {
        sids.push((await twilioApi(sandbox.url, 'POST', '/Messages.json', sms('+12025550105', `m${i}`))).body.sid);
      }
      await twilioApi(sandbox.url, 'POST', '/Messages.json', sms('+12025550100', 'other number'));

      const seen: string[] = [];
      let page = await twilioApi(sandbox.url, 'GET', '/Messages.json?To=%2B12025550105&PageSize=2');
      expect(page.body).toMatchObject({ page: 0, page_size: 2, start: 0, end: 1, previous_page_uri: null });
      expect(page.body.first_page_uri).toContain('PageSize=2');
      for (;;) {
        seen.push(...page.body.messages.map((m: any) => m.sid));
        if (!page.body.next_page_uri) break;
        page = await twilioApi(sandbox.url, 'GET', page.body.next_page_uri);
      }
      expect(seen).toEqual([...sids].reverse());
      expect(page.body.page).toBe(2);
    });

    it('filters DateSent on the date sent, which queued messages do not have', async () => {
      await twilioApi(sandbox.url, 'POST', '/Messages.json', sms('+12025550105'));
      const today = new Date().toISOString().slice(0, 10);
      const queued = await twilioApi(sandbox.url, 'GET', `/Messages.json?DateSent%3E=${today}`);
      expect(queued.body.messages).toHaveLength(0);
      await sleep(700);
      const sent = await twilioApi(sandbox.url, 'GET', `/Messages.json?DateSent%3E=${today}`);
      expect(sent.body.messages).toHaveLength(1);
    });
  });

  describe('POST Messages/{sid}.json with Status=canceled', () => {
    it('cancels a scheduled message once, and refuses later with 30409', async () => {
      const sendAt = new Date(Date.now() + 20 * 60_000).toISOString();
      const scheduled = await twilioApi(sandbox.url, 'POST', '/Messages.json', {
        To: '+12025550100',
        MessagingServiceSid: SERVICE,
        Body: 'later',
        ScheduleType: 'fixed',
        SendAt: sendAt,
      });
      expect(scheduled.body.status).toBe('scheduled');
      const canceled = await twilioApi(sandbox.url, 'POST', `/Messages/${scheduled.body.sid}.json`, { Status: 'canceled' });
      expect(canceled).toMatchObject({ status: 200, body: { status: 'canceled' } });
      const again = await twilioApi(sandbox.url, 'POST', `/Messages/${scheduled.body.sid}.json`, { Status: 'canceled' });
      expect(again).toMatchObject({ status: 400, body: { code: 30409 } });
    });

    it('refuses a SendAt less than 15 minutes ahead with 35114', async () => {
      const answer = await twilioApi(sandbox.url, 'POST', '/Messages.json', {
        To: '+12025550100',
        MessagingServiceSid: SERVICE,
        Body: 'soon',
        ScheduleType: 'fixed',
        SendAt: new Date(Date.now() + 60_000).toISOString(),
      });
      expect(answer).toMatchObject({ status: 400, body: { code: 35114 } });
    });
  });

  it('answers unknown messages and routes with 404 code 20404', async () => {
    const missing = await twilioApi(sandbox.url, 'GET', `/Messages/SM${'0'.repeat(32)}.json`);
    expect(missing).toMatchObject({ status: 404, body: { code: 20404, status: 404 } });
    const route = await twilioApi(sandbox.url, 'GET', '/Calls.json');
    expect(route).toMatchObject({ status: 404, body: { code: 20404 } });
  });
});
