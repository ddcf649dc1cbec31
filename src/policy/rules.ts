import { readFileSync } from 'node:fs';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { LineCounter, parseDocument } from 'yaml';

/** One region's rule in the regional rules file (HERALD_RULES_FILE). */
export interface RegionRule {
  sms: boolean;
  timezone?: string;
  quietHours?: { start: string; end: string };
  smsFrom?: string;
}

/** A validated, versioned regional rules file. */
export interface Rules {
  version: string;
  regions: Record<string, RegionRule>;
  /** Where it was read from, for messages. */
  source: string;
}

export class RulesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RulesError';
  }
}

const HHMM = /^([01]\d|2[0-3]):[0-5]\d$/;
const REGION = /^([A-Z]{2}|\*)$/;

function validTimezone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/**
 * Parses a rules file (JSON, or YAML, which JSON is a subset of) and validates it. Every error
 * names the file and the line of the offending value (or of the syntax error), and the field.
 */
export function parseRules(text: string, source: string): Rules {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  if (doc.errors.length > 0) {
    const error = doc.errors[0]!;
    const line = error.linePos?.[0]?.line ?? lines.linePos(error.pos[0]).line;
    throw new RulesError(`${source}, line ${line}: ${error.message.split('\n')[0]}`);
  }
  const problems: string[] = [];
  const at = (path: (string | number)[]): string => {
    const node = doc.getIn(path, true) as { range?: [number, number, number] } | undefined;
    const start =
      node?.range?.[0] ?? (path.length > 0 ? (doc.getIn(path.slice(0, -1), true) as { range?: number[] } | undefined)?.range?.[0] : 0) ?? 0;
    return `${source}, line ${lines.linePos(start).line}, field ${path.join('.') || '(top level)'}`;
  };
  const data = doc.toJS() as unknown;
  if (!data || typeof data !== 'object' || Array.isArray(data)) throw new RulesError(`${at([])}: the rules must be an object`);
  const root = data as Record<string, unknown>;
  if (typeof root.version !== 'string' || root.version.trim() === '')
    problems.push(`${at(['version'])}: "version" must be a non-empty string`);
  const regions = root.regions;
  if (!regions || typeof regions !== 'object' || Array.isArray(regions)) {
    problems.push(`${at(['regions'])}: "regions" must be an object of region codes`);
  } else {
    for (const [code, rule] of Object.entries(regions as Record<string, unknown>)) {
      const path = ['regions', code];
      if (!REGION.test(code)) problems.push(`${at(path)}: region "${code}" must be an ISO 3166-1 alpha-2 code or "*"`);
      if (!rule || typeof rule !== 'object' || Array.isArray(rule)) {
        problems.push(`${at(path)}: the rule must be an object`);
        continue;
      }
      const r = rule as Record<string, unknown>;
      for (const key of Object.keys(r)) {
        if (!['sms', 'timezone', 'quietHours', 'smsFrom'].includes(key)) problems.push(`${at([...path, key])}: unknown field "${key}"`);
      }
      if (typeof r.sms !== 'boolean') problems.push(`${at([...path, 'sms'])}: "sms" must be true or false`);
      if (r.timezone !== undefined && (typeof r.timezone !== 'string' || !validTimezone(r.timezone))) {
        problems.push(`${at([...path, 'timezone'])}: "${String(r.timezone)}" is not an IANA time zone`);
      }
      if (r.quietHours !== undefined) {
        const q = r.quietHours as Record<string, unknown> | null;
        if (!q || typeof q !== 'object') problems.push(`${at([...path, 'quietHours'])}: quietHours must be { start, end }`);
        else {
          for (const end of ['start', 'end']) {
            if (typeof q[end] !== 'string' || !HHMM.test(q[end] as string))
              problems.push(`${at([...path, 'quietHours', end])}: "${end}" must be HH:MM`);
          }
          if (r.timezone === undefined) problems.push(`${at([...path, 'quietHours'])}: quietHours need a "timezone"`);
        }
      }
      if (r.smsFrom !== undefined && (typeof r.smsFrom !== 'string' || !parsePhoneNumberFromString(r.smsFrom)?.isPossible())) {
        problems.push(`${at([...path, 'smsFrom'])}: "smsFrom" must be an E.164 number`);
      }
    }
  }
  if (problems.length > 0) throw new RulesError(problems.join('\n'));
  return { version: root.version as string, regions: regions as Record<string, RegionRule>, source };
}

/** Reads and validates the rules file at start-up. */
export function loadRules(path: string): Rules {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new RulesError(`${path}: cannot read the rules file (${(error as Error).message})`);
  }
  return parseRules(text, path);
}

/** The rule for a region: its own, else the "*" rule, else none (SMS allowed, no quiet hours). */
export function ruleFor(rules: Rules | undefined, region: string | undefined): RegionRule | undefined {
  if (!rules) return undefined;
  return (region !== undefined ? rules.regions[region] : undefined) ?? rules.regions['*'];
}

/**
 * When quiet hours hold at `now` in the rule's time zone, the first minute after they end;
 * otherwise undefined. Windows may wrap midnight (21:00–08:00).
 */
export function quietUntil(rule: RegionRule | undefined, now: number): number | undefined {
  if (!rule?.quietHours || !rule.timezone) return undefined;
  const parts = new Intl.DateTimeFormat('en-GB', {
    timeZone: rule.timezone,
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(now);
  const minuteOfDay = Number(parts.find((p) => p.type === 'hour')!.value) * 60 + Number(parts.find((p) => p.type === 'minute')!.value);
  const toMinutes = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
  const start = toMinutes(rule.quietHours.start);
  const end = toMinutes(rule.quietHours.end);
  const inside = start <= end ? minuteOfDay >= start && minuteOfDay < end : minuteOfDay >= start || minuteOfDay < end;
  if (!inside) return undefined;
  const minutesLeft = (end - minuteOfDay + 1440) % 1440;
  const startOfMinute = now - (now % 60_000);
  return startOfMinute + minutesLeft * 60_000;
}
