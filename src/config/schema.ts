/**
 * How Herald reads its environment: each section of the configuration declares its variables as
 * a schema of envalid validators (`integer`, `duration`, `flag`, `url`, `choice`, `text`), read
 * in one pass by `readSection`. Every variable of one kind has one syntax: a whole number, a
 * duration (`30s`, `15m`, `12h`, `7d`), a flag (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`,
 * any case). A blank value counts as unset. A bad value is a problem naming the variable, and the
 * section gets the default in its place, so that one pass names every bad variable at once.
 * Rules across variables stay code, in the sections.
 */
import { customCleanEnv, EnvError, makeValidator } from 'envalid';
import { parseDuration } from '../durations.js';

export type Env = Record<string, string | undefined>;

/** A value a validator refused: what to say about it, given the variable's name. */
class Refused extends EnvError {
  constructor(readonly says: (name: string) => string) {
    super(says('the variable'));
  }
}

/** One variable of a schema: an envalid validator with its default (undefined: optional). */
type Spec<T> = ReturnType<ReturnType<typeof makeValidator<T>>>;

/** A whole number from `min` to `max`. */
export function integer(fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): Spec<number> {
  return makeValidator<number>((raw) => {
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new Refused((name) => `${name}="${raw}" must be a whole number from ${min} to ${max}`);
    }
    return value;
  })({ default: fallback });
}

/** An optional whole number from `min` to `max`. */
export function optionalInteger(min: number, max = Number.MAX_SAFE_INTEGER): Spec<number | undefined> {
  return makeValidator<number | undefined>((raw) => {
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new Refused((name) => `${name}="${raw}" must be a whole number from ${min} to ${max}`);
    }
    return value;
  })({ default: undefined });
}

/** A duration, as ms: longer than zero, or zero too when `allowZero`. */
export function duration(fallbackMs: number, allowZero = false): Spec<number> {
  return makeValidator<number>((raw) => {
    let ms: number;
    try {
      ms = parseDuration(raw);
    } catch (error) {
      throw new Refused((name) => `${name}: ${(error as Error).message}`);
    }
    if (ms <= 0 && !(allowZero && ms === 0)) throw new Refused((name) => `${name}: "${raw}" must be longer than zero`);
    return ms;
  })({ default: fallbackMs });
}

const TRUE = new Set(['true', '1', 'yes', 'on', 't']);
const FALSE = new Set(['false', '0', 'no', 'off', 'f']);

/** A flag, in any case; undefined when unset (the section decides the default). */
export function flag(): Spec<boolean | undefined> {
  return makeValidator<boolean | undefined>((raw) => {
    const word = raw.toLowerCase();
    if (TRUE.has(word)) return true;
    if (FALSE.has(word)) return false;
    throw new Refused((name) => `${name}="${raw}" must be true or false`);
  })({ default: undefined });
}

/** A URL with one of `protocols` (`http:`, `s3:` …); `describe` shows it in a message without its credentials. */
export function url(
  protocols: readonly string[],
  fallback: string | undefined,
  describe: (raw: string) => string,
): Spec<string | undefined> {
  return makeValidator<string | undefined>((raw) => {
    try {
      if (protocols.includes(new URL(raw).protocol)) return raw;
    } catch {
      // Not a URL at all: the same answer as a wrong scheme.
    }
    throw new Refused((name) => `${name}="${describe(raw)}" must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  })({ default: fallback });
}

/** One of `names`. */
export function choice<T extends string>(names: readonly T[], fallback: T): Spec<T> {
  return makeValidator<T>((raw) => {
    if ((names as readonly string[]).includes(raw)) return raw as T;
    throw new Refused((name) => `${name}="${raw}" must be one of ${names.join(', ')}`);
  })({ default: fallback });
}

/** Any text, trimmed; `fallback` when unset. */
export function text<T extends string | undefined>(fallback: T): Spec<string | T> {
  return makeValidator<string | T>((raw) => raw)({ default: fallback });
}

type Schema = Record<string, Spec<unknown>>;
type Values<S extends Schema> = { [K in keyof S]: S[K] extends Spec<infer T> ? T : never };

/** The environment as the schemas read it: values trimmed, blank ones gone. */
export function normalizedEnv(env: Env): Record<string, string> {
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    const trimmed = value?.trim();
    if (trimmed) clean[name] = trimmed;
  }
  return clean;
}

/**
 * Reads one section's variables from `env` (normalized) against its schema. A refused value is
 * pushed to `problems` and read as the variable's default.
 */
export function readSection<S extends Schema>(env: Record<string, string>, schema: S, problems: string[]): Values<S> {
  // Without envalid's strict proxy (its default middleware), which throws on a refused variable's value.
  const values = customCleanEnv(env, schema, (cleaned) => ({ ...cleaned }), {
    reporter: ({ errors }) => {
      for (const [name, error] of Object.entries(errors)) {
        if (error) problems.push(error instanceof Refused ? error.says(name) : `${name}: ${error.message}`);
      }
    },
  }) as Record<string, unknown>;
  const read: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(schema)) {
    read[name] = values[name] ?? (spec as { default?: unknown }).default;
  }
  return read as Values<S>;
}
