/**
 * The provider comparison (`npm run compare`): the same scenarios against every provider of
 * `EMAIL_PROVIDERS` / `SMS_PROVIDERS`, each through its adapter and SDK against the sandbox, with
 * a real web process and a real worker process per provider (short deadlines). Providers are
 * driven by name only: HERALD_EMAIL_PROVIDER / HERALD_SMS_PROVIDER and the sandbox. Verdicts come from `judge`
 * (compare-scenarios.ts), computed from what each run left behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { TERMINAL_STATES } from '../src/notice/states.js';
import type { Sandbox, SandboxRequest } from '@herald/sandbox';
import { PRICES } from './compare-prices.js';
import { judge, SCENARIOS, type Entry, type Row, type RunFacts, type Scenario, type Verdict } from './compare-scenarios.js';

const API_KEY = 'compare-api-key-0123456789';

/**
 * The provider base-URL variables: every one points at the comparison's sandbox, so
 * that whichever provider is chosen talks to the emulators this process inspects.
 */
const PROVIDER_URL_VARIABLES = [
  'POSTMARK_API_URL',
  'TWILIO_API_URL',
  'SENDGRID_API_URL',
  'MAILGUN_API_URL',
  'INFRAI_API_URL',
  'AWS_ENDPOINT_URL',
  'AWS_ENDPOINT_URL_SESV2',
  'AWS_ENDPOINT_URL_SQS',
  'AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2',
];

/** The other channel's provider while one channel's provider is compared. */
const PARTNER = { email: 'postmark', sms: 'twilio' } as const;

export interface CompareOptions {
  /** The repository root: its `dist/src/server.js` and `dist/src/worker.js` are started. */
  root: string;
  redisUrl: string;
  sandbox: Sandbox;
  email: readonly string[];
  sms: readonly string[];
  scenarios?: readonly Scenario[];
  log?: (message: string) => void;
}

export interface ScenarioResult {
  scenario: Scenario;
  verdict: Verdict;
  /** Requests about this notice's address or number, by operation. */
  calls: Record<string, number>;
  /** Messages the emulators created for it on the compared channel. */
  messages: number;
}

export interface ProviderResult {
  provider: string;
  row: Row;
  /** Why it did not run (its web or worker did not start), when it did not. */
  skipped?: string;
  results: ScenarioResult[];
  /** Requests no notice can be credited with (feed reads), per notice of the run. */
  sharedCallsPerNotice: number;
}

/**
 * Rows run at once (COMPARE_PARALLEL, default 1): each has its own web and worker process, and
 * on a small machine two at once slow the emulators' answers past the provider timeout.
 */
const ROWS_AT_ONCE = Math.max(1, Number(process.env.COMPARE_PARALLEL ?? 1) || 1);
/**
 * Every notice checks its provider every second from its first second on, so that what a run
 * shows (a deferral, how soon a delivery is learned) depends on the provider, not on the plan.
 */
const POLICY = { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 1 };

/** Runs every scenario on every provider, a few providers at a time. */
export async function compare(opts: CompareOptions): Promise<ProviderResult[]> {
  const scenarios = opts.scenarios ?? SCENARIOS;
  const runId = randomBytes(3).toString('hex');
  const redis = new Redis(opts.redisUrl, { maxRetriesPerRequest: null });
  const rows: Array<[Row, string]> = [
    ...opts.email.map((p) => ['email', p] as [Row, string]),
    ...opts.sms.map((p) => ['sms', p] as [Row, string]),
  ];
  const out: ProviderResult[] = new Array(rows.length);
  let numbers = 0;
  let next = 0;

  async function runRow(row: Row, provider: string): Promise<ProviderResult> {
    const mine = scenarios.filter((s) => s.rows.includes(row));
    const prefix = `hc${runId}-${row}-${provider}`;
    const archiveDir = mkdtempSync(join(tmpdir(), 'herald-compare-'));
    try {
      const env = deploymentEnv(opts, prefix, archiveDir, row, provider);
      let deployment: Deployment;
      try {
        deployment = await Deployment.start(opts.root, env);
      } catch (error) {
        opts.log?.(`${provider} (${row}): ${(error as Error).message}`);
        return { provider, row, skipped: 'web or worker did not start in time', results: [], sharedCallsPerNotice: 0 };
      }
      const started = Date.now();
      try {
        opts.log?.(`${provider} (${row}): ${mine.length} scenarios`);
        const runs = await Promise.all(
          mine.map((scenario) => {
            const n = numbers++;
            return runScenario(opts.sandbox, deployment, row, provider, scenario, `${runId}${row[0]}${n}`, 200 + (n % 790));
          }),
        );
        // Requests about no one message in this provider's window (an event feed read by a sweep);
        // with COMPARE_PARALLEL above 1 another provider's may fall in too.
        const partners: readonly string[] = Object.values(PARTNER);
        const shared = opts.sandbox
          .requests()
          .filter((r) => r.at >= started && r.recipient === undefined && !partners.includes(r.provider));
        return {
          provider,
          row,
          results: runs.map(({ facts, calls }) => ({
            scenario: facts.scenario,
            verdict: judge(facts),
            calls,
            messages: row === 'email' ? facts.emails.length : facts.sms.length,
          })),
          sharedCallsPerNotice: shared.length / Math.max(1, runs.length),
        };
      } finally {
        await deployment.stop();
        await deleteKeys(redis, prefix);
      }
    } finally {
      rmSync(archiveDir, { recursive: true, force: true });
    }
  }

  try {
    await Promise.all(
      Array.from({ length: Math.min(ROWS_AT_ONCE, rows.length) }, async () => {
        while (next < rows.length) {
          const index = next++;
          const [row, provider] = rows[index]!;
          out[index] = await runRow(row, provider);
        }
      }),
    );
  } finally {
    redis.disconnect();
  }
  return out;
}

function deploymentEnv(opts: CompareOptions, prefix: string, archiveDir: string, row: Row, provider: string): Record<string, string> {
  const urls = Object.fromEntries(PROVIDER_URL_VARIABLES.map((name) => [name, opts.sandbox.url]));
  return {
    REDIS_URL: opts.redisUrl,
    HERALD_PREFIX: prefix,
    HERALD_API_KEYS: API_KEY,
    HERALD_PROVIDERS: 'sandbox',
    HERALD_EMAIL_PROVIDER: row === 'email' ? provider : PARTNER.email,
    HERALD_SMS_PROVIDER: row === 'sms' ? provider : PARTNER.sms,
    ...urls,
    HERALD_MIN_POLL_INTERVAL_MS: '200',
    HERALD_PROVIDER_TIMEOUT_MS: '3000',
    HERALD_RECONCILE_INTERVAL_MS: '300',
    HERALD_RECONCILE_GRACE_MS: '4000',
    HERALD_ARCHIVE_URL: pathToFileURL(archiveDir).href,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  };
}

async function runScenario(
  sandbox: Sandbox,
  deployment: Deployment,
  row: Row,
  provider: string,
  scenario: Scenario,
  tag: string,
  areaCode: number,
): Promise<{ facts: RunFacts; calls: Record<string, number> }> {
  const email = `${scenario.email(row)}+c${tag}@example.com`;
  const phone = `+1${areaCode}55501${scenario.phoneSuffix(row)}`;
  const faultSpec = scenario.fault?.(row);
  const fault = faultSpec
    ? sandbox.injectFault({
        operation: faultSpec.role,
        mode: faultSpec.mode,
        match: faultSpec.role === 'email.send' ? email : phone,
        ...(faultSpec.retryAfterSeconds !== undefined ? { retryAfterSeconds: faultSpec.retryAfterSeconds } : {}),
        ...(faultSpec.omitRetryAfter ? { omitRetryAfter: true } : {}),
      })
    : undefined;
  const createdAt = Date.now();
  const created = await deployment.call('POST', '/v1/notices', {
    recipient: { id: `compare-${tag}`, email, phone },
    category: 'terms_change',
    content: { subject: 'Terms update', text: 'Our terms change on Monday.', sms: `Terms change Monday (${provider}).` },
    deadlineInSeconds: scenario.deadlineSeconds(row),
    policy: POLICY,
  });
  if (created.status !== 202)
    throw new Error(`${provider} ${scenario.key}: create answered ${created.status}: ${JSON.stringify(created.body)}`);
  const id = created.body.id as string;
  const deadline = Date.parse(created.body.deadline as string);
  const expected = scenario.expect(row);
  const settled = new Set<string>([...expected.states, ...TERMINAL_STATES]);
  // A run ends at a state it may end in, or some seconds after the deadline (a send left in doubt).
  const giveUpAt = deadline + 20_000;
  let view = (await deployment.call('GET', `/v1/notices/${id}`)).body;
  while (!settled.has(view.state) && Date.now() < giveUpAt) {
    await sleep(200);
    view = (await deployment.call('GET', `/v1/notices/${id}`)).body;
  }
  // Late observations and trailing calls land before the facts are read.
  await sleep(300);
  view = (await deployment.call('GET', `/v1/notices/${id}`)).body;
  const events = (await deployment.call('GET', `/v1/notices/${id}/events`)).body.events as Entry[];
  const suppression = await deployment.call('GET', `/v1/suppressions/sms/${encodeURIComponent(phone)}`);
  const mine = (r: SandboxRequest) => r.recipient !== undefined && (r.recipient.toLowerCase().includes(email) || r.recipient === phone);
  const channelRequests = sandbox
    .requests()
    .filter((r) => mine(r) && (row === 'email' ? r.recipient!.includes('@') : r.recipient === phone));
  const calls: Record<string, number> = {};
  for (const r of channelRequests) calls[r.operation] = (calls[r.operation] ?? 0) + 1;
  const facts: RunFacts = {
    row,
    scenario,
    email,
    phone,
    createdAt,
    deadline,
    state: view.state,
    fallback: view.fallback ?? null,
    events,
    emails: sandbox.emails().filter((m) => m.to.toLowerCase().includes(email)),
    sms: sandbox.sms().filter((m) => m.to === phone),
    requests: sandbox.requests().filter(mine),
    faultApplied: fault ? !sandbox.faults().some((f) => f.id === fault.id) : undefined,
    smsSuppressed: suppression.status === 200,
  };
  return { facts, calls };
}

/** How long a process may take to start (a loaded machine is slow to load the code). */
const START_TIMEOUT_MS = 90_000;
/** Every child started, so that none outlives this process whatever happens. */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** A web process and a worker process of one provider's run. */
class Deployment {
  private constructor(
    private readonly url: string,
    private readonly processes: ChildProcess[],
  ) {}

  static async start(root: string, env: Record<string, string>): Promise<Deployment> {
    const port = await freePort();
    const web = startNode(root, 'dist/src/server.js', { ...env, PORT: String(port), LOG_LEVEL: 'warn' });
    const worker = startNode(root, 'dist/src/worker.js', env);
    const deployment = new Deployment(`http://127.0.0.1:${port}`, [web.child, worker.child]);
    try {
      await until(
        async () => (await fetch(`${deployment.url}/readyz`).catch(() => undefined))?.status === 200,
        START_TIMEOUT_MS,
        'the web process',
        web,
      );
      await until(async () => worker.output().includes('herald worker running'), START_TIMEOUT_MS, 'the worker process', worker);
    } catch (error) {
      await deployment.stop();
      throw error;
    }
    return deployment;
  }

  async call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const response = await fetch(this.url + path, {
      method,
      headers: { authorization: `Bearer ${API_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : JSON.parse(text) };
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.processes.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        child.kill('SIGTERM');
        const forced = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(forced);
      }),
    );
  }
}

function startNode(root: string, script: string, env: Record<string, string>): { child: ChildProcess; output(): string } {
  const child = spawn(process.execPath, [script], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let output = '';
  const keep = (d: Buffer) => (output = (output + d.toString()).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { child, output: () => output };
}

async function until(
  probe: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
  proc: { child: ChildProcess; output(): string },
): Promise<void> {
  const giveUp = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (proc.child.exitCode !== null) throw new Error(`${what} exited at start:\n${proc.output()}`);
    if (Date.now() > giveUp) throw new Error(`timed out waiting for ${what}:\n${proc.output()}`);
    await sleep(100);
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The comparison as Markdown: one summary row per provider, then the scenario matrix and the prices. */
export function report(results: readonly ProviderResult[], meta: { seconds: number; date: string; commit?: string }): string {
  const lines: string[] = [];
  lines.push(
    '| Provider | Channel | Outcomes correct | Learned of delivery after | Provider calls per delivered notice | Est. cost per delivered notice (USD) | Send in doubt | What it could not tell Herald |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  );
  for (const p of results) {
    if (p.skipped) {
      lines.push(`| ${p.provider} | ${p.row} | ${p.skipped} | — | — | — | — | — |`);
      continue;
    }
    const correct = p.results.filter((r) => r.verdict.correct);
    const wrong = p.results.filter((r) => !r.verdict.correct).map((r) => r.scenario.title);
    const deliveredKey = p.row === 'email' ? 'delivered' : 'never';
    const delivered = p.results.find((r) => r.scenario.key === deliveredKey);
    const learned = delivered?.verdict.learnedAfterMs;
    const calls = delivered ? Object.values(delivered.calls).reduce((a, b) => a + b, 0) + p.sharedCallsPerNotice : undefined;
    const price = PRICES[p.provider];
    const cost =
      delivered && calls !== undefined && price
        ? price.perMessage === null
          ? 'no public price'
          : (delivered.messages * price.perMessage + Math.max(0, calls - delivered.messages) * price.perCall).toFixed(5)
        : '—';
    const doubt = p.results.find((r) => r.scenario.key === 'in_doubt');
    const doubtText = !doubt ? '—' : doubt.verdict.resolved ? 'resolved (found, no second message)' : 'not resolved: left to the deadline';
    const cannot = [...new Set(p.results.flatMap((r) => r.verdict.cannotTell))];
    const callText =
      calls === undefined
        ? '—'
        : `${fmt(calls)} (${Object.entries(delivered!.calls)
            .map(([op, n]) => `${op} ×${n}`)
            .join(', ')}${p.sharedCallsPerNotice > 0 ? `, +${fmt(p.sharedCallsPerNotice)} shared` : ''})`;
    lines.push(
      `| ${p.provider} | ${p.row} | ${correct.length}/${p.results.length}${wrong.length ? ` (wrong: ${wrong.join('; ')})` : ''} | ${learned === undefined ? 'never' : `${(learned / 1000).toFixed(1)} s`} | ${callText} | ${cost} | ${doubtText} | ${cannot.length ? cannot.join(', ') : 'nothing these scenarios ask'} |`,
    );
  }

  const ran = results.filter((p) => !p.skipped);
  const keys = [...new Set(ran.flatMap((p) => p.results.map((r) => r.scenario.key)))];
  if (ran.length > 0) {
    lines.push(
      '',
      `| Scenario | ${ran.map((p) => `${p.provider} (${p.row})`).join(' | ')} |`,
      `| --- | ${ran.map(() => '---').join(' | ')} |`,
    );
    for (const key of keys) {
      const title = ran.flatMap((p) => p.results).find((r) => r.scenario.key === key)!.scenario.title;
      const cells = ran.map((p) => {
        const r = p.results.find((x) => x.scenario.key === key);
        if (!r) return 'n/a';
        return r.verdict.correct ? 'correct' : `**wrong**: ${r.verdict.notes.join('; ')}`;
      });
      lines.push(`| ${title} | ${cells.join(' | ')} |`);
    }
  }

  lines.push('', 'Prices used (estimates; plans, tiers and carrier fees change them):', '');
  for (const provider of new Set(results.map((p) => p.provider))) {
    const price = PRICES[provider];
    lines.push(`- ${provider}: ${price ? price.source : 'no price recorded'}`);
  }
  lines.push(
    '',
    `Run ${meta.date}, ${meta.seconds.toFixed(0)} s${meta.commit ? `, commit ${meta.commit}` : ''}. ` +
      '"Learned of delivery after": from the emulator\'s delivery (email; for SMS providers the fallback SMS) to the observation that recorded it. ' +
      'Calls count the requests about the notice\'s address (email rows) or number (SMS rows); "shared" are requests about no one message (event-feed reads), divided among the run\'s notices.',
  );
  return lines.join('\n');
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));
