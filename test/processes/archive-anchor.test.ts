import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Archive, encodeObject } from '../../src/archive/archive.js';
import { anchorKey } from '../../src/archive/anchor.js';
import { shardName } from '../../src/archive/names.js';
import { shardOfNoticeId } from '../../src/notice/ids.js';
import { readBacklog } from '../../src/retention/backlog.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { plainRedis, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { fileStore, tempDir } from '../helpers/archive.js';
import { freePort } from '../helpers/redis-server.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { runCliProcess } from '../helpers/web-process.js';

/**
 * An archive the log mirror of a running worker wrote and anchored, then tampered with by
 * whoever can write the archive (but does not hold HERALD_ARCHIVE_KEY), and checked by the
 * `herald` binary with Redis down, after Redis lost its chain keys, and through the API.
 */
const redis = plainRedis();
let stack: Stack;
let dir: Awaited<ReturnType<typeof tempDir>>;
let archive: Archive;
/** The first object of a shard, the notice whose first entry it holds, and that notice's trail. */
let target: { shard: number; key: string; noticeId: string; trail: StoredEntry[] };

/** The CLI's environment: the stack's Redis, or `redisUrl` (a port nothing listens on: Redis down). */
const cliEnv = (redisUrl?: string) =>
  testEnv(stack.config.prefix, { HERALD_ARCHIVE_URL: `file://${dir.path}`, ...(redisUrl ? { REDIS_URL: redisUrl } : {}) });
const redisDown = async () => cliEnv(`redis://127.0.0.1:${await freePort()}`);
const verify = (env: Record<string, string>, ...flags: string[]) => runCliProcess(['audit', '--verify', ...flags], env);

const sidecar = (key: string) => join(dir.path, `${key}.sha256`);

/**
 * The target object rewritten (its email provider forged) and stripped of its seal, as an
 * object of a version without seals would be stored: what makes a MAC check impossible. Runs
 * `check`, then puts the object back as it was.
 */
async function tampered(check: () => Promise<void>): Promise<void> {
  const [body, sums] = await Promise.all([readFile(join(dir.path, target.key)), readFile(sidecar(target.key), 'utf8')]);
  const entries = gunzipSync(body)
    .toString('utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as StoredEntry);
  const forged = encodeObject(entries.map((e) => (e.type === 'email.requested' ? { ...e, provider: 'forged' } : e)));
  await writeFile(sidecar(target.key), `${forged.sha256}\n`);
  await writeFile(join(dir.path, target.key), forged.body);
  try {
    await check();
  } finally {
    await writeFile(join(dir.path, target.key), body);
    await writeFile(sidecar(target.key), sums);
  }
}

beforeAll(async () => {
  dir = await tempDir('anchor');
  stack = await startStack({
    prefix: testPrefix('anchor'),
    // Entries leave Redis once archived, so trails are read from the archive.
    env: { HERALD_ARCHIVE_URL: `file://${dir.path}`, HERALD_LOG_KEEP_HOT: '0s', HERALD_MIRROR_INTERVAL_MS: '200' },
  });
  const ids = await Promise.all(
    ['a', 'b'].map((label) =>
      stack.createNotice(
        noticeBody({ recipient: { id: `p-${label}`, email: `delivered+200ms+${label}@example.com` }, deadlineInSeconds: 6 }),
      ),
    ),
  );
  for (const id of ids) await stack.waitForState(id, ['email_delivered']);
  // Archived first, trimmed by a later pass: wait for both, so the trails come from the archive alone.
  const logs = ids.map((id) => stack.web.store.keys.log(shardOfNoticeId(id)!));
  await waitFor(
    async () =>
      (await readBacklog(redis, stack.web.store.keys, Date.now())).unarchivedEntries === 0 &&
      (await Promise.all(logs.map((key) => redis.xlen(key)))).every((n) => n === 0),
    20_000,
    'the worker’s log mirror to archive and trim everything',
  );
  // Nothing changes the archive from here on but the tests.
  await stack.worker!.close();

  archive = new Archive(fileStore(dir.path), stack.config.prefix);
  const shard = shardOfNoticeId(ids[0]!)!;
  for await (const first of archive.shardObjects(shard)) {
    const noticeId = (await archive.read(first.key))![0]!.noticeId;
    target = { shard, key: first.key, noticeId, trail: await stack.events(noticeId) };
    break;
  }
  expect(await redis.xlen(stack.web.store.keys.log(target.shard))).toBe(0);
});
afterAll(async () => {
  await stack.close();
  await redis.quit();
  await archive.close();
  await dir.remove();
});

describe('herald audit --verify, with each chain anchored in the archive', () => {
  it('holds with Redis down, and names an object rewritten and stripped of its seal', async () => {
    const intact = await verify(await redisDown());
    expect(intact.stdout).toContain("Redis cannot be reached: each chain's start comes from its anchor in the archive");
    expect(intact.stdout).toContain('All 16 shards hold.');
    expect(intact.code).toBe(0);

    await tampered(async () => {
      const stripped = await verify(await redisDown());
      expect(stripped.stdout).toContain(
        `${shardName(target.shard)}  BROKEN  ${target.key}: it has no seal, though its shard's chain began`,
      );
      expect(stripped.code).toBe(1);
    });
  });

  it('names the stripped object after Redis lost its chain keys, and the API does not serve it', async () => {
    const keys = stack.web.store.keys;
    const chains = await Promise.all(keys.allShards().map((shard) => redis.hgetall(keys.archiveChain(shard))));
    await Promise.all(keys.allShards().map((shard) => redis.del(keys.archiveChain(shard))));
    try {
      await tampered(async () => {
        const stripped = await verify(cliEnv());
        expect(stripped.stdout).toContain(`${shardName(target.shard)}  BROKEN  ${target.key}: it has no seal`);
        expect(stripped.code).toBe(1);

        const res = await stack.web.call('GET', `/v1/notices/${target.noticeId}/events`);
        expect(res.statusCode).toBe(503);
        expect(res.json().error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('integrity check') });
        expect(res.body).not.toContain('forged');
      });
      expect(await stack.events(target.noticeId)).toEqual(target.trail);
    } finally {
      await Promise.all(keys.allShards().map((shard, i) => redis.hset(keys.archiveChain(shard), chains[i]!)));
    }
  });

  it('names a missing anchor, and goes on without it only when told to (--allow-unanchored)', async () => {
    const key = anchorKey(stack.config.prefix, target.shard);
    const [body, sums] = await Promise.all([readFile(join(dir.path, key)), readFile(sidecar(key), 'utf8')]);
    await fileStore(dir.path).delete([key]);
    try {
      const missing = await verify(cliEnv(), '--shard', String(target.shard));
      expect(missing.stdout).toContain(`${shardName(target.shard)}  BROKEN  ${key}: the anchor of the shard's chain is missing`);
      expect(missing.code).toBe(1);
      expect((await verify(await redisDown(), '--shard', String(target.shard))).code).toBe(1);

      const allowed = await verify(cliEnv(), '--shard', String(target.shard), '--allow-unanchored');
      expect(allowed.stdout).toMatch(
        new RegExp(`^${shardName(target.shard)}  ok  .*no anchor \\(--allow-unanchored\\): the chain start is Redis's`, 'm'),
      );
      expect(allowed.code).toBe(0);
      const blind = await verify(await redisDown(), '--shard', String(target.shard), '--allow-unanchored');
      expect(blind.stdout).toMatch(new RegExp(`^${shardName(target.shard)}  ok  .*no anchor \\(--allow-unanchored\\), nor Redis`, 'm'));
      expect(blind.code).toBe(0);
    } finally {
      await writeFile(sidecar(key), sums);
      await writeFile(join(dir.path, key), body);
    }
    expect((await verify(cliEnv(), '--shard', String(target.shard))).code).toBe(0);
  });
});
