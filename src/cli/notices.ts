/** `herald notices list`: the notices of /admin/notices, one per line, from a shell. */
import { parseArgs } from 'node:util';
import { iso } from '../clock.js';
import { composeCli } from '../compose.js';
import { loadConfig } from '../config.js';
import { NoticeQueryError, parseNoticeQuery, searchDeps, searchNotices } from '../notice/search.js';
import { parseTime, UsageError, type CliCommand, type CliIo } from './command.js';
import { writeLines } from './output.js';

export const noticesCommand: CliCommand = {
  name: 'notices',
  summary: 'lists notices newest first, with the filters of /admin/notices',
  usage: `herald notices list [--state S] [--reason R] [--category C] [--recipient ID] [--email A]
                    [--phone +E164] [--from <time>] [--to <time>] [--view late|in_doubt] [--id ID]
                    [--limit N] [--cursor C] [--json]
    Notices newest first, one per line (ID, state, category, recipient, created, deadline,
    fallback reason), as /admin/notices lists them; --json: one JSON object per line. A notice
    Redis let go of is found by --id, --recipient, --email or --phone (the archive's recipient
    index; an address through its HMAC only). When more may match, the command for the next
    page goes to stderr.
`,
  run: noticesList,
};

async function noticesList(args: string[], io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
  const text = { type: 'string' } as const;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      state: text,
      reason: text,
      category: text,
      recipient: text,
      email: text,
      phone: text,
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
      email: values.email,
      phone: values.phone,
      from: values.from === undefined ? undefined : iso(parseTime(values.from, now, '--from')),
      to: values.to === undefined ? undefined : iso(parseTime(values.to, now, '--to')),
      view: values.view,
      id: values.id,
      limit: values.limit,
      cursor: values.cursor,
    });
  } catch (error) {
    if (error instanceof NoticeQueryError)
      throw new UsageError(error.message.replace('recipientId:', '--recipient:').replace(/\b(email|phone):/g, '--$1:'));
    throw error;
  }
  const parts = composeCli(config, { clock: { now: io.now } });
  try {
    if (!(await parts.reach())) throw new Error('Redis cannot be reached: the notices list reads live notices there');
    const page = await searchNotices(
      searchDeps(config, { index: parts.stores().noticeIndex, archive: parts.archive, now }),
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
    await parts.close();
  }
}
