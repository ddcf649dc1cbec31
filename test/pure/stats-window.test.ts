import { describe, expect, it } from 'vitest';
import { statsWindow } from '../../src/notice/stats.js';

const at = (iso: string) => Date.parse(iso);
const window = (from: string, to: string) => {
  const w = statsWindow(at(from), at(to));
  return { from: new Date(w.from).toISOString(), to: new Date(w.to).toISOString() };
};

describe('the hours /v1/stats counts', () => {
  it('are every UTC hour that overlaps [from, to)', () => {
    expect(window('2026-12-01T10:20:00Z', '2026-12-01T13:05:00Z')).toEqual({
      from: '2026-12-01T10:00:00.000Z',
      to: '2026-12-01T14:00:00.000Z',
    });
  });
  it('end at `to` when it is on the hour: the hour that starts there is not counted', () => {
    expect(window('2026-12-01T10:00:00Z', '2026-12-01T12:00:00Z')).toEqual({
      from: '2026-12-01T10:00:00.000Z',
      to: '2026-12-01T12:00:00.000Z',
    });
  });
  it('are at least the hour that holds `from`, when from equals to', () => {
    expect(window('2026-12-01T10:00:00Z', '2026-12-01T10:00:00Z')).toEqual({
      from: '2026-12-01T10:00:00.000Z',
      to: '2026-12-01T11:00:00.000Z',
    });
  });
});
