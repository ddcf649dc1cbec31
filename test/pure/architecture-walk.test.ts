/**
 * ARCHITECTURE.md walks one notice from the route to the SMS decision in at most ten files; the
 * walk must match the code: every file it names exists, and each function it names there is
 * defined in that file.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const doc = readFileSync(`${ROOT}ARCHITECTURE.md`, 'utf8');
const walk = doc.slice(doc.indexOf('## One notice, from the route to the SMS decision'), doc.indexOf('The SMS then leaves'));
/** The walk's steps: `N. \`file\` — text`. */
const steps = [...walk.matchAll(/^(\d+)\. `([^`]+)` — ([\s\S]*?)(?=^\d+\. `|$(?![\s\S]))/gm)].map((m) => ({ file: m[2]!, text: m[3]! }));

describe("ARCHITECTURE.md's walk of one notice", () => {
  it('takes at most ten files, each of them real', () => {
    expect(steps.length).toBeGreaterThanOrEqual(8);
    expect(steps.length).toBeLessThanOrEqual(10);
    expect(new Set(steps.map((s) => s.file)).size).toBe(steps.length);
    for (const { file } of steps) expect(existsSync(`${ROOT}${file}`), file).toBe(true);
  });

  it('names functions where they are defined', () => {
    const defines = (file: string, name: string) =>
      new RegExp(`(function|class|const|async function)\\s+${name}\\b|^\\s+(async\\s+)?${name}\\(|^\\s+${name}:`, 'm').test(
        readFileSync(`${ROOT}${file}`, 'utf8'),
      );
    const named: [string, string][] = [
      ['src/notice/accept.ts', 'accept'],
      ['src/store/notices.ts', 'transition'],
      ['queues/processors.ts', 'NOTICE_STEPS'],
      ['src/notice/engine.ts', 'NoticeEngine'],
      ['src/notice/steps/send.ts', 'sendEmail'],
      ['src/notice/steps/observe.ts', 'pollEmail'],
      ['src/notice/steps/deadline.ts', 'runDeadline'],
      ['src/notice/steps/decide.ts', 'fallbackWrite'],
      ['src/policy/decide.ts', 'decideSms'],
    ];
    for (const [file, name] of named) {
      expect(
        steps.some((s) => s.file === file),
        `${file} is on the walk`,
      ).toBe(true);
      expect(defines(file, name), `${name} in ${file}`).toBe(true);
    }
  });
});
