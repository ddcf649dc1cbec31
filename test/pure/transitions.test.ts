import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { iso } from '../../src/clock.js';
import { STATES, TERMINAL_STATES } from '../../src/notice/states.js';
import { TRANSITIONS, transitionsMarkedBy, type Transition, type TransitionName } from '../../src/notice/transitions.js';
import { NoticeStore } from '../../src/store/notices.js';
import { plainRedis, testPrefix } from '../helpers/env.js';

const table = Object.entries(TRANSITIONS) as [TransitionName, Transition][];

describe('the transition table', () => {
  it('reaches every state, and leaves no terminal state by a move', () => {
    const reached = new Set(table.map(([, t]) => t.to).filter(Boolean));
    expect([...reached].sort()).toEqual([...STATES].sort());
    for (const [name, t] of table) {
      if (t.to === undefined || t.from === '*') continue;
      expect(
        t.from.filter((state) => TERMINAL_STATES.includes(state)),
        name,
      ).toEqual([]);
    }
  });

  it('names the entry that records every move, and the move a replay finds from it', () => {
    for (const [name, t] of table) {
      if (t.to === undefined) continue;
      expect(t.marks, name).toBeDefined();
      expect(transitionsMarkedBy(t.marks!, t.marks === 'notice.completed' ? t.to : undefined)).toContain(name);
    }
    expect(transitionsMarkedBy('fallback.decided')).toEqual(['decideFallback']);
    expect(transitionsMarkedBy('notice.completed', 'email_delivered').sort()).toEqual([
      'cancelSmsForLateDelivery',
      'confirmEmailDelivered',
    ]);
    expect(transitionsMarkedBy('email.observed')).toEqual([]);
  });

  it('is the table ARCHITECTURE.md shows, move for move', () => {
    const doc = readFileSync(fileURLToPath(new URL('../../ARCHITECTURE.md', import.meta.url)), 'utf8');
    const rows = doc.slice(doc.indexOf('| move | from | to |'), doc.indexOf('The chaos run'));
    const documented = [...rows.matchAll(/^\| ([^|]+) \|/gm)].flatMap(([, cell]) => [...cell!.matchAll(/`(\w+)`/g)].map(([, n]) => n));
    expect(documented.sort()).toEqual(table.map(([name]) => name).sort());
  });

  it('only moves, never records, from any state at all', () => {
    for (const [name, t] of table) if (t.from === '*') expect(t.to, name).toBeUndefined();
  });
});

describe('a step that asks for more than its transition allows', () => {
  const redis = plainRedis();
  afterAll(() => redis.quit());

  it('is refused before anything reaches Redis', async () => {
    const store = new NoticeStore(redis, testPrefix('tr'));
    await expect(
      store.transition('ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa', 1, iso(1), { name: 'decideFallback', onlyFrom: ['sms_sent'], entries: [] }),
    ).rejects.toThrow(/decideFallback does not start from sms_sent/);
  });
});
