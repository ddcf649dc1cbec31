/**
 * The client is a package of its own (`@herald/client`) that a caller installs alone: no
 * dependency, modules that import nothing outside the package (neither Herald's `src/` nor a
 * package nor a Node built-in, so that it runs wherever `fetch` does), and hand-written types that
 * the API's own schemas are held to (test/client-types/api-schemas.ts, compiled by tsc here).
 * Reads the build: run after `npm run build`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY, retryDelay } from '../../packages/client/src/transport.js';
import { HeraldApiError } from '../../packages/client/src/errors.js';
import { importsOf, packageOf, ROOT, runtimeClosure } from '../helpers/imports.js';

const PACKAGE = join(ROOT, 'packages', 'client');
const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as Record<string, any>;
const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, any>;

/** Every module specifier a JavaScript, TypeScript or declaration file names, type-only imports and `import()` included. */
function specifiers(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found = [
    ...text.matchAll(/^\s*(?:import|export)\s+(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm),
    ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
    ...text.matchAll(/\brequire\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((m) => m[1]!);
  const references = [...text.matchAll(/^\/\/\/\s*<reference\s+(?:types|path|lib)=['"]([^'"]+)['"]/gm)].map((m) => `reference:${m[1]}`);
  return [...found, ...references];
}

/** The files under `dir` whose names end with one of `endings`. */
function files(dir: string, ...endings: string[]): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => endings.some((ending) => name.endsWith(ending)))
    .map((name) => join(dir, name));
}

/** Walks from `entry` along relative imports; fails on any other specifier, or on one that leaves `within`. */
function walk(entry: string, within: string, resolveFile: (from: string, specifier: string) => string): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const specifier of specifiers(file)) {
      const name = relative(ROOT, file);
      expect(specifier, `${name} imports ${specifier}`).toMatch(/^\.\.?\//);
      const target = resolveFile(file, specifier);
      expect(target.startsWith(within + sep), `${name} imports ${specifier}, outside ${relative(ROOT, within)}`).toBe(true);
      expect(existsSync(target), `${name} imports ${specifier}, which is not there`).toBe(true);
      visit(target);
    }
  };
  visit(entry);
  return seen;
}

describe('the client package', () => {
  it('is the workspace @herald/client, ready to publish: ESM with types, its build alone, no dependency', () => {
    expect(root.workspaces).toContain('packages/client');
    expect(manifest).toMatchObject({
      name: '@herald/client',
      type: 'module',
      license: 'MIT',
      files: ['dist'],
      engines: { node: expect.stringMatching(/^>=\d+/) },
    });
    expect(manifest.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(manifest.private).not.toBe(true);
    expect(manifest.exports['.']).toEqual({ types: './dist/index.d.ts', default: './dist/index.js' });
    for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'bundleDependencies'])
      expect(manifest[field], field).toBeUndefined();
    // `herald/client` of the root is the same build, so that existing imports keep working.
    expect(root.exports['./client']).toEqual({ types: './packages/client/dist/index.d.ts', default: './packages/client/dist/index.js' });
    expect(root.scripts.build).toContain('npm run build --workspace=@herald/client');
    expect(root.scripts['pack:client']).toContain('npm pack --workspace=@herald/client');
  });

  it('has sources that import only one another', () => {
    const src = join(PACKAGE, 'src');
    const sources = files(src, '.ts');
    expect(sources.length).toBeGreaterThan(3);
    const reached = walk(join(src, 'index.ts'), src, (from, specifier) => resolve(dirname(from), specifier.replace(/\.js$/, '.ts')));
    expect([...reached].sort()).toEqual(sources.sort());
  });

  it('builds JavaScript and declarations that import nothing outside the package: no Herald, no package, no Node built-in', () => {
    const dist = join(PACKAGE, 'dist');
    const js = files(dist, '.js');
    expect(js.length).toBeGreaterThan(3);
    for (const file of js) walk(file, dist, (from, specifier) => resolve(dirname(from), specifier));
    // The declarations a caller's compiler reads, all reached from the entry's.
    const declarations = walk(join(dist, 'index.d.ts'), dist, (from, specifier) =>
      resolve(dirname(from), specifier.replace(/\.js$/, '.d.ts')),
    );
    expect([...declarations].sort()).toEqual(files(dist, '.d.ts').sort());
  });

  it('is loaded by herald send alone, when it runs: the other commands need it not (the production image installs no workspace)', () => {
    const product = [...files(join(ROOT, 'src'), '.ts'), ...files(join(ROOT, 'queues'), '.ts')];
    const naming = product.filter((file) => {
      const found = importsOf(file, { types: true });
      return [...found.packages, ...found.dynamic.map(packageOf)].includes('@herald/client');
    });
    expect(naming.map((file) => relative(ROOT, file))).toEqual([join('src', 'cli', 'send.ts')]);
    expect(importsOf(join(ROOT, 'src', 'cli', 'send.ts')).packages).not.toContain('@herald/client');
    for (const entry of ['src/cli.ts', 'src/server.ts', 'src/worker.ts'])
      expect([...runtimeClosure(entry).packages], entry).not.toContain('@herald/client');
  });

  it("keeps its hand-written types equal to the API's schemas (tsc on test/client-types)", () => {
    const tsc = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'test', 'client-types', 'tsconfig.json')],
      {
        cwd: ROOT,
        encoding: 'utf8',
      },
    );
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
  });
});

describe("the client's wait before a retry", () => {
  const error = (retryAfterSeconds?: number) =>
    new HeraldApiError({ status: 503, code: 'unavailable', message: 'later', retryAfterSeconds });
  const retry = { ...DEFAULT_RETRY, baseDelayMs: 200, maxDelayMs: 30_000 };

  it('is what Retry-After asked for, plus at most a tenth more (a second at most)', () => {
    expect(retryDelay(retry, 1, error(1), () => 0)).toBe(1000);
    expect(retryDelay(retry, 1, error(1), () => 1)).toBe(1100);
    expect(retryDelay(retry, 3, error(20), () => 1)).toBe(21_000);
    expect(retryDelay(retry, 1, error(0), () => 1)).toBe(0);
  });

  it('is not waited for when Retry-After asks for more than maxDelayMs', () => {
    expect(retryDelay(retry, 1, error(31), () => 0)).toBeUndefined();
    expect(retryDelay({ ...retry, maxDelayMs: 3_600_000 }, 1, error(600), () => 0)).toBe(600_000);
  });

  it('otherwise doubles from baseDelayMs, with equal jitter, up to maxDelayMs', () => {
    expect([1, 2, 3].map((attempt) => retryDelay(retry, attempt, error(), () => 0))).toEqual([100, 200, 400]);
    expect([1, 2, 3].map((attempt) => retryDelay(retry, attempt, error(), () => 1))).toEqual([200, 400, 800]);
    expect(retryDelay(retry, 20, error(), () => 1)).toBe(30_000);
  });
});
