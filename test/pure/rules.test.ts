import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { decideSms } from '../../src/policy/decide.js';
import { loadRules, parseRules, quietUntil, ruleFor } from '../../src/policy/rules.js';

const rules = loadRules(new URL('../fixtures/rules.json', import.meta.url).pathname);
const at = (iso: string) => Date.parse(iso);

function configProblem(text: string, name = 'rules.yaml'): string {
  const dir = mkdtempSync(join(tmpdir(), 'herald-rules-'));
  const file = join(dir, name);
  writeFileSync(file, text);
  try {
    loadConfig({ HERALD_RULES_FILE: file });
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  return '';
}

describe('the regional rules file', () => {
  it('reads JSON and YAML alike', () => {
    const yaml = parseRules('version: "1"\nregions:\n  DE:\n    sms: false\n', 'r.yaml');
    expect(yaml.regions.DE).toEqual({ sms: false });
    expect(rules.version).toBe('2026-11-01');
  });

  it('stops start-up with a message naming the file, the line and the field of a bad value', () => {
    const message = configProblem('version: "1"\nregions:\n  JP:\n    sms: true\n    timezone: Mars/Olympus\n');
    expect(message).toMatch(/rules\.yaml, line 5, field regions\.JP\.timezone: "Mars\/Olympus" is not an IANA time zone/);
  });

  it('names the line of a syntax error', () => {
    const message = configProblem('{\n  "version": "1",\n  "regions": { "DE": { "sms": false }\n', 'rules.json');
    expect(message).toMatch(/rules\.json, line \d+:/);
  });

  it('refuses quiet hours without a time zone, bad times and unknown fields', () => {
    let message = '';
    try {
      parseRules('{"version":"1","regions":{"FR":{"sms":true,"quietHours":{"start":"25:00","end":"08:00"},"colour":"red"}}}', 'f.json');
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/field regions\.FR\.quietHours\.start: "start" must be HH:MM/);
    expect(message).toMatch(/unknown field "colour"/);
    expect(message).toMatch(/quietHours need a "timezone"/);
  });

  it('falls back to the "*" rule for regions it does not name', () => {
    expect(ruleFor(rules, 'US')).toEqual({ sms: true });
    expect(ruleFor(undefined, 'JP')).toBeUndefined();
  });
});

describe('quiet hours', () => {
  const jp = ruleFor(rules, 'JP');
  it('hold across midnight in the region’s time zone and end at the window’s end', () => {
    // 22:30 in Tokyo is 13:30 UTC.
    expect(quietUntil(jp, at('2026-11-29T13:30:00Z'))).toBe(at('2026-11-29T23:00:00Z'));
    // 07:59 in Tokyo.
    expect(quietUntil(jp, at('2026-11-29T22:59:00Z'))).toBe(at('2026-11-29T23:00:00Z'));
    // 08:00 in Tokyo: open.
    expect(quietUntil(jp, at('2026-11-29T23:00:00Z'))).toBeUndefined();
    // 15:00 in Tokyo.
    expect(quietUntil(jp, at('2026-11-29T06:00:00Z'))).toBeUndefined();
  });
});

describe('the SMS policy decision', () => {
  const base = { phone: '+819012345678', region: 'JP', consentSms: true, smsSuppressed: false, rules, complianceDeadline: undefined };
  it('checks phone, consent, suppression and region, in that order', () => {
    expect(decideSms({ ...base, phone: undefined, now: 0 })).toEqual({ outcome: 'no_address', block: 'no_phone' });
    expect(decideSms({ ...base, consentSms: false, now: 0 })).toEqual({ outcome: 'no_consent', block: 'sms_consent_missing' });
    expect(decideSms({ ...base, smsSuppressed: true, now: 0 })).toEqual({ outcome: 'suppressed', block: 'sms_suppressed' });
    expect(decideSms({ ...base, region: 'DE', now: 0 })).toEqual({ outcome: 'region_blocked', block: 'region_blocked' });
  });
  it('waits for the end of quiet hours, with the regional sender', () => {
    expect(decideSms({ ...base, now: at('2026-11-29T13:30:00Z') })).toEqual({
      outcome: 'allowed',
      sendNotBefore: at('2026-11-29T23:00:00Z'),
      timingRule: 'quiet_hours',
      from: '+815000000000',
    });
  });
  it('does not wait when the compliance deadline comes first, and says which rule won', () => {
    expect(decideSms({ ...base, now: at('2026-11-29T13:30:00Z'), complianceDeadline: at('2026-11-29T15:00:00Z') })).toEqual({
      outcome: 'allowed',
      timingRule: 'compliance_deadline',
      from: '+815000000000',
    });
  });
});
