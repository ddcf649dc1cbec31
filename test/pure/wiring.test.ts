import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (name: string) => readFileSync(`${ROOT}${name}`, 'utf8');

/** What building a piece by hand looks like: a store, a connection, the queues, an archive or a trail reader. */
const HAND_WIRING = /new (NoticeStore|PolicyStore|SuppressionStore)\(|connectRedis\(|openQueues\(|openArchive\(|trailReader\(/;

describe('the wiring', () => {
  it('has no route that builds a store, a connection, an archive or a trail reader: they come through AppDeps', () => {
    const routes = readdirSync(`${ROOT}src/http`).filter((name) => name.endsWith('.ts'));
    expect(routes.length).toBeGreaterThan(5);
    for (const name of routes) expect(read(`src/http/${name}`), name).not.toMatch(HAND_WIRING);
    expect(read('src/app.ts')).not.toMatch(HAND_WIRING);
  });

  it('is done by src/compose.ts for the processes, the test helpers and the bench', () => {
    for (const name of ['src/server.ts', 'src/worker.ts', 'src/dev.ts', 'test/helpers/herald.ts', 'test/helpers/stack.ts', 'bench/herald.ts']) {
      expect(read(name), name).not.toMatch(HAND_WIRING);
    }
    for (const name of ['src/server.ts', 'src/worker.ts', 'test/helpers/herald.ts', 'bench/herald.ts']) {
      expect(read(name), name).toMatch(/from '(\.\.\/)*(src\/)?compose\.js'|from '\.\/compose\.js'/);
    }
  });
});
