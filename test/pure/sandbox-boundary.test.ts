/**
 * The emulators are a package of their own (`@herald/sandbox`): a live process loads none of it,
 * only one loader of the product imports it (in sandbox mode, to run the emulators in process),
 * and it imports nothing of Herald. Checked on the source's imports (type imports load nothing).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importsOf, packageOf, ROOT, runtimeClosure } from '../helpers/imports.js';

const PACKAGE = join(ROOT, 'packages', 'sandbox');
const inPackage = (file: string) => file.startsWith(PACKAGE + sep);
const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as {
  name: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  exports: Record<string, string | { types: string; default: string }>;
};

/** The TypeScript files under `dir` (relative to the repository), as absolute paths. */
function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(ROOT, dir, file));
}
const PRODUCT = [...sources('src'), ...sources('queues')];
const loads = (file: string) => {
  const found = importsOf(file);
  return [...found.packages, ...found.dynamic.map(packageOf)].includes('@herald/sandbox');
};

describe('the sandbox package', () => {
  it('is the workspace @herald/sandbox, private', () => {
    expect(manifest.name).toBe('@herald/sandbox');
    expect((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { workspaces: string[] }).workspaces).toContain(
      'packages/sandbox',
    );
  });

  describe('in a live process', () => {
    it.each(['src/worker.ts', 'src/server.ts', 'src/providers/registry.ts', 'src/cli.ts'])('is not loaded by loading %s', (entry) => {
      const { files, packages } = runtimeClosure(entry);
      expect(files.size).toBeGreaterThan(3);
      expect([...packages]).not.toContain('@herald/sandbox');
      expect([...files].filter(inPackage)).toEqual([]);
    });
  });

  it('is loaded by one module of the product, which only the worker and npm start import', () => {
    const loader = join(ROOT, 'src', 'load-sandbox.ts');
    expect(PRODUCT.filter(loads).map((file) => relative(ROOT, file))).toEqual([join('src', 'load-sandbox.ts')]);
    // The loader loads no package at once (its error type only): the sandbox only when it is called.
    expect(importsOf(loader)).toEqual({ files: [join(ROOT, 'src', 'config.ts')], packages: [], dynamic: ['@herald/sandbox'] });
    const importers = PRODUCT.filter((file) => importsOf(file).files.includes(loader)).map((file) => relative(ROOT, file));
    expect(importers.sort()).toEqual([join('src', 'dev.ts'), join('src', 'worker.ts')]);
    // Nothing of the product names the package's files by path.
    for (const file of PRODUCT) expect(importsOf(file, { types: true }).files.filter(inPackage), relative(ROOT, file)).toEqual([]);
  });

  it('imports nothing of Herald, and declares every package it imports', () => {
    const declared = new Set([...Object.keys(manifest.dependencies), ...Object.keys(manifest.devDependencies)]);
    const files = sources('packages/sandbox/src');
    expect(files.length).toBeGreaterThan(10);
    for (const file of files) {
      const found = importsOf(file, { types: true });
      const name = relative(ROOT, file);
      expect(
        found.files.filter((imported) => !inPackage(imported)),
        name,
      ).toEqual([]);
      for (const imported of found.files) expect(existsSync(imported), `${name} imports ${imported}`).toBe(true);
      for (const pkg of [...found.packages, ...found.dynamic.map(packageOf)]) expect(declared, `${name} imports ${pkg}`).toContain(pkg);
    }
    // Its runtime dependencies are the ones it imports.
    const imported = new Set(files.flatMap((file) => importsOf(file).packages));
    expect([...imported].sort()).toEqual(Object.keys(manifest.dependencies).sort());
  });

  it('exports modules that exist, built from its own src/', () => {
    for (const [subpath, target] of Object.entries(manifest.exports)) {
      if (subpath === './package.json') continue;
      const built = typeof target === 'string' ? target : target.default;
      expect(built, subpath).toMatch(/^\.\/dist\/[a-z-]+\.js$/);
      expect(existsSync(join(PACKAGE, built.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'))), subpath).toBe(true);
    }
  });
});
