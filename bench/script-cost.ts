/**
 * `node dist/bench/script-cost.js`: what Herald's own scripts cost Redis per call, each kind of
 * call measured alone on a Redis no other client uses (REDIS_URL; a private `redis-server`, since
 * other clients would be counted too). For each kind, many calls on fresh notices, pipelined 50
 * at a time: the Redis server's CPU time (`INFO cpu`) and the script's own time
 * (`cmdstat_evalsha` usec, which includes the commands the script calls) per call. The floor is
 * an empty script with the transition's keys and arguments: what any script call costs before
 * it does anything. Not a test and not part of `npm run bench`; the figures it printed for a
 * change are in docs/BENCHMARKS.md. Then BullMQ's own operations on jobs shaped as Herald's (a
 * job ID from the notice, `{ noticeId }` as data, Herald's worker options), measured the same way:
 * what a notice's jobs cost whatever Herald's steps do, the floor under its job topology.
 * Env: REDIS_URL, SCRIPT_COST_CALLS (default 4000).
 */
import { randomBytes } from 'node:crypto';
import { DelayedError, Queue, Worker, type Job, type WorkerOptions } from 'bullmq';
import { Redis } from 'ioredis';
import { iso } from '../src/clock.js';
import type { LogEntry } from '../src/notice/entries.js';
import { newNoticeId } from '../src/notice/ids.js';
import { NoticeStore, type NoticeFields, type TransitionSpec } from '../src/store/notices.js';
import { LogMirrorStore, type MirrorBatch } from '../src/store/log-mirror.js';
import { decideAtDeadline } from './floor-steps.js';
import { commandCounts, deleteKeys, redisCpuMs } from './redis-stats.js';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CALLS = Number(process.env.SCRIPT_COST_CALLS ?? 4000);
const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
const prefix = `hsc${randomBytes(2).toString('hex')}`;
// As the web and the worker make it: a completion brings the content's expiry back to its TTL.
const store = new NoticeStore(redis, prefix, { contentTtlMs: 7 * 86_400_000 });
redis.defineCommand('emptyScript', { numberOfKeys: 8, lua: 'return { 1, ARGV[5] }' });

async function evalshaUsec(): Promise<{ calls: number; usec: number }> {
  const info = await redis.info('commandstats');
  const match = /^cmdstat_evalsha:calls=(\d+),usec=(\d+)/m.exec(info);
  return { calls: Number(match?.[1] ?? 0), usec: Number(match?.[2] ?? 0) };
}

/** Runs `call` for each of `ids`, 50 at a time, and reads what it cost Redis. */
async function measure(name: string, ids: string[], call: (id: string, i: number) => Promise<unknown>) {
  await redis.call('SCRIPT', 'FLUSH');
  // One call first, so that the script's load (EVAL once per connection) is not counted.
  await call(ids[0]!, 0);
  const cpu0 = await redisCpuMs(redis);
  const script0 = await evalshaUsec();
  const counts0 = await commandCounts(redis);
  for (let i = 1; i < ids.length; i += 50) await Promise.all(ids.slice(i, i + 50).map((id, k) => call(id, i + k)));
  const cpu1 = await redisCpuMs(redis);
  const script1 = await evalshaUsec();
  const counts1 = await commandCounts(redis);
  const n = ids.length - 1;
  let commands = 0;
  for (const [command, calls] of counts1) if (command !== 'info') commands += calls - (counts0.get(command) ?? 0);
  const row = {
    name,
    cpuUsPerCall: Math.round(((cpu1 - cpu0) * 1000 * 10) / n) / 10,
    scriptUsPerCall: Math.round(((script1.usec - script0.usec) * 10) / (script1.calls - script0.calls)) / 10,
    commandsPerCall: Math.round((commands / n) * 10) / 10,
  };
  console.log(
    `${row.name.padEnd(44)} ${String(row.cpuUsPerCall).padStart(6)} µs Redis CPU  ${String(row.scriptUsPerCall).padStart(6)} µs in the script  ${row.commandsPerCall} commands`,
  );
  return row;
}

const created = Date.now();
const cost = (total: number) => ({ currency: 'USD', total, byChannel: { email: total, sms: 0 } });
const fields = (): NoticeFields => ({
  state: 'accepted',
  category: 'terms_change',
  recipientId: 'bench-player',
  email: 'someone@example.com',
  phone: '+12025550100',
  createdAt: created,
  deadline: created + 8000,
  policyVersion: 0,
  emailPolicy: 'allowed',
  providerTimeoutMs: 5000,
  pollFirstMs: 2000,
  pollIntervalMs: 1500,
});
const acceptedEntries = (): LogEntry[] => [
  {
    type: 'notice.accepted',
    category: 'terms_change',
    recipientId: 'bench-player',
    policyVersion: 0,
    contentSha256: 'a'.repeat(64),
    deadline: iso(created + 8000),
    contentExpiresAt: iso(created + 7 * 86_400_000),
    providerTimeoutMs: 5000,
    pollPlan: [2000, 3500, 5000, 6500, 8000].map((ms) => iso(created + ms)),
    firstCheckAfterMs: 2000,
    minCheckIntervalMs: 1500,
    pollFloorMs: 1000,
    expectedProviderCalls: { email: 6 },
    expectedCost: { email: cost(0.0012), smsIfFallback: cost(0.0079) },
    hasPhone: true,
  } as LogEntry,
  { type: 'policy.checked', channel: 'email', outcome: 'allowed', policyVersion: 0, rulesVersion: '0' } as LogEntry,
];

const newIds = (count: number) => Array.from({ length: count }, (_, i) => newNoticeId(i % 16, created));
const createOne = (id: string) =>
  store.create({
    id,
    createdAt: created,
    fields: fields(),
    content: { subject: 'Terms update', text: 'Our terms change on Monday.', sms: 'Terms change Monday.' },
    entries: acceptedEntries(),
    at: iso(created),
    due: created,
    contentTtlMs: 7 * 86_400_000,
  });

const now = () => Date.now();
const step = (id: string, spec: TransitionSpec) => store.transition(id, now(), iso(now()), spec);
const observed = (i: number): LogEntry =>
  ({
    type: 'email.observed',
    attemptId: `att_${i}`,
    providerStatus: 'Sent',
    status: 'pending',
    observedAt: iso(now()),
    plannedAt: iso(created + 2000),
    nextCheckAt: iso(created + 3500),
    deadline: iso(created + 8000),
    source: 'poll',
  }) as LogEntry;

try {
  const rows = [];
  const ids = newIds(CALLS);
  rows.push(await measure('createNotice', ids, createOne));
  rows.push(
    await measure("empty script (the transition's keys and arguments)", ids, (id) => {
      const k = store.keys.noticeKeysFor(id);
      return (redis as unknown as { emptyScript(...args: (string | number)[]): Promise<unknown> }).emptyScript(
        k.notice,
        k.events,
        k.log,
        k.due,
        k.metrics,
        k.stats,
        k.content,
        k.contentExpiry,
        id,
        now(),
        iso(now()),
        'email_sent',
        '',
        '{}',
        '{}',
        '',
        '[]',
        '[]',
        '',
        '[]',
      );
    }),
  );
  rows.push(await measure('transition: annotate, nothing to write', ids, (id) => step(id, { name: 'annotate', entries: [] })));
  rows.push(
    await measure('transition: refused (state guard)', ids, (id) =>
      step(id, {
        name: 'recordEmailAccepted',
        set: { emailStatus: 'x' },
        entries: [{ type: 'email.accepted', attemptId: 'a', providerMessageId: 'm' } as LogEntry],
      }),
    ),
  );
  rows.push(
    await measure('transition: startEmailAttempt', ids, (id, i) =>
      step(id, {
        name: 'startEmailAttempt',
        eq: { emailAttemptId: '' },
        set: { emailAttemptId: `att_${i}`, emailAttempts: 1, emailAttemptStartedAt: now(), emailAttemptSettled: 0, emailAttemptInDoubt: 0 },
        entries: [{ type: 'email.requested', attemptId: `att_${i}`, idempotencyKey: `${id}-email`, provider: 'postmark' } as LogEntry],
        due: now() + 10_000,
      }),
    ),
  );
  rows.push(
    await measure('transition: recordEmailAccepted', ids, (id, i) =>
      step(id, {
        name: 'recordEmailAccepted',
        eq: { emailAttemptId: `att_${i}` },
        set: { emailProviderMessageId: `msg-${i}`, emailAttemptSettled: 1, emailNextCheckAt: created + 2000 },
        entries: [{ type: 'email.accepted', attemptId: `att_${i}`, providerMessageId: `msg-${i}` } as LogEntry],
        due: created + 2000,
      }),
    ),
  );
  rows.push(
    await measure('transition: observeEmail (pending, next check)', ids, (id, i) =>
      step(id, {
        name: 'observeEmail',
        onlyFrom: ['email_sent'],
        set: {
          emailStatus: 'pending',
          emailProviderStatus: 'Sent',
          emailLastObservedAt: now(),
          emailChecksDone: 1,
          emailNextCheckAt: created + 3500,
        },
        entries: [observed(i)],
        due: created + 3500,
      }),
    ),
  );
  rows.push(
    await measure('transition: confirmEmailDelivered', ids, (id, i) =>
      step(id, {
        name: 'confirmEmailDelivered',
        onlyFrom: ['email_sent'],
        set: { emailStatus: 'delivered', emailProviderStatus: 'Delivered', emailLastObservedAt: now(), emailChecksDone: 2 },
        unset: ['emailNextCheckAt'],
        entries: [
          { ...observed(i), status: 'delivered', providerStatus: 'Delivered', nextCheckAt: null } as LogEntry,
          { type: 'notice.completed', state: 'email_delivered', cost: cost(0.0012), checks: { email: 2, sms: 0 } } as LogEntry,
        ],
        due: 'remove',
      }),
    ),
  );
  // The deadline's read and the fallback it leaves, one transition, on notices whose email was sent.
  const fallbackIds = newIds(Math.min(CALLS, 1500));
  for (const id of fallbackIds) {
    await createOne(id);
    await step(id, {
      name: 'startEmailAttempt',
      set: { emailAttemptId: 'att_f' },
      entries: [{ type: 'email.requested', attemptId: 'att_f', idempotencyKey: `${id}-email`, provider: 'postmark' } as LogEntry],
    });
    await step(id, {
      name: 'recordEmailAccepted',
      set: { emailProviderMessageId: `m-${id}` },
      entries: [{ type: 'email.accepted', attemptId: 'att_f', providerMessageId: `m-${id}` } as LogEntry],
    });
  }
  // Their deadline (8 s after the run began) must have passed, or the transition would be refused.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, created + 8000 - Date.now())));
  rows.push(
    await measure("transition: decideFallback with the deadline's read", fallbackIds, (id, i) =>
      step(id, decideAtDeadline({ id, attempt: `att_${i}`, deadline: created + 8000, now: now(), plannedAt: created + 8000, checks: 5 })),
    ),
  );
  // The log mirror's Redis side, on the log the calls above wrote (7 entries per notice, spread
  // over the 16 shards), read in batches of MIRROR_BATCH entries: the sweeps of a busy worker
  // read a few seconds' entries of a shard at a time.
  const mirror = new LogMirrorStore(redis, store.keys);
  const shards = store.keys.allShards();
  const batchSize = Number(process.env.MIRROR_BATCH ?? 14);
  const perShard = Math.floor((CALLS * 7) / 16 / batchSize) - 2;
  const batches: MirrorBatch[] = [];
  const reads = Array.from({ length: perShard * 16 }, (_, i) => String(shards[i % 16]));
  rows.push(
    await measure(`mirror: next batch of ${batchSize} entries`, reads, async (shard) => {
      const batch = await mirror.next(Number(shard), 'bench', batchSize, 60_000, now());
      if (batch) batches.push(batch);
    }),
  );
  rows.push(
    await measure(
      `mirror: acknowledge a batch of ${batchSize}`,
      batches.map((_, i) => String(i)),
      (i) => mirror.ack(batches[Number(i)]!, 'd'.repeat(64)),
    ),
  );
  rows.push(
    await measure(
      'mirror: next batch, none new',
      Array.from({ length: 2000 }, (_, i) => String(shards[i % 16])),
      async (shard) => {
        // Read what is left first, so that every call after it finds nothing new.
        const left = await mirror.next(Number(shard), 'bench', 100_000, 60_000, now());
        if (left) await mirror.ack(left, 'd'.repeat(64));
      },
    ).then(() =>
      measure(
        'mirror: next batch, none new',
        Array.from({ length: 2000 }, (_, i) => String(shards[i % 16])),
        (shard) => mirror.next(Number(shard), 'bench', batchSize, 60_000, now()),
      ),
    ),
  );
  rows.push(
    await measure(
      'mirror: trim a shard',
      Array.from({ length: 2000 }, (_, i) => String(shards[i % 16])),
      (shard) => mirror.trim(Number(shard), now() - 600_000, 60_000),
    ),
  );
  rows.push(...(await bullmqCosts(ids)));
  printFloor(rows);
  console.log(JSON.stringify(rows));
} finally {
  await deleteKeys(redis, prefix);
  await redis.quit();
}

/**
 * BullMQ's operations on notice-shaped jobs: adding one (waiting, and delayed as the deadline and
 * check jobs are), removing a delayed one (a deadline job of a notice decided early), a worker
 * running one (fetch, run, finish: a step's job), and one moved back to delayed and run again (a
 * planned check after the first). The last two are measured over a worker draining the queue,
 * from the first job to the last, net of nothing: the worker's idle polls are in them, as in
 * Herald's runs.
 */
async function bullmqCosts(ids: string[]) {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queuePrefix = `${prefix}:{q}`;
  const queue = new Queue('cost', { connection, prefix: queuePrefix, streams: { events: { maxLen: 1000 } } });
  const rows = [];
  const keep = { removeOnComplete: { count: 1000 }, removeOnFail: { count: 5000 } };
  try {
    rows.push(await measure('BullMQ: add a job', ids, (id) => queue.add('email-send', { noticeId: id }, { jobId: `${id}-email-send` })));
    rows.push(
      await measure('BullMQ: add a delayed job', ids, (id) =>
        queue.add('deadline', { noticeId: id }, { jobId: `${id}-deadline`, delay: 3_600_000 }),
      ),
    );
    rows.push(await measure('BullMQ: remove a delayed job', ids, (id) => queue.remove(`${id}-deadline`)));
    const drain = async (
      name: string,
      processor: (job: Job, token?: string) => Promise<void>,
      jobs: number,
      finished: Pick<WorkerOptions, 'removeOnComplete'> = keep,
      // Leaves the finished jobs in the queue, for the next drain to start with a full completed set.
      leave = false,
    ) => {
      await queue.pause();
      await queue.addBulk(ids.slice(0, jobs).map((id) => ({ name: 'step', data: { noticeId: id }, opts: { jobId: `${id}-${name}` } })));
      // A connection handed to a Worker is the caller's to close: left open, it keeps this process alive.
      const workerConnection = new Redis(redisUrl, { maxRetriesPerRequest: null });
      const worker = new Worker('cost', processor, {
        connection: workerConnection,
        prefix: queuePrefix,
        concurrency: 20,
        ...keep,
        ...finished,
      });
      await worker.waitUntilReady();
      const cpu0 = await redisCpuMs(redis);
      const done = new Promise<void>((resolve) => {
        let count = 0;
        worker.on('completed', () => {
          count += 1;
          if (count === jobs) resolve();
        });
      });
      await queue.resume();
      await done;
      const cpu1 = await redisCpuMs(redis);
      await worker.close();
      await workerConnection.quit();
      if (!leave) await queue.obliterate({ force: true });
      return Math.round(((cpu1 - cpu0) * 1000 * 10) / jobs) / 10;
    };
    const jobs = Math.min(ids.length, 2000);
    const runOnce = await drain('once', async () => undefined, jobs);
    const runTwice = await drain(
      'twice',
      async (job, token) => {
        if (job.attemptsStarted > 1) return;
        await job.moveToDelayed(Date.now() + 20, token);
        throw new DelayedError('next check');
      },
      jobs,
    );
    // What keeping the last 1,000 finished jobs (for Bull Board) costs once a queue holds 1,000:
    // each finish also removes the oldest; against a job removed at its finish.
    await drain('fill', async () => undefined, 1000, keep, true);
    const runKeptFull = await drain('full', async () => undefined, jobs);
    const runRemoved = await drain('removed', async () => undefined, jobs, { removeOnComplete: { count: 0 } });
    for (const [name, cpuUsPerCall] of [
      ['BullMQ: a worker runs a job (fetch, run, finish)', runOnce],
      ['BullMQ: the same, 1,000 finished jobs kept and the oldest removed at each finish', runKeptFull],
      ['BullMQ: the same, the job removed at its finish (removeOnComplete: { count: 0 })', runRemoved],
      ['BullMQ: the same job moved back to delayed once and run again (the extra cost)', Math.round((runTwice - runOnce) * 10) / 10],
    ] as const) {
      console.log(`${name.padEnd(44)} ${String(cpuUsPerCall).padStart(6)} µs Redis CPU`);
      rows.push({ name, cpuUsPerCall, scriptUsPerCall: 0, commandsPerCall: 0 });
    }
  } finally {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await connection.quit();
  }
  return rows;
}

/**
 * The floor under Herald's design, from the figures above: what a delivered and a fallback notice
 * of the cost run (checks at 2, 3.5, 5 and 6.5 s, then the deadline) cannot do without — the
 * jobs the design asks for (the email send, a delayed job for each planned check, the deadline's
 * delayed job, the SMS check), the transitions that record each provider call and observation
 * (the record before a send and the answer after it are what makes a send exactly once), the
 * creation, and the mirror reading each entry once — summed, against a raw job (add + run)
 * measured in the same run. The SMS steps are taken at the cost of their email counterparts.
 */
function printFloor(rows: { name: string; cpuUsPerCall: number }[]) {
  const cost = (name: string) => {
    const row = rows.find((r) => r.name === name);
    if (!row) throw new Error(`no figure for ${name}`);
    return row.cpuUsPerCall;
  };
  const batch = Number(process.env.MIRROR_BATCH ?? 14);
  const perEntry = (cost(`mirror: next batch of ${batch} entries`) + cost(`mirror: acknowledge a batch of ${batch}`)) / batch;
  const add = cost('BullMQ: add a job');
  const addDelayed = cost('BullMQ: add a delayed job');
  const run = cost('BullMQ: a worker runs a job (fetch, run, finish)');
  const back = cost('BullMQ: the same job moved back to delayed once and run again (the extra cost)');
  const start = cost('transition: startEmailAttempt');
  const answer = cost('transition: recordEmailAccepted');
  const observe = cost('transition: observeEmail (pending, next check)');
  const complete = cost('transition: confirmEmailDelivered');
  const raw = add + run;
  // One job per notice: its first run sends, and it moves itself back to delayed for each check,
  // the deadline (which sends the SMS) and the SMS's check. `perChannel`: the jobs of the topology
  // before it (send, a check job per channel, the deadline job added and, when delivered, removed).
  const paths = {
    delivered: {
      jobs: add + run + back,
      perChannel: add + run + addDelayed + cost('BullMQ: remove a delayed job') + addDelayed + run,
      herald: cost('createNotice') + start + answer + complete,
      mirror: 6 * perEntry,
    },
    fallback: {
      jobs: add + run + 6 * back,
      perChannel: add + run + (addDelayed + run + 3 * back) + (addDelayed + run) + (addDelayed + run),
      herald:
        cost('createNotice') +
        start +
        answer +
        4 * observe +
        cost("transition: decideFallback with the deadline's read") +
        start +
        answer +
        complete,
      mirror: 15 * perEntry,
    },
  };
  console.log(`\nThe floor under this design, per notice (raw job: add + run = ${raw.toFixed(1)} µs):`);
  for (const [path, parts] of Object.entries(paths)) {
    const total = parts.jobs + parts.herald + parts.mirror;
    console.log(
      `  ${path.padEnd(10)} ${total.toFixed(0).padStart(5)} µs = ${(total / raw).toFixed(2)}× a raw job: BullMQ jobs ${(parts.jobs / raw).toFixed(2)}×, ` +
        `Herald's scripts ${(parts.herald / raw).toFixed(2)}×, the mirror ${(parts.mirror / raw).toFixed(2)}× ` +
        `(with a job per channel: ${((total - parts.jobs + parts.perChannel) / raw).toFixed(2)}×)`,
    );
  }
}
