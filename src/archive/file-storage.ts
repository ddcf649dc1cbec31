import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rmdir, unlink } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { ObjectStorage, StoredObject } from './object-storage.js';

const CHECKSUM_SUFFIX = '.sha256';
const TEMP_MARK = '.tmp-';

/**
 * The archive in a local directory (`file:///var/lib/herald/archive`, or `file://./data/archive`
 * relative to the working directory). An object is written to a temporary file, fsynced and
 * renamed into place, so a crash never leaves half an object under its real name; its
 * checksum and seal (one line each in the `.sha256` file) are written the same way *before* it,
 * so an object never exists without them.
 */
export function createFileStorage(root: string): ObjectStorage {
  const base = resolve(root);
  const pathOf = (key: string) => {
    const path = resolve(base, key);
    if (path !== base && !path.startsWith(base + sep)) throw new Error(`archive key escapes the archive directory: ${key}`);
    return path;
  };

  const writeDurably = async (path: string, data: Buffer | string) => {
    const temp = join(dirname(path), `.${path.slice(dirname(path).length + 1)}${TEMP_MARK}${randomBytes(4).toString('hex')}`);
    const handle = await open(temp, 'w');
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  };

  const syncDir = async (dir: string) => {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  };

  return {
    location: `file://${base}`,

    async put(key, body, sha256, seal) {
      const path = pathOf(key);
      await mkdir(dirname(path), { recursive: true });
      await writeDurably(path + CHECKSUM_SUFFIX, `${sha256}\n${seal}\n`);
      await writeDurably(path, body);
      await syncDir(dirname(path));
    },

    async get(key): Promise<StoredObject | null> {
      const path = pathOf(key);
      let body: Buffer;
      try {
        body = await readFile(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
      // Earlier versions wrote the SHA-256 alone.
      const [sha256, seal] = await readFile(path + CHECKSUM_SUFFIX, 'utf8').then(
        (text) => text.split('\n').map((line) => line.trim() || undefined),
        (error: NodeJS.ErrnoException) => {
          if (error.code === 'ENOENT') return [];
          throw error;
        },
      );
      return { body, sha256, seal };
    },

    async *list(prefix, startAfter = '') {
      // A depth-first walk with children sorted as their keys sort (a directory as `name/`),
      // which is the lexicographic order of the keys; subtrees wholly before `startAfter` are skipped.
      const walk = async function* (dir: string): AsyncGenerator<string> {
        let entries;
        try {
          entries = await readdir(pathOf(dir), { withFileTypes: true });
        } catch (error) {
          // Not there (yet): nothing archived under it. Anything else (not a directory, no access) is a fault.
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
          throw error;
        }
        const children = entries
          .filter((e) => (e.isDirectory() || e.isFile()) && !e.name.startsWith('.') && !e.name.endsWith(CHECKSUM_SUFFIX))
          .map((e) => `${dir}${e.name}${e.isDirectory() ? '/' : ''}`)
          .sort();
        for (const key of children) {
          if (key.endsWith('/')) {
            if (key < startAfter && !startAfter.startsWith(key)) continue;
            if (!key.startsWith(prefix) && !prefix.startsWith(key)) continue;
            yield* walk(key);
          } else if (key > startAfter && key.startsWith(prefix)) {
            yield key;
          }
        }
      };
      yield* walk('');
    },

    async delete(keys) {
      const dirs = new Set<string>();
      for (const key of keys) {
        const path = pathOf(key);
        // The object goes first: a checksum without its object is harmless, the reverse is not.
        for (const file of [path, path + CHECKSUM_SUFFIX]) {
          await unlink(file).catch((error: NodeJS.ErrnoException) => {
            if (error.code !== 'ENOENT') throw error;
          });
        }
        dirs.add(dirname(path));
      }
      // Empty hour, day and shard directories go too; a directory still in use stays.
      for (let dir of [...dirs].sort().reverse()) {
        while (dir.startsWith(base + sep)) {
          try {
            await rmdir(dir);
          } catch {
            break;
          }
          dir = dirname(dir);
        }
      }
    },

    async close() {},
  };
}
