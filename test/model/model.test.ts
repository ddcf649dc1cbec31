import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TRANSITIONS } from '../../src/notice/transitions.js';

const MODEL_DIR = fileURLToPath(new URL('../../model/', import.meta.url));
const CHECK = `${MODEL_DIR}check.sh`;

function hasSpin(): boolean {
  try {
    execFileSync('spin', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const spin = hasSpin();
if (!spin) console.warn('model check skipped: no `spin` on PATH (.ci/run installs it with apt-get install -y spin)');

/** The transition names the model defines: one `inline` per move of TRANSITIONS. */
function modelTransitions(): string[] {
  const text = readFileSync(`${MODEL_DIR}herald.pml`, 'utf8');
  const start = text.indexOf('/* ---- the transitions');
  const end = text.indexOf('/* ---- the steps');
  return [...text.slice(start, end).matchAll(/^inline (\w+)\(/gm)].map((m) => m[1]!);
}

function check(file: string) {
  return spawnSync('bash', [CHECK, `${MODEL_DIR}${file}`], { encoding: 'utf8' });
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
    it('fails on the broken variant (no attempt guard before the SMS send), printing the trail', () => {
      const run = check('herald-broken.pml');
      expect(run.status).toBe(1);
      expect(run.stderr).toContain('assertion violated');
      expect(run.stderr).toContain('counterexample');
      expect(run.stderr).toMatch(/proc\s+\d+ \(Herald/);
    }, 600_000);
  });
});
