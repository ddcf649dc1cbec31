import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { progress } from '../../src/progress.js';

function sink(isTTY: boolean) {
  let text = '';
  const stream = Object.assign(
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        text += chunk.toString();
        done();
      },
    }),
    { isTTY },
  );
  return { stream, text: () => text };
}

describe('progress of a long command', () => {
  it('draws a bar rewritten in place on a terminal, once the command has lasted a second', () => {
    let now = 0;
    const out = sink(true);
    const bar = progress(out.stream, { clock: () => now });
    bar.update(0.1, 'starting');
    expect(out.text()).toBe('');
    now = 1_500;
    bar.update(0.5, '120 entries read');
    now = 1_550;
    bar.update(0.6, 'too soon to redraw');
    now = 1_700;
    bar.update(1, '240 entries read');
    bar.done();
    expect(out.text()).toBe(
      `\r\x1b[2K[############------------]  50% 120 entries read\r\x1b[2K[########################] 100% 240 entries read\n`,
    );
  });

  it('writes plain lines every few seconds when stderr is not a terminal', () => {
    let now = 0;
    const out = sink(false);
    const bar = progress(out.stream, { clock: () => now });
    for (now = 1_000; now <= 12_000; now += 500) bar.update(now / 12_000, `at ${now}`);
    bar.done();
    expect(out.text()).toBe('8% at 1000\n50% at 6000\n92% at 11000\n');
  });

  it('says nothing when quiet', () => {
    const out = sink(true);
    const bar = progress(out.stream, { quiet: true, clock: () => 5_000 });
    bar.update(0.5, 'x');
    bar.done();
    expect(out.text()).toBe('');
  });
});
