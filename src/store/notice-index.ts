import type { Redis } from 'ioredis';
import type { NoticeState } from '../notice/states.js';
import type { Keys } from './keys.js';

/**
 * Reads of the shards' `notices` indexes (src/store/keys.ts): every notice Redis holds, scored
 * 0 so that ZRANGE BYLEX walks them by ID, and an ID sorts by creation time within its shard
 * (`ntc_<shard><10 base-36 digits of ms><random>`). createNotice-9.lua adds a notice,
 * retireNotice-7.lua removes it.
 */

/** What the notices list needs of a notice hash: one HMGET. */
export interface NoticeSummary {
  id: string;
  state: NoticeState;
  category: string;
  recipientId: string;
  createdAt: number;
  deadline: number;
  fallbackReason: string | undefined;
  fallbackDecidedAt: number | undefined;
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
  'id',
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
] as const;

/** One shard's slice of a walk: IDs strictly inside (min, max) as ZRANGE BYLEX bounds (`(x`, `[x`, `-`, `+`). */
export interface LexRange {
  shard: number;
  max: string;
  min: string;
}

export class NoticeIndex {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /** For each range, up to `count` notice IDs of its shard, highest (newest) first: one round trip. */
  async newest(ranges: readonly LexRange[], count: number): Promise<string[][]> {
    if (ranges.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const r of ranges) pipeline.zrevrangebylex(this.keys.notices(r.shard), r.max, r.min, 'LIMIT', 0, count);
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([error, ids]) => {
      if (error) throw error;
      return ids as string[];
    });
  }

  /** The summaries of these notices, null for one Redis no longer holds: one round trip. */
  async summaries(ids: readonly string[]): Promise<(NoticeSummary | null)[]> {
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.notice(id), ...FIELDS);
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([error, values]) => {
      if (error) throw error;
      return parseSummary(values as (string | null)[]);
    });
  }
}

function parseSummary(values: (string | null)[]): NoticeSummary | null {
  const v = Object.fromEntries(FIELDS.map((field, i) => [field, values[i] ?? undefined])) as Record<
    (typeof FIELDS)[number],
    string | undefined
  >;
  if (v.id === undefined || v.state === undefined) return null;
  const num = (value: string | undefined) => (value === undefined ? undefined : Number(value));
  return {
    id: v.id,
    state: v.state as NoticeState,
    category: v.category ?? '',
    recipientId: v.recipientId ?? '',
    createdAt: Number(v.createdAt),
    deadline: Number(v.deadline),
    fallbackReason: v.fallbackReason,
    fallbackDecidedAt: num(v.fallbackDecidedAt),
    providerTimeoutMs: Number(v.providerTimeoutMs ?? 0),
    email: { inDoubt: v.emailAttemptInDoubt === '1', settled: v.emailAttemptSettled === '1', startedAt: num(v.emailAttemptStartedAt) },
    sms: { inDoubt: v.smsAttemptInDoubt === '1', settled: v.smsAttemptSettled === '1', startedAt: num(v.smsAttemptStartedAt) },
  };
}
