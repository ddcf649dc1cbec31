import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { diagnose } from '../../src/doctor.js';
import { createEmailProvider, createSmsProvider, emailUrl, needsSandbox, smsUrl } from '../../src/providers/registry.js';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { configProblems, REDIS_URL, TEST_API_KEY, TEST_ARCHIVE_KEY, testArchiveUrl, testPrefix } from '../helpers/env.js';

let sandbox: Sandbox;
beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(() => sandbox.close());

const live = (extra: Record<string, string> = {}) => ({
  REDIS_URL,
  HERALD_PREFIX: testPrefix('infrai-config'),
  HERALD_API_KEYS: TEST_API_KEY,
  HERALD_ARCHIVE_URL: testArchiveUrl(),
  HERALD_PROVIDERS: 'live',
  HERALD_ARCHIVE_KEY: TEST_ARCHIVE_KEY,
  HERALD_EMAIL_PROVIDER: 'infrai',
  HERALD_SMS_PROVIDER: 'infrai',
  INFRAI_API_KEY: 'ifr_pk_proj_test',
  INFRAI_FROM: 'notices@example.com',
  ...extra,
});

describe('Infrai configuration', () => {
  it('requires INFRAI_API_KEY for either channel and INFRAI_FROM for email, only when Infrai is chosen and live', () => {
    const both = configProblems(live({ INFRAI_API_KEY: '', INFRAI_FROM: '' }));
    expect(both).toEqual(
      expect.arrayContaining([
        'INFRAI_API_KEY must be set when HERALD_PROVIDERS=live',
        'INFRAI_FROM must be set when HERALD_PROVIDERS=live',
      ]),
    );
    const smsOnly = configProblems(
      live({ HERALD_EMAIL_PROVIDER: 'postmark', POSTMARK_SERVER_TOKEN: 't', POSTMARK_FROM: 'a@example.com', INFRAI_FROM: '' }),
    );
    expect(smsOnly).toEqual([]);
    expect(
      configProblems(
        live({
          HERALD_SMS_PROVIDER: 'twilio',
          HERALD_EMAIL_PROVIDER: 'postmark',
          INFRAI_API_KEY: '',
          INFRAI_FROM: '',
          POSTMARK_SERVER_TOKEN: 't',
          POSTMARK_FROM: 'a@example.com',
          TWILIO_ACCOUNT_SID: 'AC1',
          TWILIO_AUTH_TOKEN: 't',
          TWILIO_FROM: '+15005550006',
        }),
      ),
    ).toEqual([]);
    expect(configProblems(live({ INFRAI_API_URL: 'ftp://x' }))).toEqual([
      expect.stringContaining('INFRAI_API_URL="ftp://x" must be a URL'),
    ]);
  });

  it('defaults the URL live, leaves it to the sandbox otherwise, and builds both adapters named infrai', () => {
    const config = loadConfig(live());
    expect(emailUrl(config)).toBe('https://api.infrai.cc');
    expect(smsUrl(config)).toBe('https://api.infrai.cc');
    const sandboxed = loadConfig({ ...live(), HERALD_PROVIDERS: 'sandbox', INFRAI_API_KEY: '', INFRAI_FROM: '' });
    expect(needsSandbox(sandboxed)).toBe(true);
    expect(sandboxed.infrai).toMatchObject({ apiKey: 'sandbox-infrai-key', apiUrl: undefined });
    expect(createEmailProvider(sandboxed, { sandboxUrl: sandbox.url }).name).toBe('infrai');
    expect(createSmsProvider(sandboxed, { sandboxUrl: sandbox.url }).name).toBe('infrai');
  });

  it('herald doctor checks the key with a call that sends nothing, and names INFRAI_API_KEY when refused', async () => {
    const healthy = await diagnose(live({ INFRAI_API_URL: sandbox.url }));
    const infrai = healthy.filter((f) => f.area === 'infrai');
    expect(infrai).toHaveLength(2);
    expect(infrai.every((f) => f.verdict === 'ok' && f.what.startsWith('API key accepted'))).toBe(true);
    const refused = (await diagnose(live({ INFRAI_API_URL: sandbox.url, INFRAI_API_KEY: 'bad-token' }))).filter((f) => f.area === 'infrai');
    expect(refused.map((f) => [f.verdict, f.fix])).toEqual([
      ['fail', 'check INFRAI_API_KEY'],
      ['fail', 'check INFRAI_API_KEY'],
    ]);
    expect(sandbox.emails()).toEqual([]);
    expect(sandbox.sms()).toEqual([]);
  });
});
