import { createHmac } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import S3rver from 's3rver';
import { Archive } from '../../src/archive/archive.js';
import { createFileStorage } from '../../src/archive/file-storage.js';
import { LogMirror, type MirrorHooks, type MirrorSettings } from '../../src/retention/mirror.js';
import { createS3Storage } from '../../src/archive/s3-storage.js';
import type { ObjectStorage } from '../../src/archive/object-storage.js';
import { runCli } from '../../src/cli.js';
import { iso, systemClock, type Clock } from '../../src/clock.js';
import { DEV_ARCHIVE_KEY } from '../../src/config.js';
import type { EncryptionKey } from '../../src/crypto.js';
import { createLogger } from '../../src/logger.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { decodeEntry, type NoticeStore, type StoredEntry } from '../../src/store/notices.js';
import { entryOf } from './entries.js';
import { storedNoticeFields } from './notices.js';

export const silent = createLogger('herald-test-archive', 'silent');

/** A fresh temporary directory; `remove` deletes it. */
export async function tempDir(label: string): Promise<{ path: string; remove(): Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `herald-${label}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

export interface S3UnderTest {
  endpoint: string;
  bucket: string;
  /** A store on this server under its own key prefix. */
  store(prefix: string): ObjectStorage;
  close(): Promise<void>;
}

/** A real S3-protocol server (s3rver) on a free port, with one bucket, its data in a temporary directory. */
export async function startS3(): Promise<S3UnderTest> {
  const dir = await tempDir('s3rver');
  const bucket = 'herald-archive';
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir.path, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    store: (prefix) =>
      createS3Storage({
        bucket,
        prefix,
        endpoint,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      }),
    close: async () => {
      await server.close();
      await dir.remove();
    },
  };
}

export function fileStore(path: string): ObjectStorage {
  return createFileStorage(path);
}

/** A store that counts what is asked of it: the keys read (`gets`), written (`puts`, in order) and listed (`lists`, by prefix). */
export function countingStore(inner: ObjectStorage): ObjectStorage & { gets: string[]; puts: string[]; lists: string[] } {
  const gets: string[] = [];
  const puts: string[] = [];
  const lists: string[] = [];
  return {
    location: inner.location,
    gets,
    puts,
    lists,
    get: (key) => (gets.push(key), inner.get(key)),
    put: (key, body, sha256, seal) => (puts.push(key), inner.put(key, body, sha256, seal)),
    list: (prefix, startAfter) => (lists.push(prefix), inner.list(prefix, startAfter)),
    delete: (keys) => inner.delete(keys),
    close: () => inner.close(),
  };
}

/**
 * Writes `notices` notices into one shard through the store's own scripts, each with three
 * log entries, and returns the shard's log as Redis holds it.
 */
export async function writeNotices(store: NoticeStore, redis: Redis, shard: number, notices: number): Promise<StoredEntry[]> {
  const now = Date.now();
  for (let i = 0; i < notices; i += 1) {
    const id = newNoticeId(shard, now + i);
    await store.create({
      id,
      createdAt: now,
      fields: storedNoticeFields(id, now, { recipientId: `r${i}` }),
      content: { subject: 'S', text: 'body' },
      entries: [entryOf('notice.accepted', { deadline: iso(now + 600_000), contentSha256: 'x' })],
      at: iso(now),
      due: now,
      contentTtlMs: 60_000,
    });
    await store.transition(id, now, iso(now), {
      name: 'startEmailAttempt',
      entries: [
        { type: 'policy.checked', channel: 'email', outcome: 'allowed', policyVersion: 0 },
        entryOf('email.requested', { attemptId: `att_${i}`, idempotencyKey: `${id}-email`, provider: 'postmark' }),
      ],
    });
  }
  return streamEntries(redis, store.keys.log(shard));
}

export async function streamEntries(redis: Redis, key: string): Promise<StoredEntry[]> {
  const rows = (await redis.xrange(key, '-', '+')) as [string, string[]][];
  return rows.map(([id, fields]) => decodeEntry(id, fields));
}

/** Every entry the archive holds for a shard, object by object, in order. */
export async function archived(archive: Archive, shard: number): Promise<StoredEntry[]> {
  const entries: StoredEntry[] = [];
  for await (const entry of archive.entries(shard, 0, Number.MAX_SAFE_INTEGER)) entries.push(entry);
  return entries;
}

export function mirrorFor(opts: {
  redis: Redis;
  store: NoticeStore;
  archive: Archive;
  consumer: string;
  settings?: Partial<MirrorSettings>;
  hooks?: MirrorHooks;
  clock?: Clock;
}): LogMirror {
  return new LogMirror({
    redis: opts.redis,
    keys: opts.store.keys,
    archive: opts.archive,
    clock: opts.clock ?? systemClock,
    log: silent,
    consumer: opts.consumer,
    settings: { batchSize: 5, reclaimAfterMs: 60_000, keepHotMs: 0, sweepBudgetMs: 20_000, ...opts.settings },
    contentTtlMs: 60_000,
    noticeKeepHotMs: 86_400_000,
    hooks: opts.hooks,
  });
}

/** A crash point: throws on the `n`-th call (1-based), as a process killed right there. */
export function killOn(n: number, seen: { batches: string[][] } = { batches: [] }) {
  let calls = 0;
  return (batch: { entries: StoredEntry[] }) => {
    calls += 1;
    seen.batches.push(batch.entries.map((e) => e.id));
    if (calls === n) throw new Error('killed');
  };
}

/** A notice stored straight through the store and canceled: finished, never indexed for retirement. */
export async function finishedNotice(store: NoticeStore, shard: number, now: number): Promise<string> {
  const id = newNoticeId(shard, now);
  await store.create({
    id,
    createdAt: now,
    fields: storedNoticeFields(id, now),
    content: { subject: 'S', text: 'body' },
    entries: [entryOf('notice.accepted', { deadline: iso(now + 600_000), contentSha256: 'x' })],
    at: iso(now),
    due: now,
    contentTtlMs: 60_000,
  });
  const done = await store.transition(id, now, iso(now), {
    name: 'cancel',
    entries: [{ type: 'notice.completed', state: 'canceled' }],
    due: 'remove',
  });
  if (!done.ok) throw new Error(`could not cancel ${id}`);
  return id;
}

/**
 * A seal as versions before v2 wrote it: `v1`, a MAC over the name and the SHA-256 of the
 * *uncompressed* content (and, for an object, its link `prev`: `-` or `<range>@<digest>`).
 */
export function v1Seal(
  kind: 'object' | 'record',
  key: string,
  contentDigest: string,
  prev = '-',
  signer: EncryptionKey = DEV_ARCHIVE_KEY,
): string {
  const message =
    kind === 'object' ? ['herald-archive-object v1', key, contentDigest, prev] : ['herald-archive-record v1', key, contentDigest];
  const mac = createHmac('sha256', Buffer.from(signer.key, 'base64')).update(message.join('\n'), 'utf8').digest('hex');
  return `v1 ${signer.id} ${prev} ${mac}`;
}

function collector() {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

/** Runs one `herald` command in-process with the given environment; its exit code and output. */
export async function runHerald(args: string[], env: Record<string, string>, now = Date.now()) {
  const [stdout, stderr] = [collector(), collector()];
  const code = await runCli(args, { stdout: stdout.stream, stderr: stderr.stream, env, now: () => now });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}
