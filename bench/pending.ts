/**
 * Pending notices: Redis memory per pending notice with 10,000 of them, and deadline precision
 * (`decidedAt − deadline`), first under a burst (every deadline within 10 s: more than the
 * workers clear, so the figure is the burst's clearing rate), then under a steady load at 60 %
 * of that rate (deadlines evenly spread over 20 s). The baseline is as many raw BullMQ delayed
 * jobs (the notice body as data) due on the same schedule: the memory of a pending job, and how
 * late BullMQ itself starts a delayed job.
 */
import { createNotices, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { sleep, until } from './processes.js';
import { RawDeployment } from './raw.js';
import { keysMemory, perItem, scanKeys, usedMemory } from './redis-stats.js';
import { distribution, type Distribution } from './stats.js';

export interface PendingRun {
  items: number;
  workers: number;
  /**
   * INFO memory `used_memory` growth per pending item. Herald: once the notices' log entries are
   * archived and trimmed from Redis, as they are for any notice pending longer than
   * HERALD_LOG_KEEP_HOT (10 minutes by default); the run keeps them hot for 1 s to get there.
   */
  bytesPerItem: number;
  /** The same from MEMORY USAGE of the run's own keys: blind to anything else on this Redis. */
  keyBytesPerItem: number;
  /** keyBytesPerItem by kind of key (the notice hash, its jobs, ...), largest first. */
  keyBytesByKind: Record<string, number>;
  /**
   * Herald only: the same three while the log entries are still in Redis (a notice in its first
   * HERALD_LOG_KEEP_HOT), read once every email was sent, before the mirror trimmed them.
   */
  hot?: { bytesPerItem: number; keyBytesPerItem: number; keyBytesByKind: Record<string, number> };
  /** How late the deadline decision (Herald) or the job start (BullMQ) came, in ms. */
  lateness: Distribution;
  negative: number;
  windowSeconds: number;
  /**
   * How fast the deadlines were cleared: items over the time from the first deadline to the last
   * decision (Herald: fallback decided; raw: job started), never more than they fell due.
   */
  clearingPerSecond: number;
}

/** The burst: every deadline within this window. */
export const BURST_WINDOW_MS = 10_000;
/** The steady load: deadlines evenly spread over this window, at a rate the burst showed Herald sustains. */
export const STEADY_WINDOW_MS = 20_000;
/**
 * The steady load runs this long before its window at the same rate, and only the window is
 * measured: the load is then steady when the measurement begins (a worker that has run the
 * deadline path is past its start-up, as any running deployment's is), not starting from nothing.
 */
export const STEADY_LEAD_IN_MS = 5_000;

/**
 * Every key name starts with the prefix, so the runs use prefixes as long as the default
 * `herald` (7 characters each, where the run's own would be twice that): key names then weigh
 * what they would in a deployment, on both sides alike.
 */
const heraldPrefix = (ctx: BenchContext) => `${ctx.runPrefix}p`;
const rawPrefix = (ctx: BenchContext) => `${ctx.runPrefix}r`;

/**
 * `notices` deadlines over `windowMs`, and at the same rate over `leadInMs` before it (those
 * unmeasured): the memory is read with all of them pending.
 */
export async function heraldPending(
  ctx: BenchContext,
  notices: number,
  workers: number,
  windowMs = BURST_WINDOW_MS,
  leadInMs = 0,
): Promise<PendingRun> {
  // Archived log entries stay in Redis for 1 s instead of 10 minutes: the state every notice pending
  // longer than HERALD_LOG_KEEP_HOT is in, reached within the benchmark's minutes.
  const herald = new HeraldDeployment(ctx, heraldPrefix(ctx), { HERALD_LOG_KEEP_HOT: '1s' });
  try {
    await herald.startWeb();
    await herald.startWorkers(workers);
    ctx.sandbox.reset();
    globalThis.gc?.();
    await sleep(500);
    const before = await usedMemory(ctx.redis);
    // Far enough ahead that every notice is created and its email sent before the window opens
    // (about 150 notices a second do both on this benchmark's 2-core machine).
    // (about 150 notices a second do both on this benchmark's 2-core machine), and the log mirror
    // has archived their entries.
    const leadIn = Math.round((notices * leadInMs) / windowMs);
    const total = notices + leadIn;
    const windowStart = Date.now() + 20_000 + leadInMs + Math.ceil(total / 100) * 1000;
    const deadlineOf = (i: number) => windowStart - leadInMs + Math.floor((i * (windowMs + leadInMs)) / total);
    ctx.log(`pending: creating ${total} notices`);
    const creating = Date.now();
    await createNotices(herald.url, total, (i) =>
      noticeBody({ email: 'never@example.com', phone: '+12025550100', deadline: deadlineOf(i) }),
    );
    ctx.log(`pending: created in ${((Date.now() - creating) / 1000).toFixed(1)} s`);
    await until(async () => ctx.sandbox.accepted.emails >= notices, 60_000, 'every email of the pending notices to be sent', 100);
    const hotAfter = await usedMemory(ctx.redis);
    const hotOwn = await keysMemory(ctx.redis, herald.prefix);
    ctx.log(`pending: ${total} pending, ${Math.round((hotAfter - before) / total)} B each with their log entries in Redis`);
    // Then once the log mirror has caught up (every entry handed out) and trimmed what it archived:
    // only the entries of the last HERALD_LOG_KEEP_HOT (planned checks keep adding some) remain.
    const logs = await scanKeys(ctx.redis, `${herald.prefix}:*:log`);
    await until(
      async () => (await Promise.all(logs.map((key) => mirrorLag(ctx, key)))).every((lag) => lag === 0),
      120_000,
      'the log mirror to catch up',
      250,
    );
    await sleep(2500);
    globalThis.gc?.();
    const after = await usedMemory(ctx.redis);
    const own = await keysMemory(ctx.redis, herald.prefix);
    if (Date.now() > windowStart - leadInMs) ctx.log('pending: the memory reading came after the first deadline; raise the lead');
    ctx.log(
      `pending: ${total} pending, ${Math.round((after - before) / total)} B each once their log is archived; waiting for the deadlines`,
    );

    await until(
      async () => (await herald.live()) === 0,
      windowMs + 240_000 + Math.max(0, windowStart - Date.now()),
      'every pending notice to complete',
      250,
    );
    const lateness: number[] = [];
    let lastDecided = 0;
    const noticeKeys = await scanKeys(ctx.redis, `${herald.prefix}:*:notice:*`);
    for (let i = 0; i < noticeKeys.length; i += 1000) {
      const pipeline = ctx.redis.pipeline();
      for (const key of noticeKeys.slice(i, i + 1000)) pipeline.hmget(key, 'deadline', 'fallbackDecidedAt');
      for (const [, fields] of (await pipeline.exec()) ?? []) {
        const [deadline, decidedAt] = fields as [string | null, string | null];
        if (deadline && decidedAt && Number(deadline) >= windowStart) {
          lateness.push(Number(decidedAt) - Number(deadline));
          lastDecided = Math.max(lastDecided, Number(decidedAt));
        }
      }
    }
    const run = pendingRun(
      notices,
      workers,
      (after - before) * (notices / total),
      perItemOf(own, notices / total),
      lateness,
      windowMs,
      lastDecided - windowStart,
    );
    const hot = pendingRun(notices, workers, (hotAfter - before) * (notices / total), perItemOf(hotOwn, notices / total), [], windowMs, 0);
    return { ...run, hot: { bytesPerItem: hot.bytesPerItem, keyBytesPerItem: hot.keyBytesPerItem, keyBytesByKind: hot.keyBytesByKind } };
  } finally {
    await herald.close();
  }
}

/** Entries of a shard's log the mirror's consumer group has not been handed yet (XINFO GROUPS' lag). */
export async function mirrorLag(ctx: BenchContext, key: string): Promise<number> {
  const groups = (await ctx.redis.xinfo('GROUPS', key)) as unknown[][];
  const mirror = groups.map((fields) => Object.fromEntries(pairs(fields))).find((g) => g.name === 'mirror');
  return mirror ? Number(mirror.lag ?? 0) : Number.POSITIVE_INFINITY;
}

function pairs(flat: unknown[]): [string, unknown][] {
  const out: [string, unknown][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([String(flat[i]), flat[i + 1]]);
  return out;
}

/** The memory readings of `total` items, scaled to `share` of them (the measured ones of a run with a lead-in). */
function perItemOf(
  own: { bytes: number; byKind: Record<string, number> },
  share: number,
): { bytes: number; byKind: Record<string, number> } {
  return { bytes: own.bytes * share, byKind: Object.fromEntries(Object.entries(own.byKind).map(([kind, bytes]) => [kind, bytes * share])) };
}

/** As heraldPending: `jobs` delayed jobs over `windowMs`, and at the same rate over `leadInMs` before it. */
export async function rawPending(
  ctx: BenchContext,
  jobs: number,
  workers: number,
  windowMs = BURST_WINDOW_MS,
  leadInMs = 0,
): Promise<PendingRun> {
  const raw = new RawDeployment(ctx, rawPrefix(ctx));
  try {
    await raw.startWorkers(workers);
    globalThis.gc?.();
    await sleep(500);
    const before = await usedMemory(ctx.redis);
    const leadIn = Math.round((jobs * leadInMs) / windowMs);
    const total = jobs + leadIn;
    const windowStart = Date.now() + 15_000 + leadInMs;
    const body = noticeBody({ email: 'never@example.com', phone: '+12025550100', deadlineInSeconds: 600 });
    // Completed jobs are kept so that their start times can be read afterwards.
    const ids = await raw.addBulk(
      total,
      () => body,
      (i) => ({ delay: windowStart - leadInMs + Math.floor((i * (windowMs + leadInMs)) / total) - Date.now(), removeOnComplete: false }),
    );
    const after = await usedMemory(ctx.redis);
    const own = await keysMemory(ctx.redis, raw.prefix);
    await sleep(Math.max(0, windowStart - leadInMs - Date.now()));
    await until(() => raw.drained(), leadInMs + windowMs + 120_000, 'every delayed job to run', 250);
    const lateness: number[] = [];
    let lastStarted = 0;
    for (let i = 0; i < ids.length; i += 1000) {
      const pipeline = ctx.redis.pipeline();
      // The hash's own `delay` field is zeroed when BullMQ promotes the job; its options keep it.
      for (const id of ids.slice(i, i + 1000)) pipeline.hmget(`${raw.prefix}:{q}:noop:${id}`, 'timestamp', 'opts', 'processedOn');
      for (const [, fields] of (await pipeline.exec()) ?? []) {
        const [timestamp, opts, processedOn] = fields as (string | null)[];
        const delay = (JSON.parse(opts ?? '{}') as { delay?: number }).delay ?? 0;
        if (processedOn && Number(timestamp) + delay >= windowStart) {
          lateness.push(Number(processedOn) - (Number(timestamp) + delay));
          lastStarted = Math.max(lastStarted, Number(processedOn));
        }
      }
    }
    return pendingRun(
      jobs,
      workers,
      (after - before) * (jobs / total),
      perItemOf(own, jobs / total),
      lateness,
      windowMs,
      lastStarted - windowStart,
    );
  } finally {
    await raw.close();
  }
}

/** One run's figures from its memory growth, its own keys' sizes and the lateness of each item. */
function pendingRun(
  items: number,
  workers: number,
  grownBytes: number,
  own: { bytes: number; byKind: Record<string, number> },
  lateness: number[],
  windowMs: number,
  clearedInMs: number,
): PendingRun {
  return {
    items,
    workers,
    bytesPerItem: grownBytes / items,
    keyBytesPerItem: own.bytes / items,
    keyBytesByKind: perItem(own.byKind, items),
    lateness: distribution(lateness),
    negative: lateness.filter((ms) => ms < 0).length,
    windowSeconds: windowMs / 1000,
    clearingPerSecond: items / (Math.max(windowMs, clearedInMs) / 1000),
  };
}
