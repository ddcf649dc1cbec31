/** `herald retention apply`: deletes from the archive what is past HERALD_AUDIT_RETENTION. */
import { parseArgs } from 'node:util';
import { deletePointersOlderThan } from '../archive/recipient-index.js';
import { iso } from '../clock.js';
import { composeCli, type CliParts } from '../compose.js';
import { loadConfig } from '../config.js';
import { formatDuration } from '../durations.js';
import { SHARD_COUNT } from '../notice/ids.js';
import { progress } from '../progress.js';
import { indexUnretired } from '../retention/retire.js';
import { backfillStats, markStatsBackfilled } from '../store/stats.js';
import { UsageError, type CliCommand, type CliIo } from './command.js';
import { writeLines } from './output.js';

export const retentionCommand: CliCommand = {
  name: 'retention',
  summary: 'deletes from the archive what is past HERALD_AUDIT_RETENTION',
  usage: `herald retention apply [--dry-run]
    Deletes archive objects whose entries are all older than HERALD_AUDIT_RETENTION, and the
    records and recipient index entries of notices created before then.
`,
  run: retention,
};

async function retention(args: string[], io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { 'dry-run': { type: 'boolean' } } });
  if (positionals.length !== 1 || positionals[0] !== 'apply') throw new UsageError('retention takes one action: apply');
  const dryRun = values['dry-run'] === true;
  const cutoff = io.now() - config.auditRetentionMs;
  const parts = composeCli(config, { clock: { now: io.now } });
  try {
    // Opened before Redis is asked for: deleting by age reads no chain, and must not wait on a Redis that is down.
    const archive = parts.archive();
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
      io.stderr.write('On S3, a bucket lifecycle rule can do this without Herald: see docs/ARCHIVE.md.\n');
    }
    await indexFinishedNotices(parts, io, dryRun);
    return 0;
  } finally {
    await parts.close();
  }
}

/** Finished notices an earlier version left in Redis: indexed so that the worker retires them. */
async function indexFinishedNotices(parts: CliParts, io: CliIo, dryRun: boolean): Promise<void> {
  const redis = await parts.reach();
  if (!redis) {
    io.stderr.write('Redis cannot be reached: finished notices left in Redis by earlier versions were not looked for.\n');
    return;
  }
  const count = await indexUnretired(redis, parts.keys, io.now(), { dryRun });
  io.stderr.write(`${dryRun ? 'Would index' : 'Indexed'} ${count} finished notices left in Redis by earlier versions for retirement.\n`);
  if (dryRun) return;
  // After indexUnretired, which reads the same index: the backfill removes retired notices' members.
  const stats = await backfillStats(redis, parts.keys);
  await markStatsBackfilled(redis, parts.keys, io.now());
  io.stderr.write(
    `Counted ${stats.counted} notices of earlier versions in the /v1/stats counters (${stats.skipped} counted before` +
      `${stats.gone ? `, ${stats.gone} no longer in Redis and without counts` : ''}).\n`,
  );
}
