/**
 * The client as a caller gets it: `npm run pack:client` makes a tarball, which installs alone into
 * an empty folder (nothing else is installed: it has no dependency) and type-checks there without
 * Node's types; a small ESM script run there with node talks to a real web process through a
 * proxy that fails on purpose. Each step is one run of the script, after the fault it meets is planned.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_API_KEY, testEnv, testPrefix } from '../helpers/env.js';
import { FaultProxy } from '../helpers/fault-proxy.js';
import { cleanUp, noticeBody } from '../helpers/herald.js';
import { ROOT } from '../helpers/imports.js';
import { WebProcess } from '../helpers/web-process.js';

const prefix = testPrefix('client-install');
const version = (JSON.parse(readFileSync(join(ROOT, 'packages', 'client', 'package.json'), 'utf8')) as { version: string }).version;
let web: WebProcess;
let proxy: FaultProxy;
let folder: string;

/** The caller's script: one step per run, its outcome as one JSON line. */
const SCRIPT = `
import { createHeraldClient, HeraldApiError } from '@herald/client';

const [step, body] = [process.argv[2], JSON.parse(process.argv[3] ?? '{}')];
const retries = [];
const onRetry = ({ attempt, delayMs, error }) => retries.push({ attempt, delayMs, status: error.status, code: error.code, retryAfterSeconds: error.retryAfterSeconds });
const options = { baseUrl: process.env.HERALD_URL, apiKey: process.env.HERALD_KEY, onRetry };
const resolved = import.meta.resolve('@herald/client');
let outcome;
if (step === 'create') {
  outcome = await createHeraldClient(options).createNotice(body);
} else if (step === 'abort') {
  const controller = new AbortController();
  // Told to come back in ten minutes, and allowed to wait that long: only the signal ends it.
  const herald = createHeraldClient({ ...options, retry: { maxDelayMs: 3_600_000 }, onRetry: (event) => { onRetry(event); controller.abort(); } });
  outcome = await herald.stats({}, { signal: controller.signal }).then(
    () => ({ resolved: true }),
    (error) => ({ name: error.name, code: error.code, status: error.status, attempts: error.attempts, isApiError: error instanceof HeraldApiError }),
  );
}
process.stdout.write(JSON.stringify({ resolved, outcome, retries }) + '\\n');
`;

/** A caller's TypeScript, compiled against the installed declarations alone. */
const CONSUMER = `
import { createHeraldClient, HeraldApiError, type CreateNoticeResult, type NoticeView } from '@herald/client';

const herald = createHeraldClient({ baseUrl: 'https://herald.example', apiKey: 'k' });
export async function send(): Promise<string> {
  const created: CreateNoticeResult = await herald.createNotice({ recipient: { id: 'r', email: 'r@example.com' }, category: 'c', content: { subject: 's' }, deadlineInSeconds: 60 });
  const view: NoticeView | undefined = created.replayed ? created.notice : undefined;
  for await (const notice of herald.notices({ state: 'sms_failed' }, { signal: AbortSignal.timeout(1000) })) return notice.id;
  try {
    await herald.cancelNotice(created.id);
  } catch (error) {
    if (error instanceof HeraldApiError) return error.code;
  }
  return view?.state ?? (created.replayed ? '' : created.plannedChecks[0]!);
}
`;

function run(command: string, args: string[], cwd: string) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
}

/** Runs one step of the script in the install folder; its JSON line. */
async function step(name: string, body?: unknown): Promise<{ resolved: string; outcome: any; retries: any[] }> {
  const child = spawn(process.execPath, ['check.mjs', name, JSON.stringify(body ?? {})], {
    cwd: folder,
    env: { PATH: process.env.PATH ?? '', HERALD_URL: proxy.url, HERALD_KEY: TEST_API_KEY },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  expect(stderr, name).toBe('');
  expect(code, name).toBe(0);
  return JSON.parse(stdout) as { resolved: string; outcome: any; retries: any[] };
}

const noticesOf = async (recipientId: string) =>
  ((await web.call('GET', `/v1/notices?recipientId=${recipientId}`)).json as { notices: { id: string }[] }).notices.map((n) => n.id);

beforeAll(async () => {
  web = await new WebProcess(testEnv(prefix)).start();
  proxy = await new FaultProxy(web.url).start();
  const packed = run('npm', ['run', '--silent', 'pack:client'], ROOT);
  expect(packed.code, packed.output).toBe(0);
  folder = mkdtempSync(join(tmpdir(), 'herald-client-install-'));
  const installed = run(
    'npm',
    ['install', '--offline', '--no-audit', '--no-fund', join(ROOT, 'packed', `herald-client-${version}.tgz`)],
    folder,
  );
  expect(installed.code, installed.output).toBe(0);
  writeFileSync(join(folder, 'check.mjs'), SCRIPT);
});
afterAll(async () => {
  await proxy?.close();
  await web?.stop('SIGTERM');
  await cleanUp(prefix);
  if (folder) rmSync(folder, { recursive: true, force: true });
});

describe('the packed client, installed alone', () => {
  it('installs nothing but itself: its build, manifest and README', () => {
    expect(readdirSync(join(folder, 'node_modules')).filter((name) => !name.startsWith('.'))).toEqual(['@herald']);
    expect(readdirSync(join(folder, 'node_modules', '@herald'))).toEqual(['client']);
    const files = readdirSync(join(folder, 'node_modules', '@herald', 'client')).sort();
    expect(files).toEqual(['README.md', 'dist', 'package.json']);
    const lock = JSON.parse(readFileSync(join(folder, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
    expect(Object.keys(lock.packages).sort()).toEqual(['', 'node_modules/@herald/client']);
  });

  it("type-checks a caller's TypeScript against its declarations alone, without Node's types", () => {
    writeFileSync(join(folder, 'consumer.ts'), CONSUMER);
    writeFileSync(
      join(folder, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          lib: ['ES2023', 'DOM'],
          types: [],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
        },
        files: ['consumer.ts'],
      }),
    );
    const tsc = run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], folder);
    expect(tsc.output).toBe('');
    expect(tsc.code).toBe(0);
  });

  it('creates a notice through a 503 with Retry-After: 1, waiting as asked, then sending the same key again', async () => {
    proxy.fail({
      kind: 'answer',
      status: 503,
      headers: { 'retry-after': '1' },
      body: '{"error":{"code":"unavailable","message":"Redis cannot be reached."}}',
    });
    const { resolved, outcome, retries } = await step('create', noticeBody({ recipient: { id: 'install-1', email: 'never@example.com' } }));
    // The package in the folder, not the repository's.
    expect(resolved.startsWith(`file://${folder}/node_modules/@herald/client/`)).toBe(true);
    expect(retries).toEqual([{ attempt: 1, delayMs: expect.any(Number), status: 503, code: 'unavailable', retryAfterSeconds: 1 }]);
    expect(retries[0].delayMs).toBeGreaterThanOrEqual(1000);
    expect(outcome).toMatchObject({ replayed: false, state: 'accepted', id: expect.stringMatching(/^ntc_/) });
    const posts = proxy.requests('POST', /^\/v1\/notices$/);
    expect(posts.map((p) => p.fault)).toEqual(['answer', 'forwarded']);
    expect(posts[1]!.idempotencyKey).toBe(posts[0]!.idempotencyKey);
    expect(await noticesOf('install-1')).toEqual([outcome.id]);
  });

  it('makes one notice when the answer to a create is lost and the create is sent again', async () => {
    proxy.fail({ kind: 'forward-then-reset' }, { method: 'POST' });
    const { outcome, retries } = await step('create', noticeBody({ recipient: { id: 'install-2', email: 'never@example.com' } }));
    expect(retries.map((r) => r.code)).toEqual(['network_error']);
    expect(outcome).toMatchObject({ replayed: true, notice: { recipientId: 'install-2' } });
    expect(await noticesOf('install-2')).toEqual([outcome.id]);
  });

  it('rejects with code aborted once the signal aborts, without waiting for the retry', async () => {
    proxy.fail(
      { kind: 'answer', status: 503, headers: { 'retry-after': '600' }, body: '{"error":{"code":"unavailable","message":"later"}}' },
      { path: /^\/v1\/stats/ },
    );
    const { outcome, retries } = await step('abort');
    expect(retries).toEqual([expect.objectContaining({ status: 503, retryAfterSeconds: 600, delayMs: expect.any(Number) })]);
    expect(outcome).toEqual({ name: 'HeraldApiError', code: 'aborted', status: 0, attempts: 1, isApiError: true });
    expect(proxy.requests('GET', /^\/v1\/stats/)).toHaveLength(1);
  });
});
