import type { Writable } from 'node:stream';

export interface Progress {
  /** `fraction` of the work done (0–1, undefined when unknown), and a word on where it is. */
  update(fraction: number | undefined, detail: string): void;
  /** Ends the bar (a terminal gets its line back). */
  done(): void;
}

const BAR_WIDTH = 24;

/**
 * Progress of a long command on stderr, only once it has lasted a second: a bar rewritten in
 * place on a terminal (at most ten times a second), a plain line every few seconds otherwise
 * (a log file or a pipe gets no control characters).
 */
export function progress(stream: Writable & { isTTY?: boolean }, opts: { quiet?: boolean; clock?: () => number } = {}): Progress {
  const now = opts.clock ?? Date.now;
  const started = now();
  const tty = stream.isTTY === true;
  let last = Number.NEGATIVE_INFINITY;
  let shown = false;
  return {
    update(fraction, detail) {
      if (opts.quiet) return;
      const at = now();
      if (at - started < 1000 || at - last < (tty ? 100 : 5000)) return;
      last = at;
      shown = true;
      const share = fraction === undefined ? undefined : Math.min(1, Math.max(0, fraction));
      if (!tty) {
        stream.write(`${share === undefined ? '' : `${Math.round(share * 100)}% `}${detail}\n`);
        return;
      }
      const filled = share === undefined ? 0 : Math.round(share * BAR_WIDTH);
      const bar =
        share === undefined
          ? ''
          : `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.round(share * 100)).padStart(3)}% `;
      stream.write(`\r\x1b[2K${bar}${detail}`);
    },
    done() {
      if (shown && tty) stream.write('\n');
    },
  };
}
