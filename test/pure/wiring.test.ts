import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (name: string) => readFileSync(`${ROOT}${name}`, 'utf8');

/** What building a piece by hand looks like: a store, a connection, the queues, an archive or a trail reader. */
const HAND_WIRING = /new (NoticeStore|PolicyStore|SuppressionStore)\(|connectRedis\(|openQueues\(|openArchive\(|trailReader\(/;
/** And for the CLI, which reads the pieces the others get handed: any store or index, the archive, the chains, the wait for Redis. */
const CLI_HAND_WIRING = new RegExp(
  `${HAND_WIRING.source}|new \\w*(Store|Index)\\(|new (Archive|Keys)\\(|openObjectStorage\\(|waitReady\\(|readTrail\\(`,
);

describe('the wiring', () => {
  it('has no route that builds a store, a connection, an archive or a trail reader: they come through AppDeps', () => {
    const routes = readdirSync(`${ROOT}src/http`).filter((name) => name.endsWith('.ts'));
    expect(routes.length).toBeGreaterThan(5);
    for (const name of routes) expect(read(`src/http/${name}`), name).not.toMatch(HAND_WIRING);
    expect(read('src/app.ts')).not.toMatch(HAND_WIRING);
  });

  it('has no herald command that builds a store, a connection, an archive or a trail reader: they come through composeCli', () => {
    const commands = readdirSync(`${ROOT}src/cli`).filter((name) => name.endsWith('.ts'));
    expect(commands.length).toBeGreaterThan(5);
    for (const name of ['src/cli.ts', ...commands.map((name) => `src/cli/${name}`)]) expect(read(name), name).not.toMatch(CLI_HAND_WIRING);
    // A command that reads Redis or the archive gets them from the composition.
    for (const name of commands.filter((name) => /\bparts\./.test(read(`src/cli/${name}`)))) {
      expect(read(`src/cli/${name}`), name).toMatch(/from '\.\.\/compose\.js'/);
    }
  });

  it('is done by src/compose.ts for the processes, the test helpers and the bench', () => {
    for (const name of [
      'src/server.ts',
      'src/worker.ts',
      'src/dev.ts',
      'test/helpers/herald.ts',
      'test/helpers/stack.ts',
      'bench/herald.ts',
    ]) {
      expect(read(name), name).not.toMatch(HAND_WIRING);
    }
    for (const name of ['src/server.ts', 'src/worker.ts', 'test/helpers/herald.ts', 'bench/herald.ts']) {
      expect(read(name), name).toMatch(/from '(\.\.\/)*(src\/)?compose\.js'|from '\.\/compose\.js'/);
    }
  });
});
