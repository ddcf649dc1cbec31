import { describe, expect, it } from 'vitest';
import { fieldLabel } from '../../src/http/timeline.js';

describe('the timeline labels an entry field', () => {
  it('in words, with the unit a name ends in', () => {
    expect(fieldLabel('providerTimeoutMs')).toBe('provider timeout (ms)');
    expect(fieldLabel('smsIdempotencyKey')).toBe('sms idempotency key');
    expect(fieldLabel('contentSha256')).toBe('content sha256');
    expect(fieldLabel('reason')).toBe('reason');
    expect(fieldLabel('lastEmailStatus')).toBe('last email status');
  });
});
