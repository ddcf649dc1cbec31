import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accept, acceptBatch, acceptSettings, type AcceptDeps, type AcceptRequest } from '../../src/notice/accept.js';
import { testConfig, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';

const prefix = testPrefix('admission');
const log = pino({ level: 'silent' });
let web: WebUnderTest;

beforeAll(async () => {
  web = await startWebUnderTest(testConfig(prefix));
});
afterAll(async () => {
  await web.close();
  await cleanUp(prefix);
});

/** The acceptance's deps, its reads of the recipient's policy noted in `steps` as they leave and as they are answered. */
function watchedDeps(steps: string[]): AcceptDeps {
  const { store, policies, suppressions, scheduler, clock, config } = web.deps;
  const watched = new Proxy(policies, {
    get(target, key, receiver) {
      if (key !== 'get') return Reflect.get(target, key, receiver) as unknown;
      return (...args: Parameters<typeof policies.get>) => {
        steps.push('policy read sent');
        const read = target.get(...args);
        void read.then(() => steps.push('policy read answered'));
        return read;
      };
    },
  });
  return { store, policies: watched, suppressions, scheduler, clock, settings: acceptSettings(config) };
}

const request = (id: string) => noticeBody({ recipient: { id, email: 'never@example.com' } }) as unknown as AcceptRequest;
const caller = { apiKeyId: 'k1', tenant: 'default' };
const refused = () => Promise.reject(Object.assign(new Error('Rate limit of 3 requests per minute reached'), { statusCode: 429 }));

describe("a request's admission (its rate limit)", () => {
  it('is asked for with the reads of the acceptance, before they are answered', async () => {
    const steps: string[] = [];
    const result = await accept(watchedDeps(steps), request('adm-1'), caller, log, async () => {
      steps.push('admission asked');
    });
    expect(result.kind).toBe('created');
    expect(steps).toEqual(['admission asked', 'policy read sent', 'policy read answered']);
  });

  it('refused, stores nothing of a notice', async () => {
    await expect(accept(watchedDeps([]), request('adm-2'), caller, log, refused)).rejects.toMatchObject({ statusCode: 429 });
    await expect(web.redis.keys(`${prefix}:*:notice:*`)).resolves.toHaveLength(1);
  });

  it("of a batch is asked for with its first notices' reads, and refused, stores none of them", async () => {
    const steps: string[] = [];
    const many = [0, 1, 2].map((i) => ({ request: request(`adm-b${i}`) }));
    await expect(
      acceptBatch(watchedDeps(steps), many, caller, log, () => (steps.push('admission asked'), refused())),
    ).rejects.toMatchObject({ statusCode: 429 });
    expect(steps.slice(0, 2)).toEqual(['admission asked', 'policy read sent']);
    await expect(web.redis.keys(`${prefix}:*:notice:*`)).resolves.toHaveLength(1);
  });
});
