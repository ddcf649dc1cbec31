import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ENTRY_TYPES } from '../../src/notice/entries.js';

const README = readFileSync(fileURLToPath(new URL('../../docs/API.md', import.meta.url)), 'utf8');

describe('the decision log vocabulary', () => {
  it('is the list of entry types the README gives, no more and no less', () => {
    const section = README.slice(README.indexOf('## The decision log'));
    const list = section.slice(section.indexOf('Types:'), section.indexOf('Normalized statuses:'));
    const documented = [...list.matchAll(/`([a-z]+\.[a-z_]+)`/g)].map(([, type]) => type);
    expect([...new Set(documented)].sort()).toEqual([...ENTRY_TYPES].sort());
  });
});
