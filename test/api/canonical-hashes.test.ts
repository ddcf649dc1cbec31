import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shardOfKey } from '../../src/notice/ids.js';
import { cleanUp, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { testConfig, testPrefix } from '../helpers/env.js';

/**
 * A notice's `contentSha256` and its idempotency record's body hash are SHA-256 of the RFC 8785
 * canonical JSON of the content and of the body. Both are kept (the log, the archive, replays
 * within the content TTL), so a body must hash as it did when they were written: the expected
 * values below were computed with the canonicalize release Herald used before (2.1.0), and a
 * newer one must give the same bytes.
 */
const prefix = testPrefix('canonical');
let web: WebUnderTest;

beforeAll(async () => {
  web = await startWebUnderTest(testConfig(prefix));
});
afterAll(async () => {
  await web.close();
  await cleanUp(prefix);
});

/** Keys out of order, escapes, control and separator characters, astral characters, a flag. */
const BODY = {
  recipient: { region: 'JP', phone: '+819012345678', email: 'Reader.Canon@Example.com', id: 'player-canon' },
  metadata: { zeta: 'last', Alpha: 'first', _under: 'score', '10': 'ten', '9': 'nine' },
  content: {
    text: 'Line one\nTab\there "quoted" back\\slash \u0001 control, \u2028 separator, é 日本語 🎉 emoji, </script>',
    subject: 'Änderung der Bedingungen — 条款变更 🎉',
    sms: '€ 1,00 · ½ price · 🇯🇵',
  },
  category: 'terms_change',
  deadlineInSeconds: 3600,
  policy: { minCheckIntervalSeconds: 600, firstCheckAfterSeconds: 60 },
};
const CONTENT_SHA256 = '0558a24b84d1bbb3765998880fa1be381cc26e28fab3ec01815202b223b3506c';
const BODY_SHA256 = '5e2e2b7bcf93cb350162faf1c63e83174b853ade6083e74913c8e03398e058fb';

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

describe('the hashes of a notice', () => {
  it('are those its body had before: the log entry and the idempotency record', async () => {
    const key = 'canonical-1';
    const res = await web.call('POST', '/v1/notices', BODY, { 'idempotency-key': key });
    expect(res.statusCode).toBe(202);
    const id = res.json().id as string;
    const events = (await web.call('GET', `/v1/notices/${id}/events`)).json().events;
    expect(events[0]).toMatchObject({ type: 'notice.accepted', contentSha256: CONTENT_SHA256 });
    const keyHash = sha256Hex(`tenant:default:${key}`);
    expect(await web.store.findIdempotent(shardOfKey(keyHash), keyHash)).toEqual({ noticeId: id, bodyHash: BODY_SHA256 });

    // The same body with its keys in another order is the same body: a replay.
    const reordered = Object.fromEntries(Object.entries(BODY).reverse());
    const again = await web.call('POST', '/v1/notices', reordered, { 'idempotency-key': key });
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
  });

  describe('when a string is not well-formed Unicode', () => {
    /** The body as JSON text, `HALF` standing for half a surrogate pair (JSON.stringify would escape the backslash). */
    const withHalfPair = (body: unknown) => JSON.stringify(body).replace('HALF', '\\ud83c');
    const JSON_TYPE = { 'content-type': 'application/json' };

    it('refuses the notice with validation_failed, naming the field (canonical JSON has no form for a lone surrogate)', async () => {
      const json = withHalfPair({ ...BODY, content: { ...BODY.content, subject: 'half a pair: HALF' } });
      for (const headers of [JSON_TYPE, { ...JSON_TYPE, 'idempotency-key': 'canonical-2' }]) {
        const res = await web.call('POST', '/v1/notices', json, headers);
        expect(res.statusCode).toBe(400);
        expect(res.json().error).toMatchObject({
          code: 'validation_failed',
          details: [{ path: 'body.content.subject', message: expect.stringContaining('lone surrogate') }],
        });
      }
    });

    it('refuses it in a metadata value and in one notice of a batch alike', async () => {
      const alone = await web.call('POST', '/v1/notices', withHalfPair({ ...BODY, metadata: { ref: 'HALF' } }), JSON_TYPE);
      expect(alone.statusCode).toBe(400);
      expect(alone.json().error.details).toEqual([expect.objectContaining({ path: 'body.metadata.ref' })]);

      const { metadata: _, ...plain } = BODY;
      const batch = await web.call(
        'POST',
        '/v1/notices/batch',
        withHalfPair({
          notices: [
            { ...plain, content: BODY.content },
            { ...plain, content: { ...BODY.content, subject: 'HALF' } },
          ],
        }),
        JSON_TYPE,
      );
      expect(batch.statusCode).toBe(200);
      const [first, second] = batch.json().results;
      expect(first.status).toBe(202);
      expect(second).toMatchObject({
        status: 400,
        error: { code: 'validation_failed', details: [{ path: 'body.notices.1.content.subject' }] },
      });
    });
  });
});
