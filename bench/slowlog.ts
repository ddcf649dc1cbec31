/**
 * Where Redis's time goes, by script and command: with `BENCH_SLOWLOG=1` the cost runs log every
 * command the server runs (`slowlog-log-slower-than 0`) over the span they measure, and sum the
 * durations of `SLOWLOG GET` by script (Herald's and BullMQ's, named from their SHA; BullMQ's by
 * queue too) or command. A script's duration includes the commands it calls. Logging every
 * command costs the server time of its own, so a profiled run's CPU figures are higher than an
 * unprofiled one's: the profile is read for its shares, the ratios from runs without it.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { defineScripts } from '../src/store/scripts.js';

export interface ProfileRow {
  /**
   * Script name (`transition`, `moveToFinished email-poll`) or command (`hget`); `(in scripts) xadd`
   * for the commands scripts call, whose time is already in their script's.
   */
  name: string;
  calls: number;
  /** Summed SLOWLOG duration, µs. */
  us: number;
}

export interface SlowlogProfile {
  /** Commands clients sent (a script's inner commands are inside its own duration). */
  calls: number;
  /** Summed duration of the commands clients sent, µs. */
  us: number;
  rows: ProfileRow[];
}

/** SHA → script name of every script Herald and BullMQ define on a connection. */
export async function scriptNames(redisUrl: string): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null, lazyConnect: true });
  const queue = new Queue('slowlog-names', { connection: { url: redisUrl, maxRetriesPerRequest: null } as never, prefix: 'slowlog-names' });
  try {
    type WithScripts = { scriptsSet: Record<string, { sha: string }> };
    for (const [name, script] of Object.entries((defineScripts(connection) as unknown as WithScripts).scriptsSet))
      names.set(script.sha, name);
    const client = (await queue.backend.client) as unknown as WithScripts;
    for (const [name, script] of Object.entries(client.scriptsSet)) if (!names.has(script.sha)) names.set(script.sha, name);
  } finally {
    await queue.close();
    // The queue wrote its meta key when it connected: nothing of it stays.
    await connection.del('slowlog-names:slowlog-names:meta');
    connection.disconnect();
  }
  return names;
}

/** Starts logging every command, from an empty log. Returns what `finish` needs to put the settings back. */
export async function startSlowlog(redis: Redis): Promise<{ slower: string; maxLen: string }> {
  const get = async (name: string) => ((await redis.config('GET', name)) as string[])[1]!;
  const saved = { slower: await get('slowlog-log-slower-than'), maxLen: await get('slowlog-max-len') };
  await redis.config('SET', 'slowlog-max-len', '2000000');
  await redis.slowlog('RESET');
  await redis.config('SET', 'slowlog-log-slower-than', '0');
  return saved;
}

const QUEUE_OF_KEY = /:(email-send|email-poll|deadline|sms-send|sms-poll|reconcile|log-mirror|content-purge|provider-feed|noop):/;

/** The kind of hash tag a command's first tagged key carries: shard, queue partition, `{q}`, or the tag itself. */
function tagOf(args: readonly string[]): string {
  for (const arg of args) {
    const tag = /\{([^}]+)\}/.exec(String(arg))?.[1];
    if (tag === undefined) continue;
    if (/^s\d+$/.test(tag)) return '[shard]';
    if (/^q\d+\./.test(tag)) return '[partition]';
    if (tag.startsWith('r:')) return '[recipient]';
    return `[{${tag}}]`;
  }
  return '[untagged]';
}

/**
 * Stops logging, reads the log and sums it; the settings are put back as they were. Scripts are
 * named from the scripts defined on a connection to `names` (a Redis URL), or from a map made
 * before by `scriptNames`. `byTag`: each row names the kind of hash tag its keys carry as well.
 */
export async function finishSlowlog(
  redis: Redis,
  names: string | Map<string, string>,
  saved: { slower: string; maxLen: string },
  opts: { byTag?: boolean } = {},
): Promise<SlowlogProfile> {
  await redis.config('SET', 'slowlog-log-slower-than', saved.slower);
  const entries = (await redis.slowlog('GET', '-1')) as [number, number, number, string[], string][];
  await redis.slowlog('RESET');
  await redis.config('SET', 'slowlog-max-len', saved.maxLen);
  const byName = typeof names === 'string' ? await scriptNames(names) : names;
  const rows = new Map<string, ProfileRow>();
  let calls = 0;
  let us = 0;
  for (const [, , duration, argv, client] of entries) {
    const command = String(argv[0]).toLowerCase();
    if (command === 'slowlog' || command === 'config') continue;
    // Redis logs the commands a script calls too, from a client with no address.
    const inner = String(client) === '?:0';
    let name = inner ? `(in scripts) ${command}` : command;
    if (command === 'evalsha' || command === 'eval') {
      const script = command === 'evalsha' ? byName.get(String(argv[1])) : undefined;
      name = script ?? `${command} ${String(argv[1]).slice(0, 8)}`;
      const queue = argv
        .slice(3)
        .map((arg) => QUEUE_OF_KEY.exec(String(arg))?.[1])
        .find(Boolean);
      if (queue) name += ` ${queue}`;
    }
    if (opts.byTag) name += ` ${tagOf(command === 'evalsha' || command === 'eval' ? argv.slice(3) : argv.slice(1))}`;
    const row = rows.get(name) ?? { name, calls: 0, us: 0 };
    row.calls += 1;
    row.us += Number(duration);
    rows.set(name, row);
    if (inner) continue;
    calls += 1;
    us += Number(duration);
  }
  return { calls, us, rows: [...rows.values()].sort((a, b) => b.us - a.us) };
}

/** The profile as lines: per item, share of the logged time, busiest first. */
export function profileLines(profile: SlowlogProfile, items: number, most = 25): string[] {
  const lines = [`${(profile.calls / items).toFixed(1)} commands sent, ${(profile.us / items).toFixed(0)} µs logged per item`];
  for (const row of profile.rows.slice(0, most))
    lines.push(
      `  ${row.name.padEnd(36)} ${(row.calls / items).toFixed(2).padStart(7)} calls ${(row.us / items).toFixed(1).padStart(8)} µs ${((100 * row.us) / profile.us).toFixed(1).padStart(5)} %`,
    );
  return lines;
}
