/**
 * `/docs/json` is a valid OpenAPI document, checked by an independent validator, and a client
 * generated from it at run time by a standard generator (openapi-client-axios, from the
 * operations and their IDs) creates and reads a notice through a real web process.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { OpenAPIClientAxios, type OpenAPIV3_1 } from 'openapi-client-axios';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_API_KEY, testEnv, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody } from '../helpers/herald.js';
import { WebProcess } from '../helpers/web-process.js';

const prefix = testPrefix('openapi');
let web: WebProcess;
let doc: Record<string, any>;

beforeAll(async () => {
  web = await new WebProcess(testEnv(prefix)).start();
  doc = (await web.call('GET', '/docs/json')).json;
});
afterAll(async () => {
  await web?.stop('SIGTERM');
  await cleanUp(prefix);
});

describe('/docs/json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('names its server, the states and reasons as enums, and the scope each operation needs', () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: expect.stringMatching(/^https?:\/\//) })]);
    const view = doc.paths['/v1/notices/{id}'].get.responses['200'].content['application/json'].schema;
    const states = (view.properties.state.anyOf as { const?: string; enum?: string[] }[]).map((s) => s.const ?? s.enum?.[0]);
    expect(states).toEqual(expect.arrayContaining(['accepted', 'email_delivered', 'sms_delivered', 'blocked', 'failed']));
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.paths['/v1/notices'].post.security).toEqual([{ apiKey: ['send'] }]);
    expect(doc.paths['/v1/notices/{id}'].get.security).toEqual([{ apiKey: ['read'] }]);
    expect(doc.paths['/v1/event-endpoints'].post.security).toEqual([{ apiKey: ['manage'] }]);
  });

  it('generates a client that creates a notice and reads it back', async () => {
    const api = new OpenAPIClientAxios({
      definition: { ...doc, servers: [{ url: web.url }] } as OpenAPIV3_1.Document,
      axiosConfigDefaults: { headers: { authorization: `Bearer ${TEST_API_KEY}` } },
    });
    const client = (await api.init()) as unknown as Record<
      string,
      (params?: unknown, body?: unknown) => Promise<{ status: number; data: any }>
    >;
    const created = await client.postNotices!(null, noticeBody());
    expect(created.status).toBe(202);
    const read = await client.getNoticesId!({ id: created.data.id });
    expect(read.data).toMatchObject({ id: created.data.id, state: expect.any(String) });
  });
});
