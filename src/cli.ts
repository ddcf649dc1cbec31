#!/usr/bin/env node
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { Writable } from 'node:stream';
import type { Archive } from './archive/archive.js';
import { exportEntries, type ExportProgress } from './archive/export.js';
import { idTime, shardName } from './archive/names.js';
import { openArchive } from './archive/open.js';
import { readTrail } from './archive/trail.js';
import type { NoticeRecord } from './archive/records.js';
import { indexUnretired } from './retention/retire.js';
import { deletePointersOlderThan } from './archive/recipient-index.js';
import { verifyShard, type ShardVerdict } from './archive/verify.js';
import { LogMirrorStore } from './store/log-mirror.js';
import { backfillStats, markStatsBackfilled } from './store/stats.js';
import { Keys } from './store/keys.js';
import { iso } from './clock.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { diagnose, formatFindings } from './doctor.js';
import { progress } from './progress.js';
import { formatDuration, parseDuration } from './durations.js';
import { noticeCreatedAt, SHARD_COUNT, shardOfNoticeId } from './notice/ids.js';
import type { RedisClient } from './store/redis.js';
import { collectDecisions, replayDecisions } from './policy/replay.js';
import { loadRules, RulesError, type Rules } from './policy/rules.js';
import { NoticeStore, type StoredEntry } from './store/notices.js';
import { PolicyStore } from './store/policies.js';
import { NoticeIndex } from './store/notice-index.js';
import { NoticeQueryError, parseNoticeQuery, searchNotices } from './notice/search.js';
import { connectRedis, waitReady } from './store/redis.js';

const USAGE = `herald: read and keep Herald's audit trail (uses the same environment as web and worker)

  herald audit <noticeId> [--json]
      The notice's decision log in order, from Redis and the archive (--json: one entry per line).

  herald audit --verify [--shard N] [--allow-unanchored]
      Checks every object and notice record of the archive (or of shard N): its seal
      (HERALD_ARCHIVE_KEY), its entries, and each shard's chain from its anchor in the archive
      (Redis is not needed). Exits 0 when all hold, 1 naming the first object of a shard that
      does not, and why. A shard with objects and no anchor does not hold unless
      --allow-unanchored (then Redis says where its chain began, or its unsigned objects before
      the first signed one count as legacy).

  herald export --from <time> [--to <time>] [--out <file>] [--quiet]
      The archive's decision log for [from, to) as NDJSON, ordered by entry ID, to stdout or a
      file. Times are ISO 8601 (2026-11-01, 2026-11-01T14:00:00Z) or an age (90m, 24h, 7d: that
      long ago); --to defaults to now. Progress goes to stderr unless --quiet.

  herald doctor
      Checks the configuration, Redis (reachable, a master, noeviction, append-only file), this
      machine's clock against Redis TIME, the archive (writes, reads back and deletes an object)
      and the providers (an authenticated call that sends nothing), and says what to fix.
      Exits 1 when something must be fixed.

  herald retention apply [--dry-run]
      Deletes archive objects whose entries are all older than HERALD_AUDIT_RETENTION, and the
      records and recipient index entries of notices created before then.

  herald notices list [--state S] [--reason R] [--category C] [--recipient ID] [--from <time>]
                      [--to <time>] [--view late|in_doubt] [--id ID] [--limit N] [--cursor C] [--json]
      Notices newest first, one per line (ID, state, category, recipient, created, deadline,
      fallback reason), as /admin/notices lists them; --json: one JSON object per line. A notice
      Redis let go of is found by --id or --recipient (the archive's recipient index). When more
      may match, the command for the next page goes to stderr.

  herald policy replay --rules <file> --from <time> [--to <time>] [--current-policies] [--json]
      Decides every fallback recorded in [from, to) again (from Redis and the archive) with the
      proposed rules file and the recipient policy versions the decisions used (or, with
      --current-policies, today's), and lists the notices whose outcome or timing would change.
`;

/** Where the CLI writes, and what it reads the configuration from (tests pass their own). */
export interface CliIo {
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean };
  env: Record<string, string | undefined>;
  now: () => number;
}

class UsageError extends Error {}

/** Runs one `herald` command; resolves with the exit code. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const say = (text: string) => io.stderr.write(`${text}\n`);
  try {
    const [command, ...rest] = argv;
    if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
      io.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    }
    // The doctor reports a bad configuration instead of stopping at it.
    if (command === 'doctor') return await doctor(io);
    const config = loadConfig(io.env);
    switch (command) {
      case 'audit':
        return await audit(config, rest, io);
      case 'export':
        return await exportPeriod(config, rest, io);
      case 'retention':
        return await retention(config, rest, io);
      case 'policy':
        return await policyReplay(config, rest, io);
      case 'notices':
        return await noticesList(config, rest, io);
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      say(`herald: ${(error as Error).message}\n\n${USAGE}`);
      return 2;
    }
    if (error instanceof ConfigError) {
      say(error.message);
      return 2;
    }
    say(`herald: ${(error as Error).message ?? String(error)}`);
    return 1;
  }
}

async function doctor(io: CliIo): Promise<number> {
  const findings = await diagnose(io.env, io.now);
  await writeLines(io.stdout, formatFindings(findings));
  return findings.some((f) => f.verdict === 'fail') ? 1 : 0;
}

async function audit(config: Config, args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      json: { type: 'boolean' },
      verify: { type: 'boolean' },
      shard: { type: 'string' },
      'allow-unanchored': { type: 'boolean' },
    },
  });
  if (values.verify) {
    if (positionals.length > 0 || values.json) throw new UsageError('audit --verify takes no notice ID and no --json');
    return verify(config, { shard: values.shard, allowUnanchored: values['allow-unanchored'] === true }, io);
  }
  if (values.shard !== undefined || values['allow-unanchored']) throw new UsageError('--shard and --allow-unanchored go with --verify');
  const id = positionals[0];
  if (positionals.length !== 1 || id === undefined) throw new UsageError('audit takes one notice ID');
  const shard = shardOfNoticeId(id);
  const createdAt = noticeCreatedAt(id);
  if (shard === undefined || createdAt === undefined) throw new UsageError(`"${id}" is not a notice ID`);

  const { redis, reachable } = await openCliRedis(config);
  const archive = openArchive(config, reachable ? redis : undefined);
  try {
    const store = new NoticeStore(redis, config.prefix);
    const notice = reachable ? await store.get(id) : null;
    let entries: StoredEntry[];
    let source: string;
    let record: NoticeRecord | null;
    if (notice) {
      const trail = await readTrail(
        { store, archive: () => archive, retainedSince: io.now() - config.auditRetentionMs },
        id,
      );
      entries = trail.entries;
      source = `${trail.fromRedis} from Redis, ${trail.fromArchive} from the archive${trail.expired ? `, ${trail.expired} past the audit retention` : ''}`;
      if (!values.json) io.stdout.write(`${id}  ${notice.state}  created ${iso(notice.createdAt)}  deadline ${iso(notice.deadline)}\n`);
    } else if ((record = await archive.readRecord(id))) {
      // Retired: the record names the entries, which the log's archive objects hold.
      const found = await archive.findEntries(shard, record.entryIds, { noticeId: id });
      entries = record.entryIds.map((entryId) => found.get(entryId)).filter((entry): entry is StoredEntry => entry !== undefined);
      const missing = record.entryIds.length - entries.length;
      source = `from the archive, retired${missing ? `; ${missing} past the audit retention` : ''}`;
      if (!values.json)
        io.stdout.write(`${id}  ${record.view.state}  created ${record.view.createdAt}  deadline ${record.view.deadline}\n`);
    } else {
      io.stderr.write(
        `${reachable ? 'Redis no longer holds this notice' : 'Redis cannot be reached'}; searching the archive of shard ${shard} from ${iso(createdAt)} (slow).\n`,
      );
      entries = await scanArchive(archive, shard, id, createdAt, io);
      source = 'from the archive';
      if (entries.length === 0) {
        io.stderr.write(`No entries of ${id} in the archive.\n`);
        return 1;
      }
    }
    if (values.json) {
      await writeLines(
        io.stdout,
        entries.map((e) => JSON.stringify(e)),
      );
    } else {
      await writeLines(io.stdout, [...entries.map(timelineLine), `${entries.length} entries (${source})`]);
    }
    return 0;
  } finally {
    redis.disconnect();
    await archive.close();
  }
}

/** `herald audit --verify`: every shard's anchor, objects, chain and records, or one shard's. */
async function verify(config: Config, opts: { shard: string | undefined; allowUnanchored: boolean }, io: CliIo): Promise<number> {
  const keys = new Keys(config.prefix);
  let shards = keys.allShards();
  const shardOption = opts.shard;
  if (shardOption !== undefined) {
    const shard = Number(shardOption);
    if (!/^\d+$/.test(shardOption) || !shards.includes(shard))
      throw new UsageError(`--shard must be a shard number from 0 to ${shards.length - 1}`);
    shards = [shard];
  }
  const { redis, reachable } = await openCliRedis(config);
  const archive = openArchive(config, reachable ? redis : undefined);
  const chains = reachable ? new LogMirrorStore(redis, keys) : undefined;
  try {
    const lines = [
      `Verifying ${archive.storage.location} (HERALD_PREFIX=${config.prefix}) with archive keys ${config.archiveKeys.map((k) => `"${k.id}"`).join(', ')}.`,
    ];
    if (!reachable)
      lines.push(
        "Redis cannot be reached: each chain's start comes from its anchor in the archive; its newest object (the tip Redis keeps) is not checked.",
      );
    await writeLines(io.stdout, lines);
    const verdicts: ShardVerdict[] = [];
    for (const shard of shards) {
      const verdict = await verifyShard(archive, shard, {
        retainedSince: io.now() - config.auditRetentionMs,
        chain: chains ? await chains.chain(shard) : undefined,
        pending: chains ? await chains.pendingBatches(shard) : undefined,
        allowUnanchored: opts.allowUnanchored,
      });
      verdicts.push(verdict);
      await writeLines(io.stdout, [
        verdict.broken
          ? `${shardName(shard)}  BROKEN  ${verdict.broken.key}: ${verdict.broken.why}`
          : `${shardName(shard)}  ok  ${describeVerdict(verdict)}`,
      ]);
    }
    const broken = verdicts.filter((v) => v.broken).length;
    await writeLines(io.stdout, [
      broken === 0 ? `All ${verdicts.length} shards hold.` : `${broken} of ${verdicts.length} shards do not hold.`,
    ]);
    return broken === 0 ? 0 : 1;
  } finally {
    redis.disconnect();
    await archive.close();
  }
}

function describeVerdict(v: ShardVerdict): string {
  const parts = [`${v.objects} objects`];
  if (v.legacy > 0) parts.push(`${v.legacy} of them unsigned, from before the chain began (legacy)`);
  if (v.afterRetention) parts.push(`the chain continues from objects past the audit retention at ${v.afterRetention}`);
  if (v.unarchived > 0) parts.push(`${v.unarchived} linked to batches Redis holds, not archived yet`);
  if (v.unanchored)
    parts.push(
      v.unanchored === 'redis'
        ? "no anchor (--allow-unanchored): the chain start is Redis's"
        : 'no anchor (--allow-unanchored), nor Redis: unsigned objects before the first signed one read as legacy',
    );
  parts.push(`${v.records} records${v.legacyRecords > 0 ? ` (${v.legacyRecords} unsigned, legacy)` : ''}`);
  return parts.join(', ');
}

/** `herald policy replay`: a proposed rules file against the decisions of a period. */
async function policyReplay(config: Config, args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      rules: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      json: { type: 'boolean' },
      'current-policies': { type: 'boolean' },
    },
  });
  if (positionals.length !== 1 || positionals[0] !== 'replay') throw new UsageError('policy takes one action: replay');
  if (values.rules === undefined || values.from === undefined) throw new UsageError('policy replay needs --rules and --from');
  let rules: Rules;
  try {
    rules = loadRules(values.rules);
  } catch (error) {
    if (!(error instanceof RulesError)) throw error;
    io.stderr.write(`herald: the proposed rules are not valid:\n${error.message}\n`);
    return 2;
  }
  const now = io.now();
  const from = parseTime(values.from, now, '--from');
  const to = values.to === undefined ? now : parseTime(values.to, now, '--to');
  if (!(from < to)) throw new UsageError('--from must be before --to');

  const redis = connectRedis(config.redis, 'web', 'herald-cli');
  redis.on('error', () => undefined);
  const archive = openArchive(config, redis);
  try {
    await waitReady(redis, 3000);
    const store = new NoticeStore(redis, config.prefix);
    const policies = new PolicyStore(redis, config.prefix);
    const bar = progress(io.stderr, { quiet: values.json === true && !io.stderr.isTTY });
    const records = await collectDecisions(
      withProgress(periodEntries(archive, store, from, to), (entry, read) =>
        bar.update((idTime(entry.id) - from) / (to - from), `${read} entries read, at ${iso(idTime(entry.id))}`),
      ),
    );
    bar.done();
    const report = await replayDecisions(records, rules, (recipientId, version) =>
      values['current-policies'] ? policies.get(recipientId) : policies.version(recipientId, version),
    );
    if (values.json) {
      io.stdout.write(`${JSON.stringify(report)}\n`);
    } else {
      await writeLines(io.stdout, [
        `Replayed ${report.examined} fallback decisions from ${iso(from)} to ${iso(to)} against rules ${report.rulesVersion}: ${report.changed.length} would change.`,
        ...report.changed.map((c) => `${c.noticeId}  decided ${c.decidedAt}  ${c.why}`),
        ...(report.policyVersionDropped.length === 0
          ? []
          : [
              `${report.policyVersionDropped.length} decisions not replayed: the recipient policy version they used is no longer kept ` +
                '(HERALD_POLICY_VERSIONS_KEPT); --current-policies replays them against the current policies.',
              ...report.policyVersionDropped.map(
                (d) => `${d.noticeId}  recipient ${d.recipientId}  policy version ${d.policyVersion} dropped`,
              ),
            ]),
      ]);
    }
    return 0;
  } finally {
    redis.disconnect();
    await archive.close();
  }
}

/** The decision log of [from, to): the archive, then what only Redis holds yet (overlap is harmless to a replay). */
async function* periodEntries(archive: Archive, store: NoticeStore, from: number, to: number): AsyncGenerator<StoredEntry> {
  yield* exportEntries(archive, from, to);
  for (const shard of store.keys.allShards()) {
    let start = `${from}-0`;
    for (;;) {
      const entries = await store.logRange(shard, start, `${to - 1}-18446744073709551615`, 1000);
      yield* entries;
      if (entries.length < 1000) break;
      start = `(${entries.at(-1)!.id}`;
    }
  }
}

/** A notice's entries found by reading its shard's archive from its creation on. */
async function scanArchive(archive: Archive, shard: number, id: string, createdAt: number, io: CliIo): Promise<StoredEntry[]> {
  // Entry IDs carry Redis's clock, the notice ID the web process's: allow for some skew.
  const from = createdAt - 10 * 60_000;
  const to = io.now();
  const found: StoredEntry[] = [];
  const progress = progressWriter(io, false, from, to);
  const scanned: ExportProgress = { entries: 0, objects: 0, position: from };
  let completed = false;
  let purged = false;
  const onObject = () => {
    scanned.objects += 1;
    progress(scanned);
  };
  for await (const entry of archive.entries(shard, from, to, onObject)) {
    scanned.entries += 1;
    scanned.position = idTime(entry.id);
    if (entry.noticeId !== id) continue;
    found.push(entry);
    completed ||= entry.type === 'notice.completed';
    purged ||= entry.type === 'content.purged';
    // The content purge is the last entry of a finished notice's life.
    if (completed && purged) break;
  }
  progress(undefined);
  return found;
}

function timelineLine(entry: StoredEntry): string {
  const { id: _id, seq, at, type, noticeId: _notice, ...fields } = entry;
  const details = Object.entries(fields)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  return `${String(seq).padStart(4)}  ${at}  ${type.padEnd(18)}  ${details}`;
}

async function exportPeriod(config: Config, args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: false,
    options: { from: { type: 'string' }, to: { type: 'string' }, out: { type: 'string' }, quiet: { type: 'boolean' } },
  });
  if (positionals.length > 0 || values.from === undefined) throw new UsageError('export needs --from');
  const now = io.now();
  const from = parseTime(values.from, now, '--from');
  const to = values.to === undefined ? now : parseTime(values.to, now, '--to');
  if (!(from < to)) throw new UsageError('--from must be before --to');

  // A shard's anchor in the archive says where its chain began, so that an object stripped of its seal is refused; Redis, for a shard not anchored yet.
  const { redis, reachable } = await openCliRedis(config);
  const archive = openArchive(config, reachable ? redis : undefined);
  const out = values.out === undefined ? io.stdout : createWriteStream(values.out);
  const progress = progressWriter(io, values.quiet === true, from, to);
  try {
    let written = 0;
    for await (const entry of exportEntries(archive, from, to, progress)) {
      if (!out.write(`${JSON.stringify(entry)}\n`)) await once(out, 'drain');
      written += 1;
    }
    progress(undefined);
    if (!values.quiet) io.stderr.write(`Exported ${written} entries from ${iso(from)} to ${iso(to)}.\n`);
    return 0;
  } finally {
    if (out !== io.stdout) await new Promise<void>((resolve) => out.end(() => resolve()));
    redis.disconnect();
    await archive.close();
  }
}

async function retention(config: Config, args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { 'dry-run': { type: 'boolean' } } });
  if (positionals.length !== 1 || positionals[0] !== 'apply') throw new UsageError('retention takes one action: apply');
  const dryRun = values['dry-run'] === true;
  const cutoff = io.now() - config.auditRetentionMs;
  const archive = openArchive(config);
  try {
    io.stderr.write(
      `${dryRun ? 'Would delete' : 'Deleting'} archive objects whose entries are all older than ${iso(cutoff)} ` +
        `(HERALD_AUDIT_RETENTION=${formatDuration(config.auditRetentionMs)}) from ${archive.storage.location}.\n`,
    );
    const bar = progress(io.stderr);
    let seen = 0;
    const { objects } = await archive.deleteOlderThan(cutoff, {
      dryRun,
      onDelete: (keys) => {
        seen += keys.length;
        // Objects are walked shard by shard (`<prefix>/s<NN>/…`): the shard says how far it is.
        const shard = Number(/\/s(\d{2})\//.exec(keys[keys.length - 1] ?? '')?.[1] ?? 0);
        bar.update((shard + 1) / SHARD_COUNT, `${seen} objects ${dryRun ? 'to delete' : 'deleted'}, in shard ${shard}`);
        if (dryRun) void writeLines(io.stdout, keys);
      },
    });
    bar.done();
    io.stderr.write(`${dryRun ? 'Would delete' : 'Deleted'} ${objects} objects.\n`);
    const pointers = await deletePointersOlderThan(archive, cutoff, {
      dryRun,
      onDelete: (keys) => (dryRun ? void writeLines(io.stdout, keys) : undefined),
    });
    io.stderr.write(`${dryRun ? 'Would delete' : 'Deleted'} ${pointers} recipient index entries of those notices.\n`);
    if (config.archiveUrl.startsWith('s3:')) {
      io.stderr.write('On S3, a bucket lifecycle rule can do this without Herald: see "Audit archive and retention" in the README.\n');
    }
    await indexFinishedNotices(config, io, dryRun);
    return 0;
  } finally {
    await archive.close();
  }
}

/** Finished notices an earlier version left in Redis: indexed so that the worker retires them. */
async function indexFinishedNotices(config: Config, io: CliIo, dryRun: boolean): Promise<void> {
  const { redis, reachable } = await openCliRedis(config);
  try {
    if (!reachable) {
      io.stderr.write('Redis cannot be reached: finished notices left in Redis by earlier versions were not looked for.\n');
      return;
    }
    const keys = new Keys(config.prefix);
    const count = await indexUnretired(redis, keys, io.now(), { dryRun });
    io.stderr.write(`${dryRun ? 'Would index' : 'Indexed'} ${count} finished notices left in Redis by earlier versions for retirement.\n`);
    if (dryRun) return;
    // After indexUnretired, which reads the same index: the backfill removes retired notices' members.
    const stats = await backfillStats(redis, keys);
    await markStatsBackfilled(redis, keys, io.now());
    io.stderr.write(
      `Counted ${stats.counted} notices of earlier versions in the /v1/stats counters (${stats.skipped} counted before` +
        `${stats.gone ? `, ${stats.gone} no longer in Redis and without counts` : ''}).\n`,
    );
  } finally {
    redis.disconnect();
  }
}

async function noticesList(config: Config, args: string[], io: CliIo): Promise<number> {
  const text = { type: 'string' } as const;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      state: text,
      reason: text,
      category: text,
      recipient: text,
      from: text,
      to: text,
      view: text,
      id: text,
      limit: text,
      cursor: text,
      json: { type: 'boolean' },
    },
  });
  if (positionals.length !== 1 || positionals[0] !== 'list') throw new UsageError('notices takes one action: list');
  const now = io.now();
  let query: ReturnType<typeof parseNoticeQuery>;
  try {
    query = parseNoticeQuery({
      state: values.state,
      reason: values.reason,
      category: values.category,
      recipientId: values.recipient,
      from: values.from === undefined ? undefined : iso(parseTime(values.from, now, '--from')),
      to: values.to === undefined ? undefined : iso(parseTime(values.to, now, '--to')),
      view: values.view,
      id: values.id,
      limit: values.limit,
      cursor: values.cursor,
    });
  } catch (error) {
    if (error instanceof NoticeQueryError) throw new UsageError(error.message.replace('recipientId:', '--recipient:'));
    throw error;
  }
  const { redis, reachable } = await openCliRedis(config);
  let archive: Archive | undefined;
  try {
    if (!reachable) throw new Error('Redis cannot be reached: the notices list reads live notices there');
    const page = await searchNotices(
      {
        index: new NoticeIndex(redis, new Keys(config.prefix)),
        archive: () => (archive ??= openArchive(config, redis)),
        now,
        lateAfterMs: config.reconcileGraceMs,
        auditRetentionMs: config.auditRetentionMs,
      },
      query.filters,
      { cursor: query.cursor, limit: query.limit },
    );
    await writeLines(
      io.stdout,
      page.notices.map((n) =>
        values.json
          ? JSON.stringify(n)
          : [
              n.id,
              n.state,
              n.category,
              n.recipientId,
              n.createdAt,
              n.deadline,
              n.fallbackReason ?? '-',
              ...(n.retired ? ['archived'] : []),
            ].join('  '),
      ),
    );
    if (page.next !== null) {
      const again = args.filter((_, i) => args[i] !== '--cursor' && args[i - 1] !== '--cursor' && !args[i]!.startsWith('--cursor='));
      io.stderr.write(`More may match: herald notices ${again.join(' ')} --cursor ${page.next}\n`);
    }
    return 0;
  } finally {
    redis.disconnect();
    await archive?.close();
  }
}

/** The CLI's Redis connection, and whether it answered within 3 s (commands that can do without it go on). */
async function openCliRedis(config: Config): Promise<{ redis: RedisClient; reachable: boolean }> {
  const redis = connectRedis(config.redis, 'web', 'herald-cli');
  redis.on('error', () => undefined);
  const reachable = await waitReady(redis, 3000).then(
    () => true,
    () => false,
  );
  return { redis, reachable };
}

/** An ISO 8601 time, or an age like `24h` meaning that long before `now`. */
function parseTime(text: string, now: number, option: string): number {
  if (/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/.test(text.trim())) return now - parseDuration(text);
  const ms = Date.parse(text);
  if (!Number.isFinite(ms)) throw new UsageError(`${option} "${text}" is neither an ISO 8601 time nor an age like 24h`);
  return ms;
}

/** Export's progress: how far through the period the archive has been read. */
function progressWriter(io: CliIo, quiet: boolean, from: number, to: number): (progress: ExportProgress | undefined) => void {
  const bar = progress(io.stderr, { quiet });
  return (at) => {
    if (at === undefined) return bar.done();
    bar.update((at.position - from) / (to - from), `${at.entries} entries, ${at.objects} objects read, at ${iso(at.position)}`);
  };
}

/** Passes entries through, telling `onEntry` of each (and how many so far). */
async function* withProgress<T>(entries: AsyncIterable<T>, onEntry: (entry: T, read: number) => void): AsyncIterable<T> {
  let read = 0;
  for await (const entry of entries) {
    read += 1;
    onEntry(entry, read);
    yield entry;
  }
}

async function writeLines(out: Writable, lines: string[]): Promise<void> {
  for (const line of lines) {
    if (!out.write(`${line}\n`)) await once(out, 'drain');
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // `herald export … | head` closes the pipe early: that is the reader's choice, not an error.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => process.exit(error.code === 'EPIPE' ? 0 : 1));
  runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, now: () => Date.now() }).then(
    (code) => {
      // Exit once what was written has gone out: a probe that never answers (an archive on a
      // hung mount) must not keep the command alive after it has reported.
      process.stdout.write('', () => process.exit(code));
    },
  );
}
