/**
 * The Dockerfile, read as text (no Docker engine needed): a build stage, the emulators' image
 * (`sandbox`) and Herald's (the last stage, the default target), which holds nothing of the
 * sandbox package.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/imports.js';

const read = (name: string) => readFileSync(join(ROOT, name), 'utf8');

interface Stage {
  name: string;
  /** The stage's instructions, continuation lines joined, comments left out. */
  instructions: string[];
}

/** The Dockerfile's stages in order. */
function stages(text: string): Stage[] {
  const instructions = text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const found: Stage[] = [];
  for (const instruction of instructions) {
    const from = /^FROM \S+ AS (\S+)$/.exec(instruction);
    if (from) found.push({ name: from[1]!, instructions: [] });
    else found.at(-1)!.instructions.push(instruction);
  }
  return found;
}

const STAGES = stages(read('Dockerfile'));
const stage = (name: string) => STAGES.find((s) => s.name === name)!;
const runs = (s: Stage) => s.instructions.filter((i) => i.startsWith('RUN ')).join('\n');
/** `COPY` sources taken from the build context (not `--from` another stage). */
const contextCopies = (s: Stage) => s.instructions.filter((i) => /^COPY (?!--from)/.test(i)).flatMap((i) => i.split(/\s+/).slice(1, -1));
const stageCopies = (s: Stage) =>
  s.instructions.flatMap((i) => {
    const m = /^COPY --from=(\S+) (\S+) (\S+)$/.exec(i);
    return m ? [{ from: m[1]!, source: m[2]!, target: m[3]! }] : [];
  });

/** Whether .dockerignore leaves `path` out of the build context (entries, `*` within a segment). */
function ignored(path: string): boolean {
  return read('.dockerignore')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .some((pattern) => new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}(/|$)`).test(path));
}

describe('the Dockerfile', () => {
  it('has a build stage, the sandbox image, and Herald last, the default target', () => {
    expect(STAGES.map((s) => s.name)).toEqual(['build', 'sandbox', 'herald']);
  });

  describe('build stage', () => {
    const build = stage('build');

    it("installs every workspace (the workspaces' manifests are in place before npm ci) and builds them", () => {
      const instructions = build.instructions;
      for (const workspace of ['sandbox', 'client']) {
        const manifest = instructions.indexOf(`COPY packages/${workspace}/package.json ./packages/${workspace}/`);
        expect(manifest, workspace).toBeGreaterThan(-1);
        expect(manifest, workspace).toBeLessThan(instructions.indexOf('RUN npm ci --no-audit --no-fund'));
      }
      expect(instructions.at(-1)).toBe('RUN npm run build');
    });

    it('builds only what the images run: src/, queues/, the sandbox and the client, not the benchmark or the tests', () => {
      expect(contextCopies(build)).toEqual([
        'package.json',
        'package-lock.json',
        'packages/sandbox/package.json',
        'packages/client/package.json',
        'tsconfig.json',
        'packages/sandbox/tsconfig.json',
        'packages/sandbox/src',
        'packages/client/tsconfig.json',
        'packages/client/src',
        'src',
        'queues',
      ]);
      // `npm run build` compiles tsconfig.json, whose output has nothing of the sandbox, after the sandbox's own.
      const include = (JSON.parse(read('tsconfig.json')) as { include: string[] }).include;
      expect(include).toEqual(['src/**/*.ts', 'queues/**/*.ts']);
      const script = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.build!;
      expect(script.indexOf('npm run build --workspace=@herald/sandbox')).toBe(0);
      expect(script).toContain('npm run build --workspace=@herald/client');
      expect(script).toMatch(/&& tsc -p tsconfig\.json/);
      expect((JSON.parse(read('tsconfig.bench.json')) as { include: string[] }).include).toContain('bench/**/*.ts');
    });
  });

  describe("Herald's image", () => {
    const herald = stage('herald');

    it("installs Herald's production dependencies without the workspaces, and copies its compiled JavaScript and the client's build alone", () => {
      expect(runs(herald)).toMatch(/^RUN npm ci --omit=dev --workspaces=false /m);
      expect(contextCopies(herald)).toEqual(['package.json', 'package-lock.json']);
      expect(stageCopies(herald)).toEqual([
        { from: 'build', source: '/app/dist', target: './dist' },
        { from: 'build', source: '/app/packages/client/package.json', target: './node_modules/@herald/client/package.json' },
        { from: 'build', source: '/app/packages/client/dist', target: './node_modules/@herald/client/dist' },
      ]);
      expect(herald.instructions.join('\n')).not.toMatch(/sandbox/);
      expect(herald.instructions.at(-1)).toBe('CMD ["node", "dist/src/server.js"]');
    });

    it('runs as a non-root user, with a health check', () => {
      expect(herald.instructions).toContain('USER node');
      expect(herald.instructions.find((i) => i.startsWith('HEALTHCHECK '))).toMatch(/\/healthz/);
    });
  });

  describe('sandbox image', () => {
    const sandbox = stage('sandbox');

    it("installs the sandbox workspace's production dependencies alone, and copies its build alone", () => {
      expect(runs(sandbox)).toMatch(/^RUN npm ci --omit=dev --workspace=@herald\/sandbox /m);
      expect(contextCopies(sandbox)).toEqual(['package.json', 'package-lock.json', 'packages/sandbox/package.json']);
      expect(stageCopies(sandbox)).toEqual([{ from: 'build', source: '/app/packages/sandbox/dist', target: './packages/sandbox/dist' }]);
      expect(sandbox.instructions.at(-1)).toBe('CMD ["node", "packages/sandbox/dist/main.js"]');
      expect(existsSync(join(ROOT, 'packages/sandbox/src/main.ts'))).toBe(true);
    });

    it('runs as a non-root user, with a health check', () => {
      expect(sandbox.instructions).toContain('USER node');
      expect(sandbox.instructions.find((i) => i.startsWith('HEALTHCHECK '))).toMatch(/\/__sandbox\/sms/);
    });
  });

  it('copies from the build context only what exists and is not ignored', () => {
    for (const source of STAGES.flatMap(contextCopies)) {
      expect(existsSync(join(ROOT, source)), source).toBe(true);
      expect(ignored(source), source).toBe(false);
    }
  });

  it('leaves secrets, dependencies and build output of the host out of the build context', () => {
    for (const path of [
      '.env',
      'node_modules',
      'dist',
      '.git',
      'data',
      'bench',
      'test',
      'packages/sandbox/dist',
      'packages/sandbox/node_modules',
    ]) {
      expect(ignored(path), path).toBe(true);
    }
    expect(ignored('packages/sandbox/src')).toBe(false);
  });
});
