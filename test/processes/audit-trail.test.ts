import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBacklog } from '../../src/retention/backlog.js';
import { LogMirrorStore } from '../../src/store/log-mirror.js';
import { idTime } from '../../src/archive/names.js';
import { shardOfNoticeId } from '../../src/notice/ids.js';
import type { AnyEntry as StoredEntry } from '../helpers/entries.js';
import { plainRedis, testConfig, testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { eventsGroupCaughtUp } from '../helpers/event-log.js';
import { cleanUp, noticeBody, startWebUnderTest } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { runHerald, tempDir, writeNotices } from '../helpers/archive.js';

let stack: Stack;
let dir: Awaited<ReturnType<typeof tempDir>>;
const redis = plainRedis();

beforeAll(async () => {
  dir = await tempDir('audit');
  stack = await startStack({
    prefix: testPrefix('audit'),
    // Archived entries stay hot for an hour, so the test decides when Redis forgets them.
    env: { HERALD_ARCHIVE_URL: `file://${dir.path}`, HERALD_LOG_KEEP_HOT: '1h', HERALD_MIRROR_INTERVAL_MS: '200' },
  });
});
afterAll(async () => {
  await stack.close();
  await redis.quit();
  await dir.remove();
});

async function deliveredNotice(label: string): Promise<{ id: string; shard: number; trail: StoredEntry[] }> {
  const id = await stack.createNotice(
    noticeBody({ recipient: { id: `p-${label}`, email: `delivered+200ms+${label}@example.com` }, deadlineInSeconds: 6 }),
  );
  await stack.waitForState(id, ['email_delivered']);
  return { id, shard: shardOfNoticeId(id)!, trail: await stack.events(id) };
}

/** Entries of a trail that Redis's log stream still holds. */
async function inRedis(shard: number, trail: StoredEntry[]): Promise<number> {
  let held = 0;
  for (const entry of trail) held += (await redis.xrange(stack.config.prefix + `:{s${shard}}:log`, entry.id, entry.id)).length;
  return held;
}

async function allArchived(): Promise<void> {
  await waitFor(
    async () =>
      (await readBacklog(redis, stack.web.store.keys, Date.now())).unarchivedEntries === 0 &&
      (await eventsGroupCaughtUp(redis, stack.web.store.keys)),
    20_000,
    'the worker’s log mirror to archive everything, and the events to read it',
  );
}

describe('GET /v1/notices/:id/events', () => {
  it('returns the same trail while hot, split between Redis and the archive, and only from the archive', async () => {
    const split = await deliveredNotice('split');
    const gone = await deliveredNotice('gone');
    await allArchived();
    const log = new LogMirrorStore(redis, stack.web.store.keys);

    // Redis forgets the first half of one trail (by time), then everything of the other's shard.
    const middle = split.trail[Math.floor(split.trail.length / 2)]!;
    await log.trim(split.shard, idTime(middle.id), 60_000);
    const held = await inRedis(split.shard, split.trail);
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(split.trail.length);
    expect(await stack.events(split.id)).toEqual(split.trail);

    await log.trim(gone.shard, Date.now() + 1, 60_000);
    expect(await inRedis(gone.shard, gone.trail)).toBe(0);
    const after = await stack.events(gone.id);
    expect(after).toEqual(gone.trail);
    expect(after.map((e) => e.seq)).toEqual(after.map((_, i) => i + 1));
    expect(after.map((e) => e.type)).toEqual(
      expect.arrayContaining(['notice.accepted', 'email.requested', 'email.accepted', 'notice.completed']),
    );
  });

  it('comes from an archive the worker processes sealed and chained: herald audit --verify holds', async () => {
    await deliveredNotice('verify');
    await allArchived();
    const env = testEnv(stack.config.prefix, { HERALD_ARCHIVE_URL: `file://${dir.path}` });
    const verified = await runHerald(['audit', '--verify'], env);
    expect(verified.stdout).toContain('All 16 shards hold.');
    expect(verified.stdout).toMatch(/^s\d\d  ok  [1-9]\d* objects, /m);
    expect(verified.code).toBe(0);
  });

  it('answers 503 unavailable when part of the trail is in an archive it cannot reach', async () => {
    const { id, shard, trail } = await deliveredNotice('unreachable');
    await allArchived();
    await new LogMirrorStore(redis, stack.web.store.keys).trim(shard, Date.now() + 1, 60_000);
    expect(await inRedis(shard, trail)).toBe(0);

    const blind = await startWebUnderTest(testConfig(stack.config.prefix, { HERALD_ARCHIVE_URL: 'file:///dev/null/herald-archive' }));
    try {
      const res = await blind.call('GET', `/v1/notices/${id}/events`);
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('unavailable');
    } finally {
      await blind.close();
    }
  });
});

describe('GET /readyz and /metrics', () => {
  it('stay quiet while the mirror keeps up', async () => {
    await allArchived();
    expect((await stack.web.call('GET', '/readyz')).json()).toEqual({ status: 'ready' });
    const metrics = (await stack.web.call('GET', '/metrics')).body;
    expect(metrics).toContain('herald_log_oldest_unarchived_seconds 0');
    expect(metrics).toMatch(/herald_log_unarchived_entries\{shard="0"\} 0/);
  });

  it('warn, while staying ready, when entries wait for the archive (no worker mirrors them here)', async () => {
    const prefix = testPrefix('behind');
    const web = await startWebUnderTest(testConfig(prefix, { HERALD_MIRROR_WARN_BACKLOG: '2' }));
    try {
      await writeNotices(web.store, redis, 3, 1);
      const ready = await web.call('GET', '/readyz');
      expect(ready.statusCode).toBe(200);
      expect(ready.json()).toMatchObject({ status: 'ready', warnings: [{ code: 'log_mirror_behind' }] });
      expect((await web.call('GET', '/metrics')).body).toMatch(/herald_log_unarchived_entries\{shard="3"\} 3/);
    } finally {
      await web.close();
      await cleanUp(prefix);
    }
  });
});
