import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../src/http/errors.js';

const readme = readFileSync(new URL('../../docs/API.md', import.meta.url), 'utf8');

describe('the error catalogue', () => {
  for (const [code, { status }] of Object.entries(ERROR_CATALOGUE)) {
    it(`documents ${code} with status ${status} in docs/API.md`, () => {
      expect(readme).toMatch(new RegExp(`\\|\\s*\`${code}\`\\s*\\|\\s*${status}\\s*\\|`));
    });
  }
  it('uses snake_case codes', () => {
    for (const code of Object.keys(ERROR_CATALOGUE)) expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });
});
