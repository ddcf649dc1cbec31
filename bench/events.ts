/**
 * Events to callers: how fast one worker process delivers them to a local listener that answers
 * 204 at once (bench/event-receiver.ts, a process of its own), and how late they arrive, against
 * raw BullMQ jobs that POST the same body to the same listener (bench/raw-worker.ts with
 * BENCH_POST_URL), with the same concurrency and finished-job options.
 *
 * - The burst: `events` delivered notices complete with the `event-dispatch` and
 *   `event-delivery` queues paused; once the log mirror has caught up (nothing else runs), both
 *   queues resume and the events are timed from the first arrival to the last, with the Redis
 *   and process CPU the drain cost (the dispatch's reads of the log and its queued deliveries,
 *   and the deliveries), net of the idle rate. Raw: as many jobs added in bulk, 500 at a time, and
 *   worked at once.
 * - The steady load: notices that complete (delivered at once, checked 1 s after the send)
 *   created at `rate` a second, in a batch every 50 ms, for a lead-in and a window; the lag of
 *   each event whose entry lies in the window is its arrival minus the entry time in its body
 *   (`timestamp`). Raw: jobs added at the same rate, each body's `timestamp` its add time.
 */
import { API_KEY, createNoticeBatch, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { mirrorLag } from './pending.js';
import { freePort, httpReady, NodeProcess, ownCpuMs, sleep, until } from './processes.js';
import { RawDeployment } from './raw.js';
import { countCommands, scanKeys, top } from './redis-stats.js';
import { distribution, type Distribution } from './stats.js';

export interface EventBurst {
  events: number;
  /** From the first arrival to the last. */
  seconds: number;
  perSecond: number;
  /** From the resume (Herald) or the first add (raw) to the last arrival. */
  totalSeconds: number;
  redisCpuUsPerEvent: number;
  /** Herald: the web and worker processes; raw: its worker and the benchmark's process, which adds the jobs. */
  processCpuUsPerEvent: number;
  redisCommandsPerEvent: number;
  /** Deliveries that arrived more than once (at least once: the same webhook-id again). */
  duplicates: number;
  busiestCommands: Record<string, number>;
}

export interface EventSteady {
  /** Notices (Herald) or jobs (raw) a second. */
  rate: number;
  windowSeconds: number;
  /** Events whose entry lies in the window. */
  events: number;
  /** Those, per second of the window. */
  perSecond: number;
  /** Arrival − entry time, ms. */
  lag: Distribution;
  /** From the end of the load to the last arrival, ms. */
  drainMs: number;
  /** The events of the window arrived at the load's rate (95 % of it), the last within DRAINED_WITHIN_MS of the load's end. */
  keptUp: boolean;
  /**
   * Herald only: where the lag went, from the `event-delivery` jobs the queue keeps (its last
   * 1,000 finished) of the window's events, ms: entry to job queued (the dispatch sweep), queued
   * to started (the queue), started to arrival (the delivery's reads and POST).
   */
  split?: { queued: Distribution; started: Distribution; arrived: Distribution; jobs: number };
}

export interface EventsResult {
  herald: {
    burst: EventBurst;
    steady: EventSteady;
    /** The burst's notices: first POST to last completion, events paused. */ noticesPerSecond: number;
  };
  raw: { burst: EventBurst; steady: EventSteady };
  /** The steady rate: `steadyShare` of what the burst says one worker does for notices and their events together. */
  steadyRate: number;
}

/** What the `event-delivery` queue keeps of finished jobs, on the raw side too. */
const DELIVERY_JOB_OPTIONS = { removeOnComplete: { count: 1000 }, removeOnFail: { count: 1000 } };
const TICK_MS = 50;
/**
 * A load kept up with leaves no backlog: its last notices complete about a second after their
 * send (the check), and their events wait for the next dispatch sweep (every 500 ms).
 */
const DRAINED_WITHIN_MS = 3_000;

export async function measureEvents(
  ctx: BenchContext,
  opts: { events: number; steadyShare: number; windowMs: number; leadInMs: number },
): Promise<EventsResult> {
  const receiver = await EventReceiver.start();
  try {
    const herald = await heraldEvents(ctx, receiver, opts);
    const raw = await rawEvents(ctx, receiver, opts.events, herald.steady.rate, herald.sample, opts);
    return {
      herald: { burst: herald.burst, steady: herald.steady, noticesPerSecond: herald.noticesPerSecond },
      raw,
      steadyRate: herald.steady.rate,
    };
  } finally {
    await receiver.stop();
  }
}

/** A delivered notice: the email delivered at once, seen at the check 1 s after its send. */
const completing = () =>
  noticeBody({
    email: 'delivered+0ms@example.com',
    phone: '+12025550100',
    deadlineInSeconds: 60,
    policy: { firstCheckAfterSeconds: 1, minCheckIntervalSeconds: 2 },
  });

async function heraldEvents(
  ctx: BenchContext,
  receiver: EventReceiver,
  opts: { events: number; steadyShare: number; windowMs: number; leadInMs: number },
): Promise<{ burst: EventBurst; steady: EventSteady; noticesPerSecond: number; sample: string }> {
  const herald = new HeraldDeployment(ctx, `${ctx.runPrefix}-events`, { HERALD_ALLOW_PRIVATE_EVENT_URLS: '1' });
  try {
    await herald.startWeb();
    await herald.startWorkers(1);
    const created = await fetch(`${herald.url}/v1/event-endpoints`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${receiver.url}/events`, events: ['notice.completed', 'fallback.decided', 'notice.failed'] }),
    });
    if (created.status !== 201) throw new Error(`events: creating the endpoint answered ${created.status}: ${await created.text()}`);
    const eventQueues = [herald.queues.eventDispatch, herald.queues.eventDelivery];

    // The burst: the events wait in the log while their notices complete.
    await Promise.all(eventQueues.map((queue) => queue.pause()));
    await receiver.reset();
    ctx.log(`events: ${opts.events} notices completing, events paused`);
    const creating = Date.now();
    for (let i = 0; i < opts.events; i += 500)
      await createNoticeBatch(herald.url, Array.from({ length: Math.min(500, opts.events - i) }, completing));
    await until(async () => (await herald.live()) === 0, 300_000, 'every notice of the burst to complete', 50);
    const noticesPerSecond = opts.events / ((Date.now() - creating) / 1000);
    await until(() => herald.drained(), 60_000, 'the notice jobs of the burst to finish', 100);
    const logs = await scanKeys(ctx.redis, `${herald.prefix}:*:log`);
    await until(
      async () => (await Promise.all(logs.map((key) => mirrorLag(ctx, key)))).every((lag) => lag === 0),
      120_000,
      'the log mirror to catch up',
      250,
    );
    let resumed = 0;
    const counted = await countCommands(
      ctx.redis,
      async () => {
        resumed = Date.now();
        await Promise.all(eventQueues.map((queue) => queue.resume()));
        await until(async () => (await receiver.count()) >= opts.events, 300_000, `the ${opts.events} events of the burst to arrive`, 50);
      },
      { idleMs: 3000, processCpu: () => herald.processCpuMs(), probe: () => receiver.count(), probeEveryMs: 50 },
    );
    const received = await receiver.received();
    const burst = burstOf(opts.events, received.records, resumed, counted);
    ctx.log(
      `events: burst of ${opts.events} in ${burst.seconds.toFixed(1)} s (${burst.totalSeconds.toFixed(1)} s from the resume); notices completed at ${noticesPerSecond.toFixed(0)}/s`,
    );

    // One worker does both for every notice: its notice's steps and its event's dispatch and
    // delivery. A load that falls behind (the machine busier than during the burst) measures the
    // backlog rather than the lag: it runs once more at half the rate.
    let rate = opts.steadyShare / (1 / noticesPerSecond + 1 / burst.perSecond);
    for (let attempt = 1; ; attempt += 1) {
      await receiver.reset();
      ctx.log(`events: steady load of ${rate.toFixed(0)} notices/s`);
      const load = await paced(rate, opts.leadInMs + opts.windowMs, (count) =>
        createNoticeBatch(herald.url, Array.from({ length: count }, completing)),
      );
      await until(async () => (await receiver.count()) >= load.items, 180_000, 'every event of the steady load to arrive', 50);
      const records = (await receiver.received()).records;
      const steady = steadyOf(rate, records, load.started + opts.leadInMs, opts.windowMs, load.ended);
      steady.split = await lagSplit(herald, records, load.started + opts.leadInMs, opts.windowMs);
      if (steady.keptUp || attempt === 2) return { burst, steady, noticesPerSecond, sample: received.sample! };
      ctx.log(
        `events: the steady load fell behind (${steady.perSecond.toFixed(0)}/s in the window, the last ${steady.drainMs} ms after the load); again at half the rate`,
      );
      rate /= 2;
    }
  } finally {
    await herald.close();
  }
}

async function rawEvents(
  ctx: BenchContext,
  receiver: EventReceiver,
  events: number,
  rate: number,
  sample: string,
  opts: { windowMs: number; leadInMs: number },
): Promise<{ burst: EventBurst; steady: EventSteady }> {
  const raw = new RawDeployment(ctx, `${ctx.runPrefix}-events-raw`, DELIVERY_JOB_OPTIONS);
  // Herald's body, with the add time as its entry time.
  const event = JSON.parse(sample) as Record<string, unknown>;
  const jobs = (count: number, at: number) =>
    Array.from({ length: count }, () => ({
      name: 'noop',
      data: { body: JSON.stringify({ ...event, timestamp: new Date(at).toISOString() }) },
    }));
  try {
    await raw.startWorkers(1, { BENCH_POST_URL: `${receiver.url}/events` });
    await receiver.reset();
    let started = 0;
    const counted = await countCommands(
      ctx.redis,
      async () => {
        started = Date.now();
        for (let i = 0; i < events; i += 500) await raw.queue.addBulk(jobs(Math.min(500, events - i), Date.now()));
        await until(async () => (await receiver.count()) >= events, 300_000, `the ${events} raw deliveries to arrive`, 50);
      },
      { idleMs: 3000, processCpu: () => raw.processCpuMs() + ownCpuMs(), probe: () => receiver.count(), probeEveryMs: 50 },
    );
    const burst = burstOf(events, (await receiver.received()).records, started, counted);
    ctx.log(`events: raw burst of ${events} in ${burst.seconds.toFixed(1)} s`);

    await receiver.reset();
    const load = await paced(rate, opts.leadInMs + opts.windowMs, async (count) => {
      await raw.queue.addBulk(jobs(count, Date.now()));
    });
    await until(async () => (await receiver.count()) >= load.items, 120_000, 'every raw delivery of the steady load to arrive', 50);
    const steady = steadyOf(rate, (await receiver.received()).records, load.started + opts.leadInMs, opts.windowMs, load.ended);
    return { burst, steady };
  } finally {
    await raw.close();
  }
}

/**
 * Sends `rate` items a second for `ms`: every TICK_MS, as many as are due by then in one call of
 * `send`, without waiting for the calls before it (a slow answer does not slow the load).
 */
async function paced(
  rate: number,
  ms: number,
  send: (count: number) => Promise<void>,
): Promise<{ items: number; started: number; ended: number }> {
  const total = Math.round((rate * ms) / 1000);
  const started = Date.now();
  const calls: Promise<void>[] = [];
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor((rate * (Date.now() - started)) / 1000));
    if (due > sent) {
      calls.push(send(due - sent));
      sent = due;
    }
    await sleep(TICK_MS);
  }
  await Promise.all(calls);
  return { items: total, started, ended: Date.now() };
}

function burstOf(
  events: number,
  records: [string, number, number][],
  from: number,
  counted: { durationMs: number; redisCpuMs: number; processCpuMs: number; total: number; byCommand: Map<string, number> },
): EventBurst {
  const arrivals = records.map((r) => r[2]).sort((a, b) => a - b);
  const seconds = (arrivals.at(-1)! - arrivals[0]!) / 1000;
  return {
    events,
    seconds,
    perSecond: (events - 1) / seconds,
    totalSeconds: (arrivals.at(-1)! - from) / 1000,
    redisCpuUsPerEvent: (counted.redisCpuMs * 1000) / events,
    processCpuUsPerEvent: (counted.processCpuMs * 1000) / events,
    redisCommandsPerEvent: counted.total / events,
    duplicates: records.length - new Set(records.map((r) => r[0])).size,
    busiestCommands: top(counted.byCommand, events, 20),
  };
}

function steadyOf(rate: number, records: [string, number, number][], windowStart: number, windowMs: number, ended: number): EventSteady {
  const inWindow = records.filter(([, entryAt]) => entryAt >= windowStart && entryAt < windowStart + windowMs);
  const perSecond = inWindow.length / (windowMs / 1000);
  const drainMs = Math.max(...records.map((r) => r[2])) - ended;
  return {
    rate,
    windowSeconds: windowMs / 1000,
    events: inWindow.length,
    perSecond,
    lag: distribution(inWindow.map(([, entryAt, at]) => at - entryAt)),
    drainMs,
    keptUp: perSecond >= 0.95 * rate && drainMs <= DRAINED_WITHIN_MS,
  };
}

/** The lag of the window's events split at their delivery jobs' add and start (steady.split). */
async function lagSplit(
  herald: HeraldDeployment,
  records: [string, number, number][],
  windowStart: number,
  windowMs: number,
): Promise<EventSteady['split']> {
  const arrivals = new Map(records.map(([id, , at]) => [id, at]));
  const queued: number[] = [];
  const started: number[] = [];
  const arrived: number[] = [];
  for (const job of await herald.queues.eventDelivery.getCompleted(0, -1)) {
    const data = job.data as { eventId: string; at: number };
    const at = arrivals.get(data.eventId);
    if (at === undefined || data.at < windowStart || data.at >= windowStart + windowMs || job.processedOn === undefined) continue;
    queued.push(job.timestamp - data.at);
    started.push(job.processedOn - job.timestamp);
    arrived.push(at - job.processedOn);
  }
  return { queued: distribution(queued), started: distribution(started), arrived: distribution(arrived), jobs: queued.length };
}

/** The listener process, and what it has received. */
class EventReceiver {
  private constructor(
    private readonly process: NodeProcess,
    readonly url: string,
  ) {}

  static async start(): Promise<EventReceiver> {
    const port = await freePort();
    const process = new NodeProcess('dist/bench/event-receiver.js', { PORT: String(port) }).start();
    const url = `http://127.0.0.1:${port}`;
    await httpReady(`${url}/healthz`, process);
    return new EventReceiver(process, url);
  }

  async reset(): Promise<void> {
    await fetch(`${this.url}/reset`, { method: 'POST' });
  }

  async count(): Promise<number> {
    return ((await (await fetch(`${this.url}/count`)).json()) as { count: number }).count;
  }

  /** [webhook-id, entry time, arrival time] of each delivery, and one body. */
  async received(): Promise<{ records: [string, number, number][]; sample: string | undefined }> {
    return (await (await fetch(`${this.url}/received`)).json()) as { records: [string, number, number][]; sample: string | undefined };
  }

  stop(): Promise<void> {
    return this.process.stop();
  }
}
