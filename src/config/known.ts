/**
 * The HERALD_* variables Herald reads, so that a misspelt one is named at start-up instead of
 * passing unnoticed (a warning: the process still starts).
 */
import { SCHEMA as ARCHIVE } from './archive.js';
import { SCHEMA as ENGINE } from './engine.js';
import { SCHEMA as EVENTS } from './events.js';
import { SCHEMA as PLATFORM } from './platform.js';
import { SCHEMA as PROVIDERS } from './providers.js';
import { SCHEMA as REDIS } from './redis.js';
import { SCHEMA as WEB } from './web.js';
import type { Env } from './schema.js';

/** Read outside the configuration: by `npm start` (the sandbox), and by callers of the typed client and `herald send`. */
const READ_ELSEWHERE = ['HERALD_SANDBOX_PORT', 'HERALD_SANDBOX_WEBHOOKS', 'HERALD_KEY', 'HERALD_URL'];

/** Set by the project's own tests and bench for their harness, never by a deployment. */
const HARNESS = /^HERALD_(TEST|BENCH)_/;

export const KNOWN_HERALD_VARIABLES: ReadonlySet<string> = new Set(
  [...[ARCHIVE, ENGINE, EVENTS, PLATFORM, PROVIDERS, REDIS, WEB].flatMap((schema) => Object.keys(schema)), ...READ_ELSEWHERE].filter(
    (name) => name.startsWith('HERALD_'),
  ),
);

/** Each HERALD_* variable of `env` Herald does not read, with the known one it most likely meant. */
export function unknownHeraldVariables(env: Env): { name: string; meant: string | undefined }[] {
  return Object.keys(env)
    .filter((name) => name.startsWith('HERALD_') && !KNOWN_HERALD_VARIABLES.has(name) && !HARNESS.test(name))
    .sort()
    .map((name) => ({ name, meant: closest(name) }));
}

/** The known name at the least edit distance from `name`, if it is close enough to be a typo. */
function closest(name: string): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const known of KNOWN_HERALD_VARIABLES) {
    const distance = editDistance(name, known);
    if (!best || distance < best.distance) best = { name: known, distance };
  }
  return best && best.distance <= Math.max(2, Math.floor(name.length / 6)) ? best.name : undefined;
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const next = [i];
    for (let j = 1; j <= b.length; j += 1) {
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[b.length]!;
}
