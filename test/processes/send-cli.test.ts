/**
 * `herald send` as an operator runs it: the compiled CLI in its own process, against a real web
 * process on real Redis, through the client package. A file of valid and invalid notices is sent
 * in batches, each refusal reported by its line; one test notice prints its ID.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_API_KEY, testEnv, testPrefix } from '../helpers/env.js';
import { cleanUp, noticeBody } from '../helpers/herald.js';
import { runCliProcess, WebProcess } from '../helpers/web-process.js';

const prefix = testPrefix('send');
let web: WebProcess;
let folder: string;
let env: Record<string, string>;

beforeAll(async () => {
  web = await new WebProcess(testEnv(prefix)).start();
  folder = mkdtempSync(join(tmpdir(), 'herald-send-'));
  env = { HERALD_URL: web.url, HERALD_KEY: TEST_API_KEY };
});
afterAll(async () => {
  await web?.stop('SIGTERM');
  await cleanUp(prefix);
  if (folder) rmSync(folder, { recursive: true, force: true });
});

const noticesOf = async (recipientId: string) =>
  ((await web.call('GET', `/v1/notices?recipientId=${recipientId}`)).json as { notices: { id: string; recipientId: string }[] }).notices;

describe('herald send --file', () => {
  it('sends every line in batches, reports each refused one by its line number and a summary, and exits 1', async () => {
    const line = (n: number, overrides: Record<string, unknown> = {}) =>
      JSON.stringify(noticeBody({ recipient: { id: 'send-file', email: `never+${n}@example.com` }, ...overrides }));
    const file = join(folder, 'notices.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ ...JSON.parse(line(1)), idempotencyKey: 'send-file-1' }),
        line(2, { recipient: { id: 'send-file', email: 'not an address' } }),
        '',
        '{"recipient": ',
        line(5),
        line(6, { deadlineInSeconds: undefined, deadline: '2001-01-01T00:00:00Z' }),
        // The first line again, with its key: already accepted, not made twice.
        JSON.stringify({ ...JSON.parse(line(1)), idempotencyKey: 'send-file-1' }),
        '[1, 2]',
        line(9),
      ].join('\n') + '\n',
    );
    const { code, stdout, stderr } = await runCliProcess(['send', '--file', file, '--batch-size', '3'], env);
    expect(stdout.split('\n').filter(Boolean)).toEqual([
      expect.stringMatching(/^line 2: refused, 400 validation_failed: recipient\.email: must match format "email"$/),
      expect.stringMatching(/^line 4: not JSON \(.+\)$/),
      'line 6: refused, 400 validation_failed: deadline: deadline must be in the future',
      'line 8: not a JSON object',
    ]);
    expect(stderr).toBe(`Sent 8 notices from ${file}: 3 accepted, 1 already accepted (replayed), 4 refused.\n`);
    expect(code).toBe(1);
    expect(await noticesOf('send-file')).toHaveLength(3);
  });

  it('exits 0 when every notice is accepted, and makes none twice when run again with the keys', async () => {
    const file = join(folder, 'keyed.ndjson');
    writeFileSync(
      file,
      [1, 2, 3]
        .map((n) =>
          JSON.stringify({
            ...noticeBody({ recipient: { id: 'send-keyed', email: `never+${n}@example.com` } }),
            idempotencyKey: `send-keyed-${n}`,
          }),
        )
        .join('\r\n'),
    );
    const first = await runCliProcess(['send', '--file', file, '--quiet'], env);
    expect(first).toEqual({
      code: 0,
      stdout: '',
      stderr: `Sent 3 notices from ${file}: 3 accepted, 0 already accepted (replayed), 0 refused.\n`,
    });
    const again = await runCliProcess(['send', '--file', file], env);
    expect(again).toEqual({
      code: 0,
      stdout: '',
      stderr: `Sent 3 notices from ${file}: 0 accepted, 3 already accepted (replayed), 0 refused.\n`,
    });
    expect(await noticesOf('send-keyed')).toHaveLength(3);
  });

  it('stops, exit 1, when Herald refuses the request as a whole (a wrong key)', async () => {
    const file = join(folder, 'one.ndjson');
    writeFileSync(file, `${JSON.stringify(noticeBody({ recipient: { id: 'send-refused', email: 'never@example.com' } }))}\n`);
    const { code, stdout, stderr } = await runCliProcess(['send', '--file', file], { ...env, HERALD_KEY: 'not-a-key-of-this-herald' });
    expect(stdout).toBe('');
    expect(stderr).toMatch(
      /^herald: lines 1–1 were refused together: 401 unauthorized: .+\nStopped after 0 notices from .+: 0 accepted, 0 already accepted \(replayed\), 0 refused\.\n$/,
    );
    expect(code).toBe(1);
    expect(await noticesOf('send-refused')).toEqual([]);
  });
});

describe('herald send --to-email', () => {
  it('sends one test notice and prints its ID', async () => {
    const { code, stdout, stderr } = await runCliProcess(
      ['send', '--to-email', 'delivered@example.com', '--to-phone', '+12025550100', '--deadline-in', '5m'],
      env,
    );
    expect(code).toBe(0);
    expect(stdout).toMatch(/^ntc_\w+\n$/);
    const id = stdout.trim();
    expect(stderr).toMatch(new RegExp(`^Accepted ${id}: deadline \\S+, \\d+ planned email checks\\.\\n$`));
    const view = (await web.call('GET', `/v1/notices/${id}`)).json as {
      recipientId: string;
      category: string;
      createdAt: string;
      deadline: string;
    };
    expect(view).toMatchObject({ recipientId: 'herald-send-test', category: 'test' });
    expect(Date.parse(view.deadline) - Date.parse(view.createdAt)).toBe(5 * 60_000);
  });

  it('says why a notice was refused, exit 1; a wrong command line or no key, exit 2', async () => {
    const refused = await runCliProcess(['send', '--to-email', 'not an address'], env);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(
      /^herald: the notice was not accepted: 400 validation_failed: recipient\.email: must match format "email"\n$/,
    );
    expect(refused.code).toBe(1);

    const noKey = await runCliProcess(['send', '--to-email', 'p@example.com'], { HERALD_URL: web.url });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/^herald: HERALD_KEY must be an API key/);
    for (const args of [
      ['send'],
      ['send', '--file', 'x.ndjson', '--to-email', 'p@example.com'],
      ['send', '--to-email', 'p@example.com', '--deadline-in', 'soon'],
    ]) {
      const wrong = await runCliProcess(args, env);
      expect(wrong.code, args.join(' ')).toBe(2);
      expect(wrong.stderr, args.join(' ')).toMatch(/^herald: .+\n\nherald send --file/);
    }
  });
});
