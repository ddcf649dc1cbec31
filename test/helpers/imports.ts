/**
 * A static walk of the source's imports, for tests of the import graph: which modules a file
 * loads at run time (type imports are erased by the compiler and load nothing), and what a
 * module's whole runtime closure is. Specifiers are read from the text, so the walk
 * over-approximates (`import { type A } from …` counts as loading it) and never misses a load.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** What one file imports: relative modules as the files they name, packages by name. */
export interface Imports {
  files: string[];
  packages: string[];
  /** Specifiers of `import('…')` expressions (not `typeof import('…')` types), as written. */
  dynamic: string[];
}

const STATIC = /^\s*(?:import|export)\s+(?!type\b)(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;
const STATIC_WITH_TYPES = /^\s*(?:import|export)\s+(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]/gm;
const DYNAMIC = /(?<!typeof\s*)\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The package a bare specifier names: `@scope/name` or `name`, without a subpath. */
export function packageOf(specifier: string): string {
  return specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;
}

/** The modules `file` (absolute) imports; `types: true` counts type-only imports too. */
export function importsOf(file: string, opts: { types?: boolean } = {}): Imports {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(opts.types ? STATIC_WITH_TYPES : STATIC)].map((m) => m[1]!);
  const files: string[] = [];
  const packages: string[] = [];
  for (const specifier of specifiers) {
    if (specifier.startsWith('.')) files.push(join(dirname(file), specifier.replace(/\.js$/, '.ts')));
    else if (!specifier.startsWith('node:')) packages.push(packageOf(specifier));
  }
  return { files, packages, dynamic: [...text.matchAll(DYNAMIC)].map((m) => m[1]!) };
}

/** Every module that loading `entry` (relative to the repository) loads at once, and the packages among them. */
export function runtimeClosure(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const walk = (file: string) => {
    if (files.has(file)) return;
    if (!existsSync(file)) throw new Error(`${file} is imported and does not exist`);
    files.add(file);
    const found = importsOf(file);
    for (const name of found.packages) packages.add(name);
    for (const next of found.files) walk(next);
  };
  walk(join(ROOT, entry));
  return { files, packages };
}
