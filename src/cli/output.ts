/** How the commands write: lines that wait for a slow reader, and progress on stderr. */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { ExportProgress } from '../archive/export.js';
import { iso } from '../clock.js';
import { progress } from '../progress.js';
import type { CliIo } from './command.js';

/** Writes each line, waiting for the stream to drain when it asks to. */
export async function writeLines(out: Writable, lines: string[]): Promise<void> {
  for (const line of lines) {
    if (!out.write(`${line}\n`)) await once(out, 'drain');
  }
}

/** Progress of a read through [from, to) of the archive: how far through the period it is. */
export function progressWriter(io: CliIo, quiet: boolean, from: number, to: number): (progress: ExportProgress | undefined) => void {
  const bar = progress(io.stderr, { quiet });
  return (at) => {
    if (at === undefined) return bar.done();
    bar.update((at.position - from) / (to - from), `${at.entries} entries, ${at.objects} objects read, at ${iso(at.position)}`);
  };
}

/** Passes entries through, telling `onEntry` of each (and how many so far). */
export async function* withProgress<T>(entries: AsyncIterable<T>, onEntry: (entry: T, read: number) => void): AsyncIterable<T> {
  let read = 0;
  for await (const entry of entries) {
    read += 1;
    onEntry(entry, read);
    yield entry;
  }
}
