#!/usr/bin/env node
/**
 * `herald`: the entry point. It looks a command up in the table, answers `--help` and
 * `--version`, and turns what a command throws into its exit code; each command lives in
 * `src/cli/<name>.ts` and reads Redis and the archive through `composeCli` (src/compose.ts).
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ConfigError } from './config.js';
import { auditCommand } from './cli/audit.js';
import { UsageError, type CliCommand, type CliIo } from './cli/command.js';
import { doctorCommand } from './cli/doctor.js';
import { exportCommand } from './cli/export.js';
import { keysCommand } from './cli/keys.js';
import { noticesCommand } from './cli/notices.js';
import { policyCommand } from './cli/policy.js';
import { retentionCommand } from './cli/retention.js';
import { sendCommand } from './cli/send.js';
import { packageVersion } from './cli/version.js';

export type { CliCommand, CliIo } from './cli/command.js';

/** Every command, in the order `herald --help` lists them. */
export const COMMANDS: readonly CliCommand[] = [
  auditCommand,
  exportCommand,
  doctorCommand,
  retentionCommand,
  noticesCommand,
  policyCommand,
  keysCommand,
  sendCommand,
];

/** `herald --help`: what the commands are for, one line each. */
function commandList(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return [
    "herald: read and keep Herald's audit trail (uses the same environment as web and worker)",
    '',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    '',
    "`herald <command> --help` prints a command's usage, `herald --version` the version.",
    '',
  ].join('\n');
}

/** Runs one `herald` command; resolves with the exit code. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    io.stderr.write(commandList());
    return 2;
  }
  if (name === '--help' || name === '-h' || (name === 'help' && args.length === 0)) {
    io.stdout.write(commandList());
    return 0;
  }
  const topic = name === 'help' ? args[0] : name;
  const command = COMMANDS.find((c) => c.name === topic);
  try {
    if (name === '--version') {
      io.stdout.write(`${packageVersion()}\n`);
      return 0;
    }
    if (command === undefined) {
      io.stderr.write(`herald: unknown command "${topic}"\n\n${commandList()}`);
      return 2;
    }
    // Before the configuration is read: the usage is there to be read while the environment is not right yet.
    if (name === 'help' || asksForHelp(args)) {
      io.stdout.write(command.usage);
      return 0;
    }
    return await command.run(args, io);
  } catch (error) {
    if (isUsageError(error)) {
      io.stderr.write(`herald: ${error.message}\n\n${command?.usage ?? commandList()}`);
      return 2;
    }
    if (error instanceof ConfigError) {
      io.stderr.write(`${error.message}\n`);
      return 2;
    }
    io.stderr.write(`herald: ${(error as Error | undefined)?.message ?? String(error)}\n`);
    return 1;
  }
}

/** What the command line got wrong: a UsageError of a command's, or what node:util's parseArgs refused. */
function isUsageError(error: unknown): error is Error {
  if (error instanceof UsageError) return true;
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return error instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS');
}

/** `--help` or `-h` among a command's arguments, before a `--` that ends its options. */
function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

/** Whether node was started on this file: by its path, or through a link to it (the `bin` link a package install makes). */
function isMain(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
}

if (isMain()) {
  // `herald export … | head` closes the pipe early: that is the reader's choice, not an error.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => process.exit(error.code === 'EPIPE' ? 0 : 1));
  runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, now: () => Date.now() }).then(
    (code) => {
      // Exit once what was written has gone out: a probe that never answers (an archive on a
      // hung mount) must not keep the command alive after it has reported.
      process.stdout.write('', () => process.exit(code));
    },
  );
}
