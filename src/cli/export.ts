/** `herald export`: writes the archive's decision log of a period as NDJSON, in entry order. */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { parseArgs } from 'node:util';
import { exportEntries } from '../archive/export.js';
import { iso } from '../clock.js';
import { composeCli } from '../compose.js';
import { loadConfig } from '../config.js';
import { parseTime, UsageError, type CliCommand, type CliIo } from './command.js';
import { progressWriter } from './output.js';

export const exportCommand: CliCommand = {
  name: 'export',
  summary: "writes the archive's decision log of a period as NDJSON, in entry order",
  usage: `herald export --from <time> [--to <time>] [--out <file>] [--quiet]
    The archive's decision log for [from, to) as NDJSON, ordered by entry ID, to stdout or a
    file. Times are ISO 8601 (2026-11-01, 2026-11-01T14:00:00Z) or an age (90m, 24h, 7d: that
    long ago); --to defaults to now. Progress goes to stderr unless --quiet.
`,
  run: exportPeriod,
};

async function exportPeriod(args: string[], io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
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

  const parts = composeCli(config, { clock: { now: io.now } });
  // A shard's anchor in the archive says where its chain began, so that an object stripped of its seal is refused; Redis, for a shard not anchored yet.
  await parts.reach();
  const archive = parts.archive();
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
    await parts.close();
  }
}
