import { readFileSync } from 'node:fs';

/**
 * Herald's version, read from its package.json when asked. The file is looked for upwards from
 * this module, which sits in `src/cli/` of the repository and in `dist/src/cli/` of a build or
 * an installed package: the first package.json named `herald` is the package's own.
 */
export function packageVersion(): string {
  for (let dir = new URL('./', import.meta.url); ;) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'herald' && typeof pkg.version === 'string') return pkg.version;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const parent = new URL('../', dir);
    if (parent.href === dir.href) throw new Error(`no package.json of Herald's above ${import.meta.url}`);
    dir = parent;
  }
}
