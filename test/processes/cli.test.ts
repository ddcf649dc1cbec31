import { spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive } from '../../src/archive/archive.js';
import { partitionDir } from '../../src/archive/names.js';
import { DAY, HOUR, iso } from '../../src/clock.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { NoticeStore, type StoredEntry } from '../../src/store/notices.js';
import { deleteKeys, plainRedis, REDIS_URL, TEST_API_KEY, testPrefix, topologyEnv } from '../helpers/env.js';
import { fileStore, mirrorFor, runHerald, tempDir, writeNotices } from '../helpers/archive.js';
import { runCliProcess } from '../helpers/web-process.js';
import { COMMANDS } from '../../src/cli.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const redis = plainRedis();
let dir: Awaited<ReturnType<typeof tempDir>>;
const prefixes: string[] = [];

beforeAll(async () => {
  dir = await tempDir('cli');
});
afterAll(async () => {
  for (const prefix of prefixes) await deleteKeys(redis, prefix);
  await redis.quit();
  await dir.remove();
});

/** A Herald prefix of its own, its archive in the test directory, and the environment the CLI reads. */
function setUp() {
  const prefix = testPrefix('cli');
  prefixes.push(prefix);
  const env = {
    REDIS_URL,
    ...topologyEnv(),
    HERALD_PREFIX: prefix,
    HERALD_API_KEYS: TEST_API_KEY,
    HERALD_ARCHIVE_URL: `file://${dir.path}`,
    HERALD_AUDIT_RETENTION: '400d',
  };
  return { prefix, env, store: new NoticeStore(redis, prefix), archive: new Archive(fileStore(dir.path), prefix) };
}

const cli = runHerald;

/**
 * An entry of a notice of `shard` as the log would hold it, at a chosen time. Of a type Herald
 * never writes, hence the cast: the archive, `export` and `retention apply` don't read the type.
 */
const entry = (shard: number, ms: number, seq: number, type = 'test.entry'): StoredEntry =>
  ({
    id: `${ms}-${seq}`,
    type,
    noticeId: newNoticeId(shard, ms),
    at: iso(ms),
    seq: seq + 1,
  }) as StoredEntry;
const lines = (text: string) =>
  text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as StoredEntry);

describe('herald audit <noticeId>', () => {
  it('prints the timeline after Redis has forgotten the entries, and searches the archive once the notice is gone too', async () => {
    const { env, store, archive } = setUp();
    const written = await writeNotices(store, redis, 6, 2);
    const noticeId = written[0]!.noticeId;
    const trail = written.filter((e) => e.noticeId === noticeId);
    await mirrorFor({ redis, store, archive, consumer: 'cli-test' }).mirrorOnce([6]);
    expect(await redis.xlen(store.keys.log(6))).toBe(0);

    const timeline = await cli(['audit', noticeId], env);
    expect(timeline.code).toBe(0);
    expect(timeline.stdout).toMatch(new RegExp(`^${noticeId}  email_sending  created `));
    expect(timeline.stdout).toMatch(/\n {3}1 {2}\S+ {2}notice\.accepted +deadline=\S+ contentSha256=x\n/);
    expect(timeline.stdout).toContain(`3 entries (0 from Redis, 3 from the archive)`);
    expect(lines((await cli(['audit', noticeId, '--json'], env)).stdout)).toEqual(trail);

    await redis.del(store.keys.notice(noticeId), store.keys.events(noticeId));
    const scanned = await cli(['audit', noticeId, '--json'], env);
    expect(scanned.stderr).toContain('Redis no longer holds this notice; searching the archive of shard 6');
    expect(lines(scanned.stdout)).toEqual(trail);
  });

  it('works as the installed binary', async () => {
    const { env, store, archive } = setUp();
    const written = await writeNotices(store, redis, 6, 1);
    await mirrorFor({ redis, store, archive, consumer: 'cli-bin' }).mirrorOnce([6]);
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(process.execPath, ['dist/src/cli.js', 'audit', written[0]!.noticeId, '--json'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', ...env },
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.on('exit', (exit) => resolve({ code: exit, stdout: out }));
    });
    expect(code).toBe(0);
    expect(lines(stdout)).toEqual(written);
  });
});

describe('herald export', () => {
  it('streams the archive of a period as NDJSON, every shard merged in entry order', async () => {
    const { env, archive } = setUp();
    const base = Date.UTC(2026, 0, 5, 10);
    await archive.putBatch(1, [entry(1, base + 1000, 0), entry(1, base + 3000, 0)]);
    await archive.putBatch(2, [entry(2, base + 2000, 0), entry(2, base + 2000, 1)]);
    await archive.putBatch(2, [entry(2, base + HOUR + 5, 0)]);
    await archive.putBatch(3, [entry(3, base + 2 * HOUR, 0)]);

    const all = await cli(['export', '--from', iso(base), '--to', iso(base + 2 * HOUR), '--quiet'], env);
    expect(all.code).toBe(0);
    expect(lines(all.stdout).map((e) => e.id)).toEqual([
      `${base + 1000}-0`,
      `${base + 2000}-0`,
      `${base + 2000}-1`,
      `${base + 3000}-0`,
      `${base + HOUR + 5}-0`,
    ]);

    const out = join(dir.path, 'export.ndjson');
    const part = await cli(['export', '--from', iso(base + 1500), '--to', iso(base + HOUR), '--out', out], env);
    expect(part.stderr).toContain('Exported 3 entries');
    expect(lines(await readFile(out, 'utf8')).map((e) => e.id)).toEqual([`${base + 2000}-0`, `${base + 2000}-1`, `${base + 3000}-0`]);
  });

  it('refuses a period it cannot read', async () => {
    const { env } = setUp();
    expect((await cli(['export', '--to', '1h'], env)).code).toBe(2);
    expect((await cli(['export', '--from', 'yesterday-ish'], env)).stderr).toContain('neither an ISO 8601 time nor an age');
  });
});

describe('herald retention apply', () => {
  it('deletes the archive objects older than HERALD_AUDIT_RETENTION and keeps the rest', async () => {
    const { prefix, env, archive } = setUp();
    const now = Date.now();
    const old = now - 500 * DAY;
    const straddling = now - 400 * DAY;
    await archive.putBatch(3, [entry(3, old, 0), entry(3, old + 1, 0)]);
    await archive.putBatch(3, [entry(3, straddling - 10, 0), entry(3, straddling + 10, 0)]);
    await archive.putBatch(4, [entry(4, now - 10 * DAY, 0)]);
    const oldDir = join(dir.path, partitionDir(prefix, 3, old));

    const dry = await cli(['retention', 'apply', '--dry-run'], env, now);
    expect(dry.stdout.trim().split('\n')).toEqual([`${partitionDir(prefix, 3, old)}${old}-0_${old + 1}-0.ndjson.gz`]);
    expect(existsSync(oldDir)).toBe(true);

    const applied = await cli(['retention', 'apply'], env, now);
    expect(applied.code).toBe(0);
    expect(applied.stderr).toContain('Deleted 1 objects.');
    expect(existsSync(oldDir)).toBe(false);
    expect(await archive.objectsIn(3, straddling)).toHaveLength(1);
    expect(await archive.objectsIn(4, now - 10 * DAY)).toHaveLength(1);
  });
});

describe('herald --help, --version and usage errors', () => {
  const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const version = async () => (JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

  it('lists every command with its summary (herald --help, herald help), on stdout, exit 0', async () => {
    const { env } = setUp();
    expect(COMMANDS.map((c) => c.name)).toEqual(['audit', 'export', 'doctor', 'retention', 'notices', 'policy', 'keys', 'send']);
    for (const args of [['--help'], ['help']]) {
      const { code, stdout, stderr } = await runCliProcess(args, env);
      expect(code).toBe(0);
      expect(stderr).toBe('');
      for (const c of COMMANDS) expect(stdout).toMatch(new RegExp(`^  ${c.name} +${escaped(c.summary)}$`, 'm'));
    }
  });

  it("prints each command's usage for <command> --help, exit 0, without reading the configuration", async () => {
    const { env } = setUp();
    const broken = { ...env, HERALD_CONTENT_TTL: 'a while' };
    const runs = await Promise.all(COMMANDS.map((c) => runCliProcess([c.name, '--help'], broken)));
    runs.forEach(({ code, stdout }, i) => {
      expect(stdout, COMMANDS[i]!.name).toBe(COMMANDS[i]!.usage);
      expect(code, COMMANDS[i]!.name).toBe(0);
    });
    expect(COMMANDS.map((c) => c.usage.split('\n')[0])).toEqual([
      'herald audit <noticeId> [--json]',
      'herald export --from <time> [--to <time>] [--out <file>] [--quiet]',
      'herald doctor',
      'herald retention apply [--dry-run]',
      expect.stringMatching(/^herald notices list \[--state S\]/),
      expect.stringMatching(/^herald policy replay --rules <file> --from <time>/),
      'herald keys create --tenant T --scopes send,read,manage [--name N]',
      'herald send --file <notices.ndjson> [--batch-size N] [--quiet]',
    ]);
    // After its action too, and as herald help <command>.
    expect((await runHerald(['retention', 'apply', '--help'], broken)).stdout).toBe(COMMANDS[3]!.usage);
    expect(await runHerald(['help', 'notices'], broken)).toEqual({ code: 0, stdout: COMMANDS[4]!.usage, stderr: '' });
  });

  it("prints package.json's version for herald --version", async () => {
    const { env } = setUp();
    const { code, stdout } = await runCliProcess(['--version'], env);
    expect(stdout).toBe(`${await version()}\n`);
    expect(code).toBe(0);
  });

  it("runs from an installed package through its bin link, and reads that package's version", async () => {
    const { env } = setUp();
    const app = join(dir.path, 'installed');
    const pkg = join(app, 'node_modules', 'herald');
    cpSync(join(ROOT, 'dist'), join(pkg, 'dist'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
    // The application's own package.json, above Herald's: not the one to read.
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'an-application', version: '9.9.9' }));
    mkdirSync(join(app, 'node_modules', '.bin'));
    const bin = join(app, 'node_modules', '.bin', 'herald');
    symlinkSync('../herald/dist/src/cli.js', bin);
    chmodSync(join(pkg, 'dist', 'src', 'cli.js'), 0o755);
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string }>((resolve) => {
        const child = spawn(bin, args, { cwd: app, env: { PATH: process.env.PATH ?? '', ...env } });
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.on('exit', (exit) => resolve({ code: exit, stdout: out }));
      });
    expect(await run(['--version'])).toEqual({ code: 0, stdout: `${await version()}\n` });
    expect(await run(['export', '--help'])).toEqual({ code: 0, stdout: COMMANDS[1]!.usage });
  });

  it('answers an unknown command with exit 2 and the list of commands on stderr', async () => {
    const { env } = setUp();
    const { code, stdout, stderr } = await runCliProcess(['audits'], env);
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^herald: unknown command "audits"\n/);
    for (const c of COMMANDS) expect(stderr).toMatch(new RegExp(`^  ${c.name} +${escaped(c.summary)}$`, 'm'));
    expect((await runHerald(['help', 'audits'], env)).code).toBe(2);
    const none = await runHerald([], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('  audit ');
  });

  it("answers a bad option or argument with exit 2 and that command's usage on stderr", async () => {
    const { env } = setUp();
    const bad = await runCliProcess(['export', '--from', '1h', '--bogus'], env);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toMatch(/^herald: Unknown option '--bogus'/);
    expect(bad.stderr.endsWith(`\n\n${COMMANDS[1]!.usage}`)).toBe(true);
    for (const [args, usage] of [
      [['audit', '--verify', '--json'], COMMANDS[0]!.usage],
      [['doctor', 'now'], COMMANDS[2]!.usage],
      [['retention', 'purge'], COMMANDS[3]!.usage],
      [['policy', 'replay', '--rules', 'r.yaml'], COMMANDS[5]!.usage],
    ] as const) {
      const run = await runHerald([...args], env);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toMatch(/^herald: .+\n\n/);
      expect(run.stderr.endsWith(`\n\n${usage}`), args.join(' ')).toBe(true);
    }
  });
});
