import { DAY, HOUR, MINUTE, SECOND } from './clock.js';

const UNITS: Record<string, number> = { ms: 1, s: SECOND, m: MINUTE, h: HOUR, d: DAY };

/** Parses a duration written like `30s`, `15m`, `12h`, `7d`, `400d` or `250ms` into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(text);
  if (!match) throw new Error(`"${text}" is not a duration (write it like 30s, 15m, 12h, 7d)`);
  return Math.round(Number(match[1]) * UNITS[match[2]!]!);
}

/** Writes milliseconds back in the largest whole unit (`7d`, `90s`, `250ms`). */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = UNITS[unit]!;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
