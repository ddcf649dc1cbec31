/**
 * SendGrid's status mapping and error classification as pure functions, for the cases the
 * emulator does not produce (spam reports, drops for the message's own sake, late events, the
 * SDK's error objects as it builds them).
 */
import { describe, expect, it } from 'vitest';
import { classifySendgridError } from '../../src/providers/classify.js';
import { sendgridObservation } from '../../src/providers/normalize.js';

const events = (...names: Array<string | { event: string; type?: string; reason?: string }>) =>
  names.map((n) => (typeof n === 'string' ? { event: n } : n));

describe('sendgridObservation', () => {
  it.each([
    ['processed only', 'processed', events('processed'), 'pending'],
    ['deferred', 'deferred', events('processed', 'deferred', 'deferred'), 'deferred'],
    ['delivered after a deferral', 'delivered', events('processed', 'deferred', 'delivered'), 'delivered'],
    ['a soft bounce (blocked)', 'blocked', events('processed', { event: 'bounce', type: 'blocked' }), 'deferred'],
    ['a hard bounce', 'bounced', events('processed', { event: 'bounce', type: 'bounce' }), 'bounced'],
    ['open and click, no delivered event', 'delivered', events('processed', 'open', 'click'), 'pending'],
    ['a drop', 'dropped', events('processed', { event: 'dropped', reason: 'Unsubscribed Address' }), 'failed'],
    ['no events at all', undefined, [], 'pending'],
  ] as const)('%s → %s', (_, summary, list, status) => {
    expect(sendgridObservation({ ...(summary ? { status: summary } : {}), events: [...list] }).status).toBe(status);
  });

  it('never reads the summary status for delivery: an open alone is engagement', () => {
    expect(sendgridObservation({ status: 'delivered', events: events('processed', 'open') })).toEqual({
      providerStatus: 'delivered+processed+open',
      status: 'pending',
      engagement: ['opened'],
    });
  });

  it('a delivery stays a delivery when a spam report or unsubscribe follows; the address is still marked', () => {
    expect(sendgridObservation({ status: 'delivered', events: events('processed', 'delivered', 'open', 'spamreport') })).toEqual({
      providerStatus: 'delivered+processed+delivered+open+spamreport',
      status: 'delivered',
      engagement: ['opened'],
      suppressed: true,
      suppressionSource: 'sendgrid_unsubscribe',
    });
  });

  it('a drop for the message itself fails it without suppressing the address', () => {
    const dropped = sendgridObservation({
      status: 'dropped',
      events: events('processed', { event: 'dropped', reason: 'Invalid SMTPAPI header' }),
    });
    expect(dropped).toEqual({ providerStatus: 'dropped+processed+dropped', status: 'failed', engagement: [] });
  });

  it('a hard bounce names its source; a drop without a reason is taken as a suppression list', () => {
    expect(sendgridObservation({ events: events({ event: 'bounce', type: 'bounce' }) })).toMatchObject({
      bounceType: 'HardBounce',
      suppressionSource: 'sendgrid_hard_bounce',
    });
    expect(sendgridObservation({ events: events('dropped') })).toMatchObject({ status: 'failed', suppressionSource: 'sendgrid_dropped' });
  });
});

/** An error shaped like the SDK's ResponseError (`code` = HTTP status, `response: { headers, body }`). */
function responseError(status: number, body: unknown, headers: Record<string, string> = {}): Error {
  return Object.assign(new Error('Bad Request'), { code: status, response: { headers, body } });
}

describe('classifySendgridError', () => {
  const now = 1_800_000_000_000;

  it('maps HTTP answers to kinds, with the errors[] messages and fields', () => {
    const invalid = classifySendgridError(
      responseError(400, { errors: [{ message: 'Does not contain a valid address.', field: 'personalizations.0.to.0.email' }] }),
      now,
    );
    expect(invalid).toMatchObject({ kind: 'rejected', httpStatus: 400, retryable: false, suppressed: false });
    expect(invalid.message).toBe('sendgrid: HTTP 400: Does not contain a valid address. (personalizations.0.to.0.email)');
    expect(classifySendgridError(responseError(413, { errors: [{ message: 'content too large' }] }), now).kind).toBe('rejected');
    expect(classifySendgridError(responseError(401, { errors: [{ message: 'authorization required', field: null }] }), now).kind).toBe(
      'server_error',
    );
    expect(classifySendgridError(responseError(403, { errors: [{ message: 'access forbidden' }] }), now).kind).toBe('server_error');
    expect(classifySendgridError(responseError(502, 'Bad Gateway'), now)).toMatchObject({
      kind: 'server_error',
      message: 'sendgrid: HTTP 502: Bad Request',
    });
  });

  it('a 429 comes back at Retry-After when given, else at X-RateLimit-Reset (epoch seconds)', () => {
    const body = { errors: [{ field: null, message: 'too many requests' }] };
    expect(
      classifySendgridError(responseError(429, body, { 'retry-after': '7', 'x-ratelimit-reset': String(now / 1000 + 60) }), now),
    ).toMatchObject({
      kind: 'rate_limited',
      retryAfterMs: 7000,
    });
    expect(classifySendgridError(responseError(429, body, { 'x-ratelimit-reset': String(now / 1000 + 60) }), now).retryAfterMs).toBe(
      60_000,
    );
    expect(classifySendgridError(responseError(429, body, {}), now).retryAfterMs).toBeUndefined();
  });

  it('transport failures: axios timeouts are timeouts, refused connections server errors', () => {
    const timeout = Object.assign(new Error('timeout of 1000ms exceeded'), { code: 'ECONNABORTED' });
    expect(classifySendgridError(timeout, now)).toMatchObject({ kind: 'timeout', retryable: true });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect(classifySendgridError(refused, now)).toMatchObject({ kind: 'server_error' });
    expect(classifySendgridError(refused, now).message).toMatch(/ECONNREFUSED/);
  });
});
