/**
 * The decision-log mirror under a steady write rate: entries are appended to the 16 shards'
 * streams at `perSecond` for `seconds`, while a LogMirror sweeps every second as the worker's
 * `log-mirror` schedule runs it, into a file archive in a temporary directory (or an S3 store
 * when one is given). Lag is per entry: the time from its append (its stream ID) to the
 * acknowledgement of the batch that archived it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Archive } from '../src/archive/archive.js';
import { createFileStorage } from '../src/archive/file-storage.js';
import { LogMirror } from '../src/retention/mirror.js';
import { idTime } from '../src/archive/names.js';
import type { ObjectStorage } from '../src/archive/object-storage.js';
import { systemClock } from '../src/clock.js';
import { Keys } from '../src/store/keys.js';
import type { BenchContext } from './herald.js';
import { sleep } from './processes.js';
import { deleteKeys } from './redis-stats.js';

export interface MirrorRun {
  written: number;
  archived: number;
  /** Entries archived per second over the writing period and the drain after it. */
  perSecond: number;
  lagMs: { p50: number; p99: number; max: number };
  /** How long the mirror needed to catch up once writing stopped. */
  drainMs: number;
}

const SWEEP_EVERY_MS = 1000;

export async function measureMirror(
  ctx: BenchContext,
  opts: { perSecond: number; seconds: number; store?: ObjectStorage },
): Promise<MirrorRun> {
  const prefix = `${ctx.runPrefix}-mirror`;
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-archive-'));
  const keys = new Keys(prefix);
  const lags: number[] = [];
  let archived = 0;
  const mirror = new LogMirror({
    redis: ctx.redis,
    keys,
    archive: new Archive(opts.store ?? createFileStorage(dir), prefix),
    clock: systemClock,
    log: pino({ level: 'warn' }),
    consumer: 'bench',
    contentTtlMs: 7 * 86_400_000,
    noticeKeepHotMs: 86_400_000,
    settings: { batchSize: 1000, reclaimAfterMs: 60_000, keepHotMs: 0, sweepBudgetMs: 10_000 },
    hooks: {
      afterAck: (batch) => {
        const now = Date.now();
        for (const entry of batch.entries) lags.push(now - idTime(entry.id));
        archived += batch.entries.length;
      },
    },
  });

  const writer = ctx.redis.duplicate();
  const started = Date.now();
  let written = 0;
  const fields = (i: number) => {
    const at = new Date().toISOString();
    return [
      'type',
      'email.observed',
      'noticeId',
      `ntc_00${i.toString(36).padStart(26, '0')}`,
      'at',
      at,
      'seq',
      String(i % 13),
      'attemptId',
      JSON.stringify(`att_${i}`),
      'providerStatus',
      '"Sent"',
      'status',
      '"pending"',
      'observedAt',
      JSON.stringify(at),
      'nextCheckAt',
      JSON.stringify(at),
    ];
  };
  const writing = (async () => {
    while (Date.now() - started < opts.seconds * 1000) {
      const due = Math.floor(((Date.now() - started) / 1000) * opts.perSecond) - written;
      if (due > 0) {
        const pipeline = writer.pipeline();
        for (let i = 0; i < due; i += 1) pipeline.xadd(keys.log((written + i) % 16), '*', ...fields(written + i));
        await pipeline.exec();
        written += due;
      }
      await sleep(50);
    }
  })();
  let stop = false;
  const mirroring = (async () => {
    while (!stop) {
      const sweep = Date.now();
      await mirror.mirrorOnce();
      await sleep(Math.max(0, SWEEP_EVERY_MS - (Date.now() - sweep)));
    }
  })();

  try {
    await writing;
    const wroteAt = Date.now();
    while (archived < written && Date.now() - wroteAt < 60_000) await sleep(100);
    const drainMs = Date.now() - wroteAt;
    stop = true;
    await mirroring;
    lags.sort((a, b) => a - b);
    const at = (q: number) => lags[Math.min(lags.length - 1, Math.floor(q * lags.length))] ?? Number.NaN;
    ctx.log(`mirror: ${archived}/${written} entries archived, lag p99 ${at(0.99)} ms, drained ${drainMs} ms after writing stopped`);
    return {
      written,
      archived,
      perSecond: archived / ((Date.now() - started) / 1000),
      lagMs: { p50: at(0.5), p99: at(0.99), max: lags.at(-1) ?? Number.NaN },
      drainMs,
    };
  } finally {
    stop = true;
    await mirroring.catch(() => undefined);
    writer.disconnect();
    await deleteKeys(ctx.redis, prefix).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
