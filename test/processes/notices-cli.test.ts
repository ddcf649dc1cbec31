import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep, testPrefix } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';
import { runHerald } from '../helpers/archive.js';

describe('herald notices list', () => {
  let stack: Stack;
  let oldest: string;
  let canceled: string;
  let newest: string;
  const cli = (args: string[]) => runHerald(['notices', 'list', ...args], stack.env);
  const idsOf = (stdout: string) =>
    stdout
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('  ')[0]);

  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('notices-cli'), inProcessWorker: false });
    oldest = await stack.createNotice(noticeBody({ recipient: { id: 'r-a', email: 'never@example.com' }, category: 'welcome' }));
    // Apart by a few ms: notices of the same millisecond are ordered by their random part.
    await sleep(5);
    canceled = await stack.createNotice(noticeBody({ recipient: { id: 'r-b', email: 'never@example.com' } }));
    await sleep(5);
    newest = await stack.createNotice(noticeBody({ recipient: { id: 'r-a', email: 'never@example.com' } }));
    expect((await stack.web.call('POST', `/v1/notices/${canceled}/cancel`)).statusCode).toBe(200);
  });
  afterAll(async () => stack?.close());

  it('prints one notice per line, ID first, newest first', async () => {
    const { code, stdout } = await cli([]);
    expect(code).toBe(0);
    expect(idsOf(stdout)).toEqual([newest, canceled, oldest]);
    const [id, state, category, recipient, created, deadline, reason] = stdout.split('\n')[1]!.split('  ');
    expect({ id, state, category, recipient, reason }).toEqual({
      id: canceled,
      state: 'canceled',
      category: 'terms_change',
      recipient: 'r-b',
      reason: '-',
    });
    expect(Date.parse(deadline!) - Date.parse(created!)).toBe(600_000);
  });

  it('takes the filters of the admin page as flags', async () => {
    expect(idsOf((await cli(['--state', 'canceled'])).stdout)).toEqual([canceled]);
    expect(idsOf((await cli(['--recipient', 'r-a'])).stdout)).toEqual([newest, oldest]);
    expect(idsOf((await cli(['--category', 'welcome'])).stdout)).toEqual([oldest]);
    expect(idsOf((await cli(['--from', '1h'])).stdout)).toHaveLength(3);
    expect(idsOf((await cli(['--to', '1h'])).stdout)).toEqual([]);
    expect(idsOf((await cli(['--view', 'in_doubt'])).stdout)).toEqual([]);
    expect(idsOf((await cli(['--id', oldest])).stdout)).toEqual([oldest]);
  });

  it('writes JSON lines with --json', async () => {
    const { stdout } = await cli(['--recipient', 'r-a', '--json']);
    const rows = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(rows.map((r) => [r.id, r.state, r.recipientId, r.retired])).toEqual([
      [newest, 'accepted', 'r-a', false],
      [oldest, 'accepted', 'r-a', false],
    ]);
  });

  it('pages: the command for the next page goes to stderr', async () => {
    const first = await cli(['--limit', '2']);
    expect(idsOf(first.stdout)).toEqual([newest, canceled]);
    const next = /More may match: herald notices list --limit 2 --cursor (\S+)/.exec(first.stderr)?.[1];
    expect(next).toBeDefined();
    const second = await cli(['--limit', '2', '--cursor', next!]);
    expect(idsOf(second.stdout)).toEqual([oldest]);
    expect(second.stderr).not.toContain('More may match');
  });

  it('refuses bad flags with exit code 2, naming the flag', async () => {
    const bad = await cli(['--view', 'everything']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('view: one of late, in_doubt');
    expect((await cli(['--from', 'yesterday'])).code).toBe(2);
    expect((await runHerald(['notices', 'show'], stack.env)).code).toBe(2);
  });
});
