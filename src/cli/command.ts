/**
 * What every `herald` command is and takes: a name, a one-line summary for `herald --help`, its
 * usage, and a run function over an injected `CliIo`, so that tests run commands in-process.
 */
import type { Writable } from 'node:stream';
import { parseDuration } from '../durations.js';

/** Where the CLI writes, and what it reads the configuration from (tests pass their own). */
export interface CliIo {
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
  env: Record<string, string | undefined>;
  now: () => number;
}

/** One `herald` command. */
export interface CliCommand {
  /** The word that names it: `herald <name> …`. */
  name: string;
  /** One line for `herald --help`. */
  summary: string;
  /** Its forms and options, printed by `herald <name> --help` and after a usage error. */
  usage: string;
  /** Runs it with the arguments after its name; resolves with the exit code. */
  run(args: string[], io: CliIo): Promise<number>;
}

/** Arguments the command cannot take: the dispatcher prints the command's usage and exits 2. */
export class UsageError extends Error {}

/** An ISO 8601 time, or an age like `24h` meaning that long before `now`. */
export function parseTime(text: string, now: number, option: string): number {
  if (/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/.test(text.trim())) return now - parseDuration(text);
  const ms = Date.parse(text);
  if (!Number.isFinite(ms)) throw new UsageError(`${option} "${text}" is neither an ISO 8601 time nor an age like 24h`);
  return ms;
}
