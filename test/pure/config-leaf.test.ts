/**
 * The configuration is a leaf: reading it loads no provider SDK and nothing of the product but
 * small value modules. Checked on the runtime imports of the source (type imports are erased by
 * the compiler and load nothing).
 */
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, unknownHeraldVariables } from '../../src/config.js';
import { configProblems } from '../helpers/env.js';
import { ROOT, runtimeClosure } from '../helpers/imports.js';

describe('the configuration', () => {
  const { files, packages } = runtimeClosure('src/config.ts');

  it('loads no provider SDK, queue, web framework or Redis client', () => {
    for (const sdk of [
      'twilio',
      'postmark',
      '@sendgrid/mail',
      '@sendgrid/client',
      'mailgun.js',
      '@aws-sdk/client-sesv2',
      '@aws-sdk/client-sqs',
      '@aws-sdk/client-s3',
      '@aws-sdk/client-pinpoint-sms-voice-v2',
      'bullmq',
      'fastify',
      'ioredis',
      'pino',
    ]) {
      expect(packages, sdk).not.toContain(sdk);
    }
    expect([...packages].sort()).toEqual(['envalid', 'libphonenumber-js', 'yaml']);
  });

  it('imports nothing of the product but its sections and small value modules', () => {
    const product = [...files].map((file) => relative(ROOT, file)).filter((file) => !file.startsWith('src/config'));
    expect(product.sort()).toEqual([
      'src/clock.ts',
      'src/crypto.ts',
      'src/digest.ts',
      'src/durations.ts',
      'src/notice/ids.ts',
      'src/policy/rules.ts',
      'src/providers/names.ts',
    ]);
  });

  it('reads every flag with one syntax, in any case', () => {
    const production = { NODE_ENV: 'production', HERALD_PROVIDERS: 'live', POSTMARK_API_URL: 'http://127.0.0.1:8080' };
    for (const yes of ['1', 'true', 'TRUE', 'yes', 'on']) {
      expect(configProblems({ ...production, HERALD_ALLOW_INSECURE_PROVIDER_URLS: yes }).join('\n'), yes).not.toMatch(/POSTMARK_API_URL/);
    }
    for (const no of ['0', 'false', 'No', 'off']) {
      expect(configProblems({ ...production, HERALD_ALLOW_INSECURE_PROVIDER_URLS: no }).join('\n'), no).toMatch(
        /POSTMARK_API_URL must be an https/,
      );
    }
    expect(configProblems({ HERALD_ALLOW_INSECURE_PROVIDER_URLS: 'perhaps' })).toEqual([
      'HERALD_ALLOW_INSECURE_PROVIDER_URLS="perhaps" must be true or false',
    ]);
    expect(loadConfig({ S3_FORCE_PATH_STYLE: 'Yes' }).s3.forcePathStyle).toBe(true);
    expect(loadConfig({ HERALD_ADMIN_READ_ONLY: 'on' }).adminReadOnly).toBe(true);
  });

  it('names a HERALD_* variable it does not read, with the one most likely meant', () => {
    expect(
      unknownHeraldVariables({
        HERALD_CONTENT_TLL: '3d',
        HERALD_PREFIX: 'x',
        HERALD_SOMETHING_ELSE: '1',
        HERALD_TEST_TOPOLOGY: 'cluster',
        PATH: '/bin',
      }),
    ).toEqual([
      { name: 'HERALD_CONTENT_TLL', meant: 'HERALD_CONTENT_TTL' },
      { name: 'HERALD_SOMETHING_ELSE', meant: undefined },
    ]);
  });
});
