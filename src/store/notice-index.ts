import { execAll, masterNodes, type RedisClient } from './redis.js';
import { shardOfNoticeId } from '../notice/ids.js';
import type { NoticeState } from '../notice/states.js';
import type { Keys } from './keys.js';

/**
 * Reads of the shards' `notices` indexes (src/store/keys.ts): every notice Redis holds, scored
 * 0 so that ZRANGE BYLEX walks them by ID, and an ID sorts by creation time within its shard
 * (`ntc_<shard><10 base-36 digits of ms><random>`). createNotice-10.lua adds a notice,
 * retireNotice-8.lua removes it.
 */

/** What the notices list needs of a notice hash: one HMGET. */
export interface NoticeSummary {
  id: string;
  state: NoticeState;
  category: string;
  recipientId: string;
  /** The tenant whose key created it (`default` for notices of before tenants). */
  tenant: string;
  createdAt: number;
  deadline: number;
  fallbackReason: string | undefined;
  fallbackDecidedAt: number | undefined;
  /** Its addresses as stored (normalized); a retired notice's are not in its record, and its pointers stand for them. */
  addresses: { email: string | undefined; phone: string | undefined } | 'by_pointer';
  providerTimeoutMs: number;
  email: AttemptSummary;
  sms: AttemptSummary;
}

export interface AttemptSummary {
  inDoubt: boolean;
  settled: boolean;
  startedAt: number | undefined;
}

const FIELDS = [
  'state',
  'category',
  'recipientId',
  'createdAt',
  'deadline',
  'fallbackReason',
  'fallbackDecidedAt',
  'providerTimeoutMs',
  'emailAttemptInDoubt',
  'emailAttemptSettled',
  'emailAttemptStartedAt',
  'smsAttemptInDoubt',
  'smsAttemptSettled',
  'smsAttemptStartedAt',
  'tenant',
  'email',
  'phone',
] as const;

/**
 * One shard's slice of a walk: IDs strictly inside (min, max) as ZRANGE BYLEX bounds (`(x`, `[x`,
 * `-`, `+`), of its `notices` index, or of its address index (`address`: members `<hmac>:<id>`,
 * src/store/address-index.ts).
 */
export interface LexRange {
  shard: number;
  max: string;
  min: string;
  address?: boolean;
}

export class NoticeIndex {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** For each range, up to `count` members (notice IDs, or `<hmac>:<id>`) of its index, highest (newest) first: one round trip. */
  async newest(ranges: readonly LexRange[], count: number): Promise<string[][]> {
    if (ranges.length === 0) return [];
    const replies = await execAll(
      this.redis,
      ranges.map((r) => [
        'zrevrangebylex',
        r.address ? this.keys.addresses(r.shard) : this.keys.notices(r.shard),
        r.max,
        r.min,
        'LIMIT',
        0,
        count,
      ]),
    );
    return replies.map(([error, ids]) => {
      if (error) throw error;
      return ids as string[];
    });
  }

  /** The summaries of these notices, null for one Redis no longer holds: one round trip. */
  async summaries(ids: readonly string[]): Promise<(NoticeSummary | null)[]> {
    if (ids.length === 0) return [];
    const replies = await execAll(
      this.redis,
      ids.map((id) => ['hmget', this.keys.notice(id), ...FIELDS]),
    );
    return replies.map(([error, values], i) => {
      if (error) throw error;
      return parseSummary(ids[i]!, values as (string | null)[]);
    });
  }
}

function parseSummary(id: string, values: (string | null)[]): NoticeSummary | null {
  const v = Object.fromEntries(FIELDS.map((field, i) => [field, values[i] ?? undefined])) as Record<
    (typeof FIELDS)[number],
    string | undefined
  >;
  if (v.state === undefined) return null;
  const num = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  return {
    id,
    state: v.state as NoticeState,
    category: v.category ?? '',
    recipientId: v.recipientId ?? '',
    tenant: v.tenant ?? 'default',
    createdAt: Number(v.createdAt),
    deadline: Number(v.deadline),
    fallbackReason: v.fallbackReason,
    fallbackDecidedAt: num(v.fallbackDecidedAt),
    addresses: { email: v.email, phone: v.phone },
    providerTimeoutMs: Number(v.providerTimeoutMs ?? 0),
    email: { inDoubt: v.emailAttemptInDoubt === '1', settled: v.emailAttemptSettled === '1', startedAt: num(v.emailAttemptStartedAt) },
    sms: { inDoubt: v.smsAttemptInDoubt === '1', settled: v.smsAttemptSettled === '1', startedAt: num(v.smsAttemptStartedAt) },
  };
}

/**
 * Puts in the `notices` indexes the notices that versions before them created: every notice
 * hash Redis holds (SCAN on each master), then drops any whose hash went meanwhile (a notice
 * that retires never comes back, and retireNotice-8.lua removes it from then on). Runs once;
 * the `notices-indexed` marker holds when. Returns how many it added, or null when it had run.
 */
export async function indexExistingNoticesOnce(redis: RedisClient, keys: Keys, now: number): Promise<number | null> {
  if ((await redis.exists(keys.noticesIndexed)) === 1) return null;
  let added = 0;
  await forEachNoticeBatch(redis, keys, async (ids) => {
    const adds = await execAll(
      redis,
      ids.map((id) => ['zadd', keys.notices(shardOfNoticeId(id)!), 'NX', 0, id]),
    );
    added += adds.reduce((sum, [, n]) => sum + Number(n ?? 0), 0);
    const gone = await goneOf(redis, keys, ids);
    await execAll(
      redis,
      gone.map((id) => ['zrem', keys.notices(shardOfNoticeId(id)!), id]),
    );
  });
  await redis.set(keys.noticesIndexed, new Date(now).toISOString());
  return added;
}

/** Every notice hash Redis holds, by their IDs, a SCAN batch at a time on each master (for the indexes' backfills). */
export async function forEachNoticeBatch(redis: RedisClient, keys: Keys, each: (ids: string[]) => Promise<void>): Promise<void> {
  const pattern = `${keys.prefix}:{s*}:notice:ntc_*`;
  for (const node of masterNodes(redis)) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      const ids = found.map((key) => key.slice(key.lastIndexOf(':') + 1)).filter((id) => shardOfNoticeId(id) !== undefined);
      if (ids.length > 0) await each(ids);
    } while (cursor !== '0');
  }
}

/** Those of `ids` whose hash Redis no longer holds (retired since they were found). */
export async function goneOf(redis: RedisClient, keys: Keys, ids: readonly string[]): Promise<string[]> {
  const exists = await execAll(
    redis,
    ids.map((id) => ['exists', keys.notice(id)]),
  );
  return ids.filter((_, i) => Number(exists[i]?.[1] ?? 0) === 0);
}
