/**
 * `npm run compare`: runs the provider comparison (bench/compare.ts) against every provider of
 * EMAIL_PROVIDERS and SMS_PROVIDERS, prints the table and writes it into docs/PROVIDERS.md
 * (between its markers). It starts what it needs: the sandbox in this process, a web and a
 * worker process per provider, on the Redis at REDIS_URL under key prefixes of its own, which it
 * deletes. COMPARE_PROVIDERS (a comma-separated list of names) narrows the run; a narrowed run
 * prints its table but leaves docs/PROVIDERS.md as it is. COMPARE_PARALLEL (default 1) runs that
 * many providers at once.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EMAIL_PROVIDERS, SMS_PROVIDERS } from '../src/providers/registry.js';
import { startSandbox } from '@herald/sandbox';
import { compare, report } from './compare.js';

/** The repository root: this file is compiled into dist/bench/. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RESULTS_FILE = 'docs/PROVIDERS.md';
const [START, END] = ['<!-- compare:last-run:start -->', '<!-- compare:last-run:end -->'];

const only = process.env.COMPARE_PROVIDERS?.split(',')
  .map((name) => name.trim())
  .filter(Boolean);
const unknown = only?.filter((name) => ![...EMAIL_PROVIDERS, ...SMS_PROVIDERS].includes(name as never)) ?? [];
if (unknown.length > 0) throw new Error(`COMPARE_PROVIDERS names unknown providers (${unknown.join(', ')})`);
const chosen = (names: readonly string[]) => names.filter((name) => !only || only.includes(name));

const started = Date.now();
const sandbox = await startSandbox({ port: 0 });
try {
  const results = await compare({
    root: ROOT,
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    sandbox,
    email: chosen(EMAIL_PROVIDERS),
    sms: chosen(SMS_PROVIDERS),
    log: (message) => console.error(`[compare ${((Date.now() - started) / 1000).toFixed(0)}s] ${message}`),
  });
  const table = report(results, {
    seconds: (Date.now() - started) / 1000,
    date: new Date().toISOString().slice(0, 10),
    commit: gitCommit(),
  });
  console.log(table);
  if (only) console.log(`\nCOMPARE_PROVIDERS set: ${RESULTS_FILE} left as it is`);
  else {
    writeSection(`${ROOT}${RESULTS_FILE}`, table);
    console.log(`\nwrote the last-run section of ${RESULTS_FILE}`);
  }
} finally {
  await sandbox.close();
}

/** Replaces the section between the markers with `section`. */
function writeSection(file: string, section: string): void {
  const text = readFileSync(file, 'utf8');
  const from = text.indexOf(START);
  const to = text.indexOf(END);
  if (from < 0 || to < from) throw new Error(`${file} has no ${START} … ${END} section to write the run into`);
  writeFileSync(file, `${text.slice(0, from + START.length)}\n${section}\n${text.slice(to)}`);
}

function gitCommit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}
