/** `herald audit`: a notice's decision log, or (`--verify`) a check of every seal and chain of the archive. */
import { parseArgs } from 'node:util';
import type { Archive } from '../archive/archive.js';
import type { ExportProgress } from '../archive/export.js';
import { idTime, shardName } from '../archive/names.js';
import type { NoticeRecord } from '../archive/records.js';
import { verifyShard, type ShardVerdict } from '../archive/verify.js';
import { iso } from '../clock.js';
import { composeCli } from '../compose.js';
import { loadConfig, type Config } from '../config.js';
import { noticeCreatedAt, shardOfNoticeId } from '../notice/ids.js';
import type { StoredEntry } from '../store/notices.js';
import { UsageError, type CliCommand, type CliIo } from './command.js';
import { progressWriter, writeLines } from './output.js';

export const auditCommand: CliCommand = {
  name: 'audit',
  summary: "prints a notice's decision log, or checks the archive's seals and chains (--verify)",
  usage: `herald audit <noticeId> [--json]
    The notice's decision log in order, from Redis and the archive (--json: one entry per line).

herald audit --verify [--shard N] [--allow-unanchored]
    Checks every object and notice record of the archive (or of shard N): its seal
    (HERALD_ARCHIVE_KEY), its entries, and each shard's chain from its anchor in the archive
    (Redis is not needed). Exits 0 when all hold, 1 naming the first object of a shard that
    does not, and why. A shard with objects and no anchor does not hold unless
    --allow-unanchored (then Redis says where its chain began, or its unsigned objects before
    the first signed one count as legacy).
`,
  run: audit,
};

async function audit(args: string[], io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
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

  const parts = composeCli(config, { clock: { now: io.now } });
  try {
    const reachable = (await parts.reach()) !== undefined;
    const archive = parts.archive();
    const notice = reachable ? await parts.stores().store.get(id) : null;
    let entries: StoredEntry[];
    let source: string;
    let record: NoticeRecord | null;
    if (notice) {
      const trail = await parts.trail(id);
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
    await parts.close();
  }
}

/** `herald audit --verify`: every shard's anchor, objects, chain and records, or one shard's. */
async function verify(config: Config, opts: { shard: string | undefined; allowUnanchored: boolean }, io: CliIo): Promise<number> {
  const parts = composeCli(config, { clock: { now: io.now } });
  let shards = parts.keys.allShards();
  const shardOption = opts.shard;
  if (shardOption !== undefined) {
    const shard = Number(shardOption);
    if (!/^\d+$/.test(shardOption) || !shards.includes(shard))
      throw new UsageError(`--shard must be a shard number from 0 to ${shards.length - 1}`);
    shards = [shard];
  }
  try {
    const reachable = (await parts.reach()) !== undefined;
    const archive = parts.archive();
    const chains = reachable ? parts.chains() : undefined;
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
    await parts.close();
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
