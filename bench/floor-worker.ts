/**
 * The floor under one job per notice, as a worker process: the notice's job in Herald's
 * `deadline` queue, with the worker's class and options (its concurrency, lock, kept jobs; its
 * moves back to delayed fetch the next job, queues/notice-worker.ts) on the worker's
 * connections, runs what the design cannot do without and nothing else: the transitions of
 * bench/floor-steps.ts at each run, the job moved back to delayed for each planned check, the
 * deadline and the SMS's check, and the log mirror's sweep into the archive. No reads, no
 * provider calls, no status-read limits, no other sweep. Env: Herald's (bench/herald.ts
 * heraldEnv) and FLOOR_PATH (`delivered` or `fallback`).
 *
 * The runs of a notice's job, from its creation (`job.timestamp`), as in the cost run (an 8 s
 * deadline: checks at 2, 3.5, 5 and 6.5 s): delivered, the send (the attempt and its answer),
 * then the first check, which finds it delivered; fallback, the send, four checks that find it
 * pending, the deadline (its read and the decision, then the SMS's attempt and answer), and the
 * SMS's first check, which finds it delivered.
 */
import { DelayedError, Worker, type Job } from 'bullmq';
import { iso, systemClock } from '../src/clock.js';
import { composeWorker } from '../src/compose.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import type { TransitionSpec } from '../src/store/notices.js';
import { createProviders, NOTICE_JOB_CONCURRENCY_FACTOR, STALLED_AFTER_MS } from '../src/worker.js';
import { KEEP_JOBS, noticeOfJob, QUEUE_NAMES, type NoticeJob } from '../queues/index.js';
import { NoticeWorker } from '../queues/notice-worker.js';
import { confirmDelivered, decideAtDeadline, observePending, recordAccepted, startAttempt, type FloorNotice } from './floor-steps.js';

const DEADLINE_MS = 8_000;
const CHECKS = [2_000, 3_500, 5_000, 6_500];

const path = process.env.FLOOR_PATH;
if (path !== 'delivered' && path !== 'fallback') throw new Error(`FLOOR_PATH="${path}" must be delivered or fallback`);
const config = loadConfig(process.env);
const log = createLogger('bench-floor-worker', 'warn');
const providers = await createProviders(config, log);
const { redis, stepRedis, store, queues, mirror } = composeWorker(config, { clock: systemClock, log, providers });

const step = async (id: string, now: number, spec: TransitionSpec) => {
  const result = await store.transition(id, now, iso(now), spec);
  if (!result.ok) throw new Error(`${spec.name} of ${id} refused: ${JSON.stringify(result)}`);
};

/** One run of a notice's job: its transitions, then the time it comes back at, if any. */
async function run(job: Job<NoticeJob>): Promise<number | undefined> {
  const id = noticeOfJob(job);
  const created = job.timestamp;
  const deadline = created + DEADLINE_MS;
  const runs = job.attemptsStarted;
  const now = Date.now();
  const n = (more: Partial<FloorNotice> = {}): FloorNotice => ({ id, attempt: `att_${id}`, deadline, now, ...more });
  if (runs === 1) {
    await step(id, now, startAttempt('email', n()));
    await step(id, Date.now(), recordAccepted('email', n(), created + CHECKS[0]!));
    return created + CHECKS[0]!;
  }
  if (path === 'delivered') {
    await step(id, now, confirmDelivered('email', n({ plannedAt: created + CHECKS[0]!, checks: 1 })));
    return undefined;
  }
  const check = runs - 1;
  if (check <= CHECKS.length) {
    const next = CHECKS[check] === undefined ? deadline : created + CHECKS[check]!;
    await step(id, now, observePending(n({ plannedAt: created + CHECKS[check - 1]!, nextCheckAt: next, checks: check })));
    return next;
  }
  if (check === CHECKS.length + 1) {
    const sms = { ...n({ checks: CHECKS.length + 1 }), attempt: `att_sms_${id}` };
    await step(id, now, decideAtDeadline(n({ plannedAt: deadline, checks: CHECKS.length + 1 })));
    await step(id, Date.now(), startAttempt('sms', sms));
    const firstSmsCheck = Date.now() + config.minPollIntervalMs;
    await step(id, Date.now(), recordAccepted('sms', sms, firstSmsCheck));
    return firstSmsCheck;
  }
  await step(id, now, confirmDelivered('sms', { ...n({ checks: 1, plannedAt: now }), attempt: `att_sms_${id}` }));
  return undefined;
}

const workers: Worker[] = queues.deadline.all.map(
  (queue) =>
    new NoticeWorker(
      queue.name,
      async (job, token) => {
        const at = await run(job);
        if (at === undefined || !token) return 'done';
        await job.moveToDelayed(Math.max(at, Date.now() + 1), token);
        throw new DelayedError('next run');
      },
      {
        connection: redis,
        prefix: queue.opts.prefix,
        // As src/worker.ts runs the `deadline` queue.
        concurrency: config.workerConcurrency * NOTICE_JOB_CONCURRENCY_FACTOR,
        ...KEEP_JOBS,
        lockDuration: STALLED_AFTER_MS,
        stalledInterval: STALLED_AFTER_MS / 2,
      },
    ),
);
// The log mirror, as the worker schedules it: its entries reach the archive once each.
workers.push(
  new Worker(QUEUE_NAMES.logMirror, () => mirror.mirrorOnce(), { connection: redis, prefix: store.keys.queuePrefix, concurrency: 1 }),
);
await queues.logMirror.upsertJobScheduler('log-mirror-sweep', { every: config.mirror.intervalMs }, { name: 'log-mirror' });
for (const worker of workers) worker.on('error', (error) => log.warn({ err: error }, 'floor worker error'));

process.on('SIGTERM', () => {
  mirror.stop();
  void Promise.allSettled(workers.map((worker) => worker.close()))
    .then(() => Promise.allSettled([redis.quit(), stepRedis.quit()]))
    .finally(() => process.exit(0));
});
