import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { postmark, sleep } from '../helpers/sandbox.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox({ indexLagMs: 200 });
});
afterAll(() => sandbox.close());
beforeEach(() => sandbox.reset());

const email = (to: string, extra: Record<string, unknown> = {}) => ({
  From: 'herald@sandbox.example',
  To: to,
  Subject: 'Terms update',
  TextBody: 'The terms change on Friday.',
  MessageStream: 'outbound',
  ...extra,
});

describe('Postmark emulator', () => {
  describe('when the server token is missing or bad', () => {
    it('answers 401 with ErrorCode 10 and records the request', async () => {
      const missing = await postmark(sandbox.url, 'POST', '/email', email('a@example.com'), null);
      expect(missing.status).toBe(401);
      expect(missing.body).toMatchObject({ ErrorCode: 10 });
      const bad = await postmark(sandbox.url, 'POST', '/email', email('a@example.com'), 'bad-token');
      expect(bad.status).toBe(401);
      expect(bad.body.ErrorCode).toBe(10);
      expect(sandbox.emails()).toHaveLength(0);
      expect(sandbox.requests().map((r) => [r.operation, r.status])).toEqual([
        ['postmark.send', 401],
        ['postmark.send', 401],
      ]);
    });
  });

  describe('POST /email', () => {
    it('answers like Postmark and keeps the message with its metadata', async () => {
      const sent = await postmark(
        sandbox.url,
        'POST',
        '/email',
        email('p42@example.com', { Metadata: { herald_key: 'k1' }, Tag: 'terms' }),
      );
      expect(sent.status).toBe(200);
      expect(sent.body).toEqual({
        To: 'p42@example.com',
        SubmittedAt: expect.any(String),
        MessageID: expect.stringMatching(/^[0-9a-f-]{36}$/),
        ErrorCode: 0,
        Message: 'OK',
      });
      const [stored] = sandbox.emails();
      expect(stored).toMatchObject({
        messageId: sent.body.MessageID,
        to: 'p42@example.com',
        subject: 'Terms update',
        tag: 'terms',
        metadata: { herald_key: 'k1' },
        behaviour: 'delivered',
        status: 'Sent',
      });
    });

    it('refuses a message without a body, or with metadata beyond the limits, with ErrorCode 300', async () => {
      const noBody = await postmark(sandbox.url, 'POST', '/email', email('a@example.com', { TextBody: undefined }));
      expect(noBody).toMatchObject({ status: 422, body: { ErrorCode: 300 } });
      const elevenFields = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`f${i}`, 'v']));
      const tooMany = await postmark(sandbox.url, 'POST', '/email', email('a@example.com', { Metadata: elevenFields }));
      expect(tooMany).toMatchObject({ status: 422, body: { ErrorCode: 300 } });
      const longValue = await postmark(sandbox.url, 'POST', '/email', email('a@example.com', { Metadata: { k: 'x'.repeat(81) } }));
      expect(longValue).toMatchObject({ status: 422, body: { ErrorCode: 300 } });
      expect(sandbox.emails()).toHaveLength(0);
    });

    it('answers invalid JSON with 422 and ErrorCode 402', async () => {
      const response = await fetch(`${sandbox.url}/email`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-postmark-server-token': 't' },
        body: '{"To": ',
      });
      expect(response.status).toBe(422);
      expect(await response.json()).toMatchObject({ ErrorCode: 402 });
    });

    it('rejects `rejected` addresses with ErrorCode 300 and `inactive` ones with 406', async () => {
      const rejected = await postmark(sandbox.url, 'POST', '/email', email('rejected@example.com'));
      expect(rejected).toMatchObject({ status: 422, body: { ErrorCode: 300 } });
      const inactive = await postmark(sandbox.url, 'POST', '/email', email('inactive@example.com'));
      expect(inactive).toMatchObject({ status: 422, body: { ErrorCode: 406 } });
      expect(inactive.body.Message).toContain('Found inactive addresses: inactive@example.com.');
      expect(sandbox.emails()).toHaveLength(0);
    });

    it('fails `flaky` sends with 500, then 429 with Retry-After 1, then accepts', async () => {
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 3; i++) {
        const answer = await postmark(sandbox.url, 'POST', '/email', email('flaky@example.com'));
        statuses.push(answer.status);
        if (answer.status === 429) retryAfter = answer.headers.get('retry-after');
      }
      expect(statuses).toEqual([500, 429, 200]);
      expect(retryAfter).toBe('1');
      expect(sandbox.emails()).toHaveLength(1);
    });
  });

  describe('GET /messages/outbound/{id}/details', () => {
    it('answers 422 ErrorCode 701 until the message is indexed, then the events so far', async () => {
      const { body } = await postmark(sandbox.url, 'POST', '/email', email('bounce+700ms@example.com'));
      const early = await postmark(sandbox.url, 'GET', `/messages/outbound/${body.MessageID}/details`);
      expect(early).toMatchObject({ status: 422, body: { ErrorCode: 701 } });

      await sleep(250);
      const indexed = await postmark(sandbox.url, 'GET', `/messages/outbound/${body.MessageID}/details`);
      expect(indexed.status).toBe(200);
      expect(indexed.body).toMatchObject({
        MessageID: body.MessageID,
        Status: 'Sent',
        Recipients: ['bounce+700ms@example.com'],
        MessageEvents: [],
      });

      await sleep(500);
      const bounced = await postmark(sandbox.url, 'GET', `/messages/outbound/${body.MessageID}/details`);
      const [event] = bounced.body.MessageEvents;
      expect(event).toMatchObject({ Type: 'Bounced', Recipient: 'bounce+700ms@example.com', Details: { BounceID: expect.any(String) } });

      const bounce = await postmark(sandbox.url, 'GET', `/bounces/${event.Details.BounceID}`);
      expect(bounce.body).toMatchObject({
        ID: Number(event.Details.BounceID),
        Type: 'HardBounce',
        Inactive: true,
        MessageID: body.MessageID,
      });
    });

    it('answers unknown message IDs and bounces with 422', async () => {
      expect((await postmark(sandbox.url, 'GET', '/messages/outbound/nope/details')).body.ErrorCode).toBe(701);
      expect((await postmark(sandbox.url, 'GET', '/bounces/123456')).body.ErrorCode).toBe(407);
    });
  });

  describe('GET /messages/outbound (search)', () => {
    it('filters by recipient and metadata, pages with count/offset, and hides messages not indexed yet', async () => {
      for (const key of ['a', 'b', 'a']) {
        await postmark(sandbox.url, 'POST', '/email', email('p7@example.com', { Metadata: { herald_key: key } }));
      }
      await postmark(sandbox.url, 'POST', '/email', email('other@example.com', { Metadata: { herald_key: 'a' } }));
      const beforeIndexing = await postmark(sandbox.url, 'GET', '/messages/outbound?count=10&offset=0&recipient=p7@example.com');
      expect(beforeIndexing.body).toEqual({ TotalCount: 0, Messages: [] });

      await sleep(250);
      const byKey = await postmark(
        sandbox.url,
        'GET',
        '/messages/outbound?count=10&offset=0&recipient=p7@example.com&metadata_herald_key=a',
      );
      expect(byKey.body.TotalCount).toBe(2);
      expect(byKey.body.Messages.map((m: any) => [m.Recipients, m.Metadata])).toEqual([
        [['p7@example.com'], { herald_key: 'a' }],
        [['p7@example.com'], { herald_key: 'a' }],
      ]);
      const secondPage = await postmark(sandbox.url, 'GET', '/messages/outbound?count=1&offset=1&recipient=p7@example.com');
      expect(secondPage.body.TotalCount).toBe(3);
      expect(secondPage.body.Messages).toHaveLength(1);
      expect(secondPage.body.Messages[0].Metadata).toEqual({ herald_key: 'b' });
      const tooMany = await postmark(sandbox.url, 'GET', '/messages/outbound?count=501&offset=0');
      expect(tooMany.status).toBe(422);
    });
  });
});
