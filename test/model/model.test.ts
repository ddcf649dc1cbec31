import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TRANSITIONS } from '../../src/notice/transitions.js';

const MODEL_DIR = fileURLToPath(new URL('../../model/', import.meta.url));
const CHECK = `${MODEL_DIR}check.sh`;

function hasTool(command: string, args: string[]): boolean {
  try {
    execFileSync(command, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const spin = hasTool('spin', ['-V']) && hasTool('gcc', ['--version']);
if (!spin && process.env.HERALD_TEST_REQUIRE_TOOLS === '1') {
  // CI requires the tools its tests need: a missing model checker fails, it is not skipped.
  throw new Error('`spin` or `gcc` is not on PATH: the model check cannot run (apt-get install -y spin gcc)');
}
if (!spin) {
  console.warn('SPIN model check SKIPPED: `spin` or `gcc` is not on PATH (.ci/run installs them; Debian: apt-get install -y spin gcc)');
}

/** The transition names the model defines: one `inline` per move of TRANSITIONS. */
function modelTransitions(): string[] {
  const text = readFileSync(`${MODEL_DIR}herald.pml`, 'utf8');
  const start = text.indexOf('/* ---- the transitions');
  const end = text.indexOf('/* ---- the steps');
  return [...text.slice(start, end).matchAll(/^inline (\w+)\(/gm)].map((m) => m[1]!);
}

function check(file: string) {
  const run = spawnSync('bash', [CHECK, `${MODEL_DIR}${file}`], { encoding: 'utf8' });
  // What SPIN said, in the test's output: the figures of a pass, the trail of a failure.
  console.log(`model/check.sh ${file}: exit ${run.status}\n${run.stdout}${run.stderr}`);
  return run;
}

describe('the SPIN model of the exactly-once protocol (model/)', () => {
  it('names exactly the transitions of TRANSITIONS, each once', () => {
    const names = modelTransitions();
    expect(new Set(names).size).toBe(names.length);
    expect([...names].sort()).toEqual(Object.keys(TRANSITIONS).sort());
  });

  it('maps every transition in its README', () => {
    const readme = readFileSync(`${MODEL_DIR}README.md`, 'utf8');
    for (const name of Object.keys(TRANSITIONS)) expect(readme).toContain(`\`${name}\``);
  });

  describe.skipIf(!spin)('when SPIN checks it', () => {
    it('proves the model of the code exhaustively: every assertion, the log invariant, an SMS for every notice that needs one', () => {
      const run = check('herald.pml');
      expect(run.status).toBe(0);
      expect(run.stdout).toMatch(/== safety[^\n]*\n[^]*errors: 0[^]*== liveness[^\n]*\n[^]*errors: 0/);
      expect(run.stdout).toContain('model check passed: herald.pml');
      expect(run.stderr).not.toContain('did not complete');
    }, 1_200_000);

    it('fails on the broken variant (no attempt guard before the SMS send), printing the trail', () => {
      const run = check('herald-broken.pml');
      expect(run.status).toBe(1);
      expect(run.stderr).toContain('assertion violated (smsHanded<=1)');
      expect(run.stderr).toContain('counterexample');
      expect(run.stderr).toMatch(/proc\s+\d+ \(Herald/);
    }, 600_000);

    it('fails on the code before the in-doubt fix (a search at once), printing the trail', () => {
      const run = check('herald-before-fix.pml');
      expect(run.status).toBe(1);
      expect(run.stderr).toContain('assertion violated (smsHanded<=1)');
      expect(run.stderr).toMatch(/proc\s+\d+ \(Herald/);
    }, 600_000);
  });
});
