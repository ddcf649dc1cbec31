/**
 * Random and hostile requests for the API's write routes: bodies that are valid, nearly valid
 * (one to four mutations away), structurally wrong or not JSON at all; headers that are
 * missing, wrong or odd; sizes around and over the body limit.
 */
import fc from 'fast-check';
import { TEST_API_KEY } from './env.js';

/** Values that tend to break parsers, validators and key builders. */
const nastyString = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '{s1}',
    '{r:x}',
    '../../etc/passwd',
    '%00',
    '$(rm -rf /)',
    '<script>alert(1)</script>',
    '\u202e\u0645\u0631\u062d\u0628\u0627',
    '🦄🦄🦄',
    '\ud800',
    'ntc_00zzzzzzzzzzzzzzzzzzzzzzzzzz',
    '+12025550100',
    '+1202555010000000000',
    'never@example.com',
    'a@b',
    '2026-02-30T25:61:00Z',
    '9999-12-31T23:59:59.999Z',
    '1970-01-01T00:00:00Z',
    'null',
    '__proto__',
    'event\n',
    '\nevent',
    'ev\u2028ent',
    'event\u2029',
    'event\r\n',
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.emailAddress(),
  fc.integer({ min: 1, max: 3000 }).map((n) => 'x'.repeat(n)),
);

const nastyNumber = fc.oneof(
  fc.constantFrom(0, -1, 1, 1.5, 2 ** 31, 2 ** 53 + 2, -(2 ** 53), 1e21, 366 * 86_400, 366 * 86_400 + 1, Number.MIN_VALUE),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: nastyString },
  { weight: 2, arbitrary: nastyNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()) },
  { weight: 1, arbitrary: fc.dictionary(nastyString, nastyString, { maxKeys: 30 }) },
  // A placeholder `deepNesting` turns into thousands of nested arrays or objects in the JSON text
  // (too deep for JSON.stringify to write).
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 100, max: 12_000 }), fc.constantFrom('a', 'o')).map(([n, k]) => `__NEST_${n}_${k}__`),
  },
);

/** Writes the nesting placeholders of `nastyValue` out as JSON nested `n` deep. */
function deepNesting(json: string): string {
  return json.replace(/"__NEST_(\d+)_([ao])__"/g, (_, n: string, kind: string) =>
    kind === 'a' ? '['.repeat(Number(n)) + ']'.repeat(Number(n)) : '{"a":'.repeat(Number(n)) + '1' + '}'.repeat(Number(n)),
  );
}

/** A body Herald accepts: the starting point for mutations. */
export function validNotice(): Record<string, unknown> {
  return {
    recipient: { id: 'prop-1', email: 'never@example.com', phone: '+12025550100' },
    category: 'terms_change',
    content: { subject: 'Terms', text: 'The terms change.', sms: 'Terms change.' },
    deadlineInSeconds: 600,
    metadata: { event: 'cup' },
  };
}

export function validPolicy(): Record<string, unknown> {
  return { consent: { email: true, sms: false }, region: 'JP' };
}

type Mutation = { kind: 'delete'; path: string } | { kind: 'set'; path: string; value: unknown };

const NOTICE_PATHS = [
  'recipient',
  'recipient.id',
  'recipient.email',
  'recipient.phone',
  'recipient.region',
  'recipient.extra',
  'category',
  'content',
  'content.subject',
  'content.text',
  'content.html',
  'content.sms',
  'content.extra',
  'deadline',
  'deadlineInSeconds',
  'complianceDeadline',
  'policy',
  'policy.firstCheckAfterSeconds',
  'policy.minCheckIntervalSeconds',
  'metadata',
  'metadata.key',
  'metadata.key\n',
  'metadata.\u2028',
  'metadata.k\u2029',
  'extra',
  '__proto__',
  'constructor',
  'recipient.__proto__',
  'content.constructor',
];
const POLICY_PATHS = ['consent', 'consent.email', 'consent.sms', 'consent.extra', 'region', 'extra', '__proto__', 'consent.__proto__'];

/** Applies mutations; `__proto__` is written as an own property so that it reaches the JSON text. */
function mutate(body: Record<string, unknown>, mutations: Mutation[]): unknown {
  for (const m of mutations) {
    const parts = m.path.split('.');
    let target: any = body;
    for (const part of parts.slice(0, -1)) {
      if (typeof target[part] !== 'object' || target[part] === null || !Object.hasOwn(target, part)) {
        Object.defineProperty(target, part, { value: {}, enumerable: true, writable: true, configurable: true });
      }
      target = target[part];
    }
    const last = parts.at(-1)!;
    if (m.kind === 'delete') delete target[last];
    else Object.defineProperty(target, last, { value: m.value, enumerable: true, writable: true, configurable: true });
  }
  return body;
}

function mutations(paths: string[]): fc.Arbitrary<Mutation[]> {
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    fc.record({ kind: fc.constant('delete' as const), path: fc.constantFrom(...paths) }),
    fc.record({ kind: fc.constant('set' as const), path: fc.constantFrom(...paths), value: nastyValue }),
  );
  return fc.array(mutation, { maxLength: 4 });
}

/** A raw request body: JSON of a mutated valid body, any JSON, or bytes that are not JSON. */
function bodyText(valid: () => Record<string, unknown>, paths: string[]): fc.Arbitrary<string | Buffer> {
  return fc.oneof(
    { weight: 6, arbitrary: mutations(paths).map((ms) => deepNesting(JSON.stringify(mutate(valid(), ms)))) },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)) },
    // Cut-off JSON, deep nesting, and bodies around and over the limit.
    {
      weight: 1,
      arbitrary: fc.tuple(mutations(paths), fc.nat()).map(([ms, n]) => {
        const t = JSON.stringify(mutate(valid(), ms));
        return t.slice(0, n % t.length);
      }),
    },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 20_000 }).map((n) => '['.repeat(n) + ']'.repeat(n)) },
    { weight: 1, arbitrary: fc.integer({ min: 6_000, max: 40_000 }).map((n) => JSON.stringify({ ...valid(), pad: 'x'.repeat(n) })) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '',
        'null',
        '[]',
        '{}',
        '"x"',
        '0',
        'true',
        '{"__proto__":{"admin":true}}',
        '{"constructor":{"prototype":{"x":1}}}',
        '\ufeff{}',
      ),
    },
  );
}

/** Header values: printable ASCII and Latin-1 only, since HTTP itself refuses the rest. */
const headerValue = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 300 }),
  fc.string({ unit: fc.integer({ min: 0xa0, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 20 }),
);

const contentType = fc.option(
  fc.oneof(
    { weight: 6, arbitrary: fc.constant('application/json') },
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        'application/json; charset=utf-8',
        'application/JSON',
        'application/json; charset=latin1',
        'application/json;;;',
        'text/plain',
        'text/json',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=xyz',
        'application/octet-stream',
        'application/vnd.api+json',
        '*/*',
        '',
      ),
    },
    { weight: 1, arbitrary: headerValue },
  ),
  { freq: 8 },
);

const authorization = fc.option(
  fc.oneof(
    { weight: 8, arbitrary: fc.constant(`Bearer ${TEST_API_KEY}`) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        `bearer ${TEST_API_KEY}`,
        `Bearer  ${TEST_API_KEY}  `,
        `Basic ${TEST_API_KEY}`,
        'Bearer',
        'Bearer ',
        `Bearer ${TEST_API_KEY}x`,
        `Bearer ${'k'.repeat(5000)}`,
      ),
    },
    { weight: 1, arbitrary: headerValue },
  ),
  { freq: 10 },
);

/** A small pool of keys, so that keys meet different bodies (409) and the same one (200). */
const idempotencyKey = fc.option(fc.oneof(fc.constantFrom('k-1', 'k-2', 'k 3', 'ключ', 'x'.repeat(256)), headerValue), { freq: 2 });

const extraHeaders = fc.dictionary(
  fc.constantFrom(
    'x-request-id',
    'accept',
    'accept-encoding',
    'content-encoding',
    'x-forwarded-for',
    'origin',
    'expect',
    'transfer-encoding',
    'x-custom',
  ),
  headerValue,
  { maxKeys: 3 },
);

/** A path segment of any string's UTF-8 bytes (encodeURIComponent throws on lone surrogates). */
function percentEncoded(text: string): string {
  return [...Buffer.from(text, 'utf8')]
    .map((byte) =>
      /[A-Za-z0-9._~-]/.test(String.fromCharCode(byte))
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
    )
    .join('');
}

export interface ApiRequest {
  body: string | Buffer;
  headers: Record<string, string>;
}

function request(body: fc.Arbitrary<string | Buffer>): fc.Arbitrary<ApiRequest> {
  return fc
    .record({ body, contentType, authorization, idempotencyKey, extra: extraHeaders })
    .map(({ body, contentType, authorization, idempotencyKey, extra }) => {
      const headers: Record<string, string> = { ...extra };
      if (contentType !== null) headers['content-type'] = contentType;
      if (authorization !== null) headers.authorization = authorization;
      if (idempotencyKey !== null) headers['idempotency-key'] = idempotencyKey;
      return { body, headers };
    });
}

/** A `POST /v1/notices` request. */
export const noticeRequest: fc.Arbitrary<ApiRequest> = request(bodyText(validNotice, NOTICE_PATHS));

/** A `PUT /v1/recipients/:id/policy` request, with the recipient ID as it goes into the URL. */
export const policyRequest: fc.Arbitrary<ApiRequest & { recipient: string }> = fc
  .tuple(
    request(bodyText(validPolicy, POLICY_PATHS)),
    fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom('prop-1', 'player.42', 'a:b@c-d_e') },
      { weight: 2, arbitrary: nastyString.map(percentEncoded) },
      { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '..', '.', '%7Br%3Ax%7D', '{r:x}', 'a%2Fb', 'x'.repeat(129), 'x'.repeat(2000)) },
    ),
  )
  .map(([req, recipient]) => ({ ...req, recipient }));
