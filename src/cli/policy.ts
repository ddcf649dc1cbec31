/** `herald policy replay`: a proposed rules file against the fallback decisions of a period. */
import { parseArgs } from 'node:util';
import type { Archive } from '../archive/archive.js';
import { exportEntries } from '../archive/export.js';
import { idTime } from '../archive/names.js';
import { iso } from '../clock.js';
import { composeCli } from '../compose.js';
import { loadConfig } from '../config.js';
import { collectDecisions, replayDecisions } from '../policy/replay.js';
import { loadRules, RulesError, type Rules } from '../policy/rules.js';
import { progress } from '../progress.js';
import type { NoticeStore, StoredEntry } from '../store/notices.js';
import { parseTime, UsageError, type CliCommand, type CliIo } from './command.js';
import { withProgress, writeLines } from './output.js';

export const policyCommand: CliCommand = {
  name: 'policy',
  summary: "replays a period's fallback decisions against a proposed rules file",
  usage: `herald policy replay --rules <file> --from <time> [--to <time>] [--current-policies] [--json]
    Decides every fallback recorded in [from, to) again (from Redis and the archive) with the
    proposed rules file and the recipient policy versions the decisions used (or, with
    --current-policies, today's), and lists the notices whose outcome or timing would change.
`,
  run: policyReplay,
};

async function policyReplay(args: string[], io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
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

  const parts = composeCli(config, { clock: { now: io.now } });
  try {
    // The decisions of a period are in Redis as well as in the archive: no Redis, no replay.
    await parts.ready();
    const { store, policies } = parts.stores();
    const bar = progress(io.stderr, { quiet: values.json === true && !io.stderr.isTTY });
    const records = await collectDecisions(
      withProgress(periodEntries(parts.archive(), store, from, to), (entry, read) =>
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
    await parts.close();
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
