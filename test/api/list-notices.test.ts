/** `GET /v1/notices`: the notices list of the API, newest first, with the filters and cursor of /admin/notices. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const prefix = testPrefix('listapi');
let web: WebUnderTest;
const ids: string[] = [];

beforeAll(async () => {
  web = await startWebUnderTest(testConfig(prefix));
  for (let i = 0; i < 5; i += 1) {
    const res = await web.call(
      'POST',
      '/v1/notices',
      noticeBody({
        category: i % 2 === 0 ? 'terms_change' : 'event_start',
        recipient: { id: `player-list-${i}`, email: `p${i}@example.com` },
      }),
    );
    ids.push(res.json().id);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
});
afterAll(async () => {
  await web?.close();
  await cleanUp(prefix);
});

describe('GET /v1/notices', () => {
  it('lists notices newest first as their views, filtered by category', async () => {
    const res = await web.call('GET', '/v1/notices?category=terms_change');
    expect(res.statusCode).toBe(200);
    const body = res.json() as { notices: { id: string; state: string; category: string }[]; nextCursor: string | null };
    expect(body.notices.map((n) => n.id)).toEqual([ids[4], ids[2], ids[0]]);
    expect(body.notices.every((n) => n.category === 'terms_change' && n.state === 'accepted')).toBe(true);
    expect(body.notices[0]).toHaveProperty('email');
    expect(body.nextCursor).toBeNull();
  });

  it('pages with limit and nextCursor until null', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 5; page += 1) {
      const res = await web.call('GET', `/v1/notices?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      const body = res.json() as { notices: { id: string }[]; nextCursor: string | null };
      seen.push(...body.notices.map((n) => n.id));
      cursor = body.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toEqual([...ids].reverse());
  });

  it('answers 400 validation_failed to a filter it cannot read, and 401 without a key', async () => {
    expect((await web.call('GET', '/v1/notices?state=nowhere')).statusCode).toBe(400);
    expect((await web.call('GET', '/v1/notices?unknown=1')).statusCode).toBe(400);
    expect((await web.app.inject({ method: 'GET', url: '/v1/notices' })).statusCode).toBe(401);
  });
});
