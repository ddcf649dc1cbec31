import { Errors } from 'postmark';
import twilio from 'twilio';
import { describe, expect, it } from 'vitest';
import { classifyPostmarkError, classifyTwilioError } from '../../src/providers/classify.js';
import { parseRetryAfter } from '../../src/providers/http-trace.js';
import { ProviderError } from '../../src/providers/types.js';

/** What the SDK's error handler builds for an error answer (the adapter tests go through the real one). */
const postmarkError = (status: number, code: number) =>
  status === 422 ? Errors.ApiInputError.buildSpecificError('boom', code, status) : new Errors.HttpError('boom', code, status);
const restException = (status: number, code: number) =>
  new twilio.RestException({ statusCode: status, body: { code, message: `error ${code}`, more_info: '', status } });

describe('classifying Postmark errors', () => {
  it.each([
    [500, 0, 'server_error'],
    [503, 0, 'server_error'],
    [401, 10, 'server_error'],
    [422, 405, 'server_error'],
    [422, 300, 'rejected'],
    [422, 406, 'rejected'],
    [429, 0, 'rate_limited'],
  ] as const)('HTTP %i ErrorCode %i → %s', (status, code, kind) => {
    const cause = postmarkError(status, code);
    const error = classifyPostmarkError(cause);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ kind, httpStatus: status, retryable: kind !== 'rejected' });
    expect(error.cause).toBe(cause);
  });

  it('marks an inactive recipient (406) as suppressed, and only that', () => {
    expect(classifyPostmarkError(postmarkError(422, 406)).suppressed).toBe(true);
    expect(classifyPostmarkError(postmarkError(422, 300)).suppressed).toBe(false);
  });

  it('takes Retry-After from the trace for 429 answers', () => {
    const error = classifyPostmarkError(new Errors.RateLimitExceededError('slow down', 0, 429), { retryAfterMs: 2000 });
    expect(error).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2000 });
  });

  it('reads transport failures from the trace: timeouts vs refused connections', () => {
    const bare = new Errors.PostmarkError('fetch failed');
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    expect(classifyPostmarkError(bare, { transportError: new TypeError('fetch failed', { cause: refused }) })).toMatchObject({
      kind: 'server_error',
    });
    const timeout = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    expect(classifyPostmarkError(bare, { transportError: timeout }).kind).toBe('timeout');
    expect(classifyPostmarkError(new Errors.PostmarkError('The operation was aborted due to timeout')).kind).toBe('timeout');
  });
});

describe('classifying Twilio errors', () => {
  it.each([
    [500, 20500, 'server_error', false],
    [503, 20503, 'server_error', false],
    [401, 20003, 'server_error', false],
    [429, 20429, 'rate_limited', false],
    [400, 21211, 'rejected', false],
    [400, 21610, 'rejected', true],
    [404, 20404, 'rejected', false],
  ] as const)('HTTP %i code %i → %s (suppressed %s)', (status, code, kind, suppressed) => {
    const error = classifyTwilioError(restException(status, code), { retryAfterMs: 1000 });
    expect(error).toMatchObject({ kind, suppressed, httpStatus: status, providerCode: code });
    expect(error.retryAfterMs).toBe(kind === 'rate_limited' ? 1000 : undefined);
  });

  it('treats code 20429 as rate limited whatever the HTTP status', () => {
    expect(classifyTwilioError(restException(400, 20429)).kind).toBe('rate_limited');
  });

  it('classifies axios transport errors by code', () => {
    const axiosError = (code: string) => Object.assign(new Error(code), { isAxiosError: true, code });
    expect(classifyTwilioError(axiosError('ECONNABORTED')).kind).toBe('timeout');
    expect(classifyTwilioError(axiosError('ETIMEDOUT')).kind).toBe('timeout');
    expect(classifyTwilioError(axiosError('ECONNRESET')).kind).toBe('server_error');
    expect(classifyTwilioError(axiosError('ECONNREFUSED')).kind).toBe('server_error');
  });

  it('passes ProviderErrors through untouched', () => {
    const original = new ProviderError('x', { kind: 'rejected' });
    expect(classifyTwilioError(original)).toBe(original);
    expect(classifyPostmarkError(original)).toBe(original);
  });
});

describe('Retry-After', () => {
  it('reads seconds and HTTP dates', () => {
    expect(parseRetryAfter('1')).toBe(1000);
    expect(parseRetryAfter('0')).toBe(0);
    expect(parseRetryAfter('Sat, 29 Nov 2026 14:00:05 GMT', Date.parse('2026-11-29T14:00:00Z'))).toBe(5000);
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
  });
});
