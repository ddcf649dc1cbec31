/** `herald send`: notices to a running Herald through its API, from an NDJSON file or one test notice. */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import type { BatchItemResult, BatchNotice, CreateNoticeBody, HeraldApiError, HeraldClient } from '@herald/client';
import { parseDuration } from '../durations.js';
import { progress } from '../progress.js';
import { UsageError, type CliCommand, type CliIo } from './command.js';
import { writeLines } from './output.js';

const DEFAULT_URL = 'http://127.0.0.1:3000';
const DEFAULT_BATCH = 200;

/** `herald send`, in the CLI's table. */
export const sendCommand: CliCommand = {
  name: 'send',
  summary: 'sends notices to a running Herald through its API: an NDJSON file, or one test notice',
  usage: `herald send --file <notices.ndjson> [--batch-size N] [--quiet]
    Sends one notice per line of the file (the body of POST /v1/notices, with an optional
    "idempotencyKey"), in batches of --batch-size (default ${DEFAULT_BATCH}; at most the server's
    HERALD_BATCH_MAX, 1000 unless set). Prints a line per refused notice (its line number, status,
    code and why) on stdout and a summary on stderr, with progress unless --quiet; exits 1 if any
    was refused. A line without an idempotencyKey gets a new one each run: give every line one
    to make running the file again safe.

  herald send --to-email <address> [--to-phone <E.164>] [--recipient ID] [--subject S] [--text T]
              [--sms T] [--category C] [--deadline-in 10m] [--idempotency-key K]
    Sends one test notice and prints its ID. The deadline is --deadline-in from now (30s, 10m,
    2h); the recipient ID is herald-send-test and the category test unless told.

  Herald is HERALD_URL (default ${DEFAULT_URL}); HERALD_KEY is an API key with the send
  scope (npm start prints one).
`,
  run: send,
};

type ClientModule = typeof import('@herald/client');

async function send(args: string[], io: CliIo): Promise<number> {
  const text = { type: 'string' } as const;
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      file: text,
      'batch-size': text,
      quiet: { type: 'boolean' },
      'to-email': text,
      'to-phone': text,
      recipient: text,
      subject: text,
      text,
      sms: text,
      category: text,
      'deadline-in': text,
      'idempotency-key': text,
    },
  });
  if (positionals.length > 0) throw new UsageError(`send takes no argument "${positionals[0]}"`);
  const single = ['to-email', 'to-phone', 'recipient', 'subject', 'text', 'sms', 'category', 'deadline-in', 'idempotency-key'] as const;
  if (values.file !== undefined) {
    const stray = single.find((name) => values[name] !== undefined);
    if (stray) throw new UsageError(`--${stray} is for one test notice, not with --file`);
  } else if (values['to-email'] === undefined) {
    throw new UsageError('send needs --file or --to-email');
  } else if (values['batch-size'] !== undefined) {
    throw new UsageError('--batch-size goes with --file');
  }
  const batchSize = values['batch-size'] === undefined ? DEFAULT_BATCH : Number(values['batch-size']);
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new UsageError('--batch-size must be a whole number, 1 or more');
  const apiKey = io.env.HERALD_KEY;
  if (!apiKey)
    throw new UsageError('HERALD_KEY must be an API key of the Herald at HERALD_URL, with the send scope (npm start prints one)');

  const client = await loadClient();
  let herald: HeraldClient;
  try {
    herald = client.createHeraldClient({ baseUrl: io.env.HERALD_URL || DEFAULT_URL, apiKey });
  } catch (error) {
    throw new UsageError(`HERALD_URL: ${(error as Error).message}`);
  }
  if (values.file !== undefined) return sendFile(herald, client, values.file, batchSize, values.quiet === true, io);

  let deadlineInSeconds: number;
  try {
    deadlineInSeconds = Math.max(1, Math.ceil(parseDuration(values['deadline-in'] ?? '10m') / 1000));
  } catch (error) {
    throw new UsageError(`--deadline-in: ${(error as Error).message}`);
  }
  const body: CreateNoticeBody = {
    recipient: {
      id: values.recipient ?? 'herald-send-test',
      email: values['to-email']!,
      ...(values['to-phone'] === undefined ? {} : { phone: values['to-phone'] }),
    },
    category: values.category ?? 'test',
    content: {
      subject: values.subject ?? 'A test notice from Herald',
      text: values.text ?? 'This is a test notice, sent with herald send.',
      ...(values.sms === undefined ? {} : { sms: values.sms }),
    },
    deadlineInSeconds,
  };
  try {
    const created = await herald.createNotice(
      body,
      values['idempotency-key'] === undefined ? {} : { idempotencyKey: values['idempotency-key'] },
    );
    await writeLines(io.stdout, [created.id]);
    io.stderr.write(
      created.replayed
        ? `${created.id} was already made with this idempotency key and body; it is ${created.notice.state}.\n`
        : `Accepted ${created.id}: deadline ${created.deadline}, ${created.plannedChecks.length} planned email checks.\n`,
    );
    return 0;
  } catch (error) {
    if (!(error instanceof client.HeraldApiError)) throw error;
    io.stderr.write(`herald: the notice was not accepted: ${describeError(error)}\n`);
    return 1;
  }
}

/**
 * The client package, loaded only by this command: Herald's production image installs no
 * workspace, and the other commands must run there without it.
 */
async function loadClient(): Promise<ClientModule> {
  try {
    return await import('@herald/client');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
    throw new Error('herald send needs the package @herald/client, which this installation does not have', { cause: error });
  }
}

/** A line of the file on its way: the notice to send, or why it cannot be. */
type Pending = { line: number; notice: BatchNotice; problem?: undefined } | { line: number; notice?: undefined; problem: string };

async function sendFile(
  herald: HeraldClient,
  client: ClientModule,
  file: string,
  batchSize: number,
  quiet: boolean,
  io: CliIo,
): Promise<number> {
  const size = (await stat(file)).size;
  const bar = progress(io.stderr, { quiet });
  const counts = { accepted: 0, replayed: 0, refused: 0 };
  let bytes = 0;
  let batch: Pending[] = [];

  /** Sends the batch and reports each of its lines in order; false when the request as a whole failed. */
  const flush = async (): Promise<boolean> => {
    const pending = batch;
    batch = [];
    const sendable = pending.filter((p): p is Extract<Pending, { notice: BatchNotice }> => p.notice !== undefined);
    let results: BatchItemResult[] = [];
    if (sendable.length > 0) {
      try {
        results = await herald.createNotices(sendable.map((p) => p.notice));
      } catch (error) {
        if (!(error instanceof client.HeraldApiError)) throw error;
        const lines = `lines ${sendable[0]!.line}–${sendable.at(-1)!.line}`;
        io.stderr.write(
          error.status === 0
            ? `herald: ${lines}: ${describeError(error)}; they may have been accepted all the same (herald notices list shows them)\n`
            : `herald: ${lines} were refused together: ${describeError(error)}\n`,
        );
        return false;
      }
    }
    const byLine = new Map(sendable.map((p, i) => [p.line, results[i]!]));
    const refusals: string[] = [];
    for (const p of pending) {
      const result = byLine.get(p.line);
      if (result === undefined) {
        counts.refused += 1;
        refusals.push(`line ${p.line}: ${p.problem}`);
      } else if (result.outcome === 'refused') {
        counts.refused += 1;
        refusals.push(`line ${p.line}: refused, ${result.status} ${result.error.code}: ${whyRefused(result.error)}`);
      } else {
        counts[result.outcome] += 1;
      }
    }
    await writeLines(io.stdout, refusals);
    const done = counts.accepted + counts.replayed + counts.refused;
    bar.update(size === 0 ? 1 : bytes / size, `${done} notices sent, ${counts.refused} refused`);
    return true;
  };

  let line = 0;
  let complete = true;
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  try {
    for await (const text of lines) {
      line += 1;
      bytes += Buffer.byteLength(text) + 1;
      if (text.trim() === '') continue;
      batch.push(parseLine(line, text));
      if (batch.length >= batchSize && !(complete = await flush())) break;
    }
    if (complete && batch.length > 0) complete = await flush();
  } finally {
    lines.close();
    bar.done();
  }
  const total = counts.accepted + counts.replayed + counts.refused;
  io.stderr.write(
    `${complete ? 'Sent' : 'Stopped after'} ${total} notices from ${file}: ${counts.accepted} accepted, ${counts.replayed} already accepted (replayed), ${counts.refused} refused.\n`,
  );
  return complete && counts.refused === 0 ? 0 : 1;
}

/** One line of the file as a notice, or why it is not one. */
function parseLine(line: number, text: string): Pending {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { line, problem: `not JSON (${(error as Error).message})` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { line, problem: 'not a JSON object' };
  return { line, notice: value as BatchNotice };
}

/** The error's message, and the fields at fault as the line has them (not as the batch named them). */
function whyRefused(error: { message: string; details?: unknown }): string {
  const fields = Array.isArray(error.details)
    ? error.details
        .filter((d): d is { path: string; message: string } => typeof d?.path === 'string' && typeof d?.message === 'string')
        .map((d) => `${d.path.replace(/^body\.(?:notices\.\d+\.?)?/, '') || '(the notice)'}: ${d.message}`)
    : [];
  return fields.length > 0 ? fields.join('; ') : error.message;
}

function describeError(error: HeraldApiError): string {
  return `${error.status === 0 ? '' : `${error.status} `}${error.code}: ${whyRefused(error)}`;
}
