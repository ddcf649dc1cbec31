/**
 * `node dist/bench/accept-ab.js <tree A> <tree B>`: two builds of Herald's web process side by
 * side, each a checkout with its own `dist` and `node_modules` (`git worktree add`, then `npm run
 * build`), both on the Redis at REDIS_URL (a `redis-server` of the run's own: its CPU time is read)
 * under prefixes of their own. `POST /v1/notices` under autocannon (50 connections, the accept
 * figure's body) goes to one, then the other, round after round, the side going first alternating,
 * so that the machine's changes of pace fall on both alike; per round and side: requests a second,
 * the web process's CPU time per answered request (/proc) and Redis's (`INFO cpu`). It prints the
 * medians and the median of B ÷ A's per-round CPU ratios: what a change to the accept path costs
 * or saves, to a few per cent where the accept figure's rounds, minutes apart, vary by a fifth.
 * Not a test and not part of `npm run bench`; the figures it printed for a change are in
 * docs/BENCHMARKS.md. Env: REDIS_URL, AB_ROUNDS (default 10), AB_ROUND_SECONDS (default 5).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { API_KEY, noticeBody } from './herald.js';
import { freePort, httpReady, NodeProcess, processCpuMs } from './processes.js';
import { deleteKeys, redisCpuMs } from './redis-stats.js';
import { median } from './stats.js';

const [treeA, treeB] = process.argv.slice(2);
if (!treeA || !treeB) throw new Error('usage: node dist/bench/accept-ab.js <tree A> <tree B>');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.AB_ROUNDS ?? 10);
const ROUND_SECONDS = Number(process.env.AB_ROUND_SECONDS ?? 5);
const redis = new Redis(redisUrl);

interface Side {
  label: 'A' | 'B';
  web: NodeProcess;
  url: string;
  prefix: string;
  rounds: { requestsPerSecond: number; webCpuUs: number; redisCpuUs: number }[];
}

async function start(label: Side['label'], tree: string): Promise<Side> {
  const port = await freePort();
  const prefix = `hab${label}${process.pid}`;
  const web = new NodeProcess(join(resolve(tree), 'dist/src/server.js'), {
    REDIS_URL: redisUrl,
    HERALD_PREFIX: prefix,
    HERALD_API_KEYS: API_KEY,
    HERALD_PROVIDERS: 'sandbox',
    // As the accept figure's Herald (bench/herald.ts): the same plan, and a limit out of reach.
    HERALD_MIN_POLL_INTERVAL_MS: '1000',
    HERALD_MAX_CHECKS_PER_NOTICE: '40',
    HERALD_RATE_LIMIT_PER_MINUTE: '1000000000',
    HERALD_ARCHIVE_URL: pathToFileURL(mkdtempSync(join(tmpdir(), 'herald-ab-archive-'))).href,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    PORT: String(port),
  }).start();
  const url = `http://127.0.0.1:${port}`;
  await httpReady(`${url}/readyz`, web);
  return { label, web, url, prefix, rounds: [] };
}

const body = JSON.stringify(noticeBody({ email: 'delivered@example.com', phone: '+12025550100', deadlineInSeconds: 3600 }));
const load = (side: Side, duration: number) =>
  autocannon({
    url: `${side.url}/v1/notices`,
    method: 'POST',
    body,
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    connections: 50,
    duration,
    timeout: 10,
  });

const sides = [await start('A', treeA), await start('B', treeB)];
try {
  for (const side of sides) await load(side, ROUND_SECONDS);
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      await new Promise((r) => setTimeout(r, 300));
      const [web0, redis0] = [processCpuMs(side.web.pid), await redisCpuMs(redis)];
      const result = await load(side, ROUND_SECONDS);
      const [web1, redis1] = [processCpuMs(side.web.pid), await redisCpuMs(redis)];
      const answered = result.requests.total;
      if (result.non2xx > 0 || result.errors > 0)
        throw new Error(`${side.label}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
      const row = {
        requestsPerSecond: result.requests.average,
        webCpuUs: ((web1 - web0) * 1000) / answered,
        redisCpuUs: ((redis1 - redis0) * 1000) / answered,
      };
      side.rounds.push(row);
      console.log(
        `round ${round + 1} ${side.label}: ${Math.round(row.requestsPerSecond)} req/s, web ${Math.round(row.webCpuUs)} µs, Redis ${Math.round(row.redisCpuUs)} µs per request`,
      );
    }
  }
  for (const side of sides) {
    const m = (pick: (r: Side['rounds'][number]) => number) => Math.round(median(side.rounds.map(pick)));
    console.log(
      `${side.label} (${side.label === 'A' ? treeA : treeB}): ${m((r) => r.requestsPerSecond)} req/s, web ${m((r) => r.webCpuUs)} µs, Redis ${m((r) => r.redisCpuUs)} µs per request (medians)`,
    );
  }
  const [a, b] = sides as [Side, Side];
  const ratios = (pick: (r: Side['rounds'][number]) => number) => median(a.rounds.map((r, i) => pick(b.rounds[i]!) / pick(r)));
  console.log(
    `B ÷ A, median of the rounds' ratios: web CPU ${ratios((r) => r.webCpuUs).toFixed(3)}, Redis CPU ${ratios((r) => r.redisCpuUs).toFixed(3)}, req/s ${ratios((r) => r.requestsPerSecond).toFixed(3)}`,
  );
} finally {
  await Promise.all(sides.map((side) => side.web.stop()));
  for (const side of sides) await deleteKeys(redis, side.prefix);
  redis.disconnect();
}
