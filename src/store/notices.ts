import { execAll, type Command, type RedisClient } from './redis.js';
import type { Channel } from '../providers/types.js';
import type { NoticeState, PolicyOutcome } from '../notice/states.js';
import { TRANSITIONS, type ReplicatedWrite, type Transition, type TransitionName } from '../notice/transitions.js';
import type { LogEntry, StoredEntry } from '../notice/entries.js';
import { SHARD_COUNT, shardOfKey, shardOfNoticeId } from '../notice/ids.js';
import type { Keyring } from '../crypto.js';
import { openContent, type StoredContent } from './content.js';
import { Keys, shardFor } from './keys.js';
import { defineScripts, type HeraldScripts, type ScriptPipeline } from './scripts.js';
import { metricIncrements } from './metrics.js';
import { ReplicaWatch, unreplicatedField } from './replicas.js';
import { NoticePlacement } from './placement.js';

export type { LogEntry, StoredEntry } from '../notice/entries.js';

/** Per-channel send and observation fields of a notice, as stored. */
export interface ChannelRecord {
  /** The key stored for the channel (the SMS's, set with the fallback); the domain derives the email's (src/notice/notice.ts). */
  idempotencyKey: string | undefined;
  attemptId: string | undefined;
  attempts: number;
  attemptStartedAt: number | undefined;
  /** The attempt has an outcome stored (accepted or an error); false while in flight or after a crash. */
  attemptSettled: boolean;
  /** The last attempt may have reached the provider without Herald learning the answer. */
  attemptInDoubt: boolean;
  providerMessageId: string | undefined;
  status: string | undefined;
  providerStatus: string | undefined;
  lastObservedAt: number | undefined;
  nextCheckAt: number | undefined;
  checksDone: number;
  /**
   * The provider that made the last attempt, as its `*.requested` entry names it (`postmark`,
   * `twilio-sandbox`); undefined for attempts of versions that did not store it.
   */
  provider: string | undefined;
}

/** A notice as its Redis hash holds it: the stored numbers, from which the domain derives its plans (src/notice/notice.ts). */
export interface StoredNotice {
  id: string;
  state: NoticeState;
  /** `seq` of its last decision-log entry: it grows with every entry. */
  seq: number;
  category: string;
  recipientId: string;
  email: string | undefined;
  phone: string | undefined;
  region: string | undefined;
  createdAt: number;
  deadline: number;
  policyVersion: number;
  emailPolicy: PolicyOutcome;
  providerTimeoutMs: number;
  /** The email poll plan's two numbers: its first check after creation, and the spacing of the rest. */
  pollFirstMs: number;
  pollIntervalMs: number;
  /** The SMS plan's numbers, stored when the SMS was accepted: when, the poll floor and the budget then. */
  smsPlanAt: number | undefined;
  smsPlanFloorMs: number | undefined;
  smsPlanMax: number | undefined;
  /** When the content was purged (`content.purged`); undefined while it may still be there. */
  contentPurgedAt: number | undefined;
  idempotencyKey: string | undefined;
  complianceDeadline: number | undefined;
  fallbackReason: string | undefined;
  fallbackDecidedAt: number | undefined;
  /** Quiet hours: the SMS may not leave before this time. */
  smsSendNotBefore: number | undefined;
  /** The regional sender, when the rule names one. */
  smsFrom: string | undefined;
  /**
   * When the search for an SMS in doubt ended unanswered at its bound (`sms.unconfirmed`,
   * `sms_send_unconfirmed`): nothing more is sent or searched for the notice.
   */
  smsSearchEndedAt: number | undefined;
  smsSegments: number;
  /** Webhook observations recorded after the notice completed (they are bounded: src/notice/steps/webhook.ts). */
  lateWebhooks: number;
  /** The tenant whose key created the notice. */
  tenant: string;
  emailChannel: ChannelRecord;
  smsChannel: ChannelRecord;
}

export interface NoticeContent {
  subject: string;
  text?: string;
  html?: string;
  sms?: string;
}

/** A field of a channel's record in the notice hash: `emailAttemptId`, `smsStatus`, ... (`channelField`). */
export type ChannelField = `${Channel}${Capitalize<keyof ChannelRecord>}`;

/**
 * Every field of the notice hash, spelled here once: transitions and the creation script write
 * only these, and `parseNotice` reads them. (`statsHour` is the scripts' own: the stats counters.)
 */
export type NoticeField =
  /** A provider event the notice has recorded (src/notice/steps/webhook.ts), by its digest. */
  | `webhook:${string}`
  /** Written by earlier versions only: a notice's ID is its key's. */
  | 'id'
  | 'state'
  | 'seq'
  | 'category'
  | 'recipientId'
  | 'email'
  | 'phone'
  | 'region'
  | 'createdAt'
  | 'deadline'
  | 'policyVersion'
  | 'emailPolicy'
  | 'providerTimeoutMs'
  | 'pollFirstMs'
  | 'pollIntervalMs'
  /** Written by earlier versions only: the content's digest is the `notice.accepted` entry's. */
  | 'contentSha256'
  | 'contentPurgedAt'
  | 'idempotencyKey'
  | 'complianceDeadline'
  | 'fallbackReason'
  | 'fallbackDecidedAt'
  | 'blockReason'
  | 'smsSendNotBefore'
  | 'smsFrom'
  | 'smsSearchEndedAt'
  | 'smsSegments'
  | 'lateWebhooks'
  /** The tenant of a notice of another tenant than `default` (absent: `default`). */
  | 'tenant'
  | 'smsPlanAt'
  | 'smsPlanFloorMs'
  | 'smsPlanMax'
  | 'statsHour'
  | ChannelField;

/** Values to write into notice-hash fields. */
export type NoticeFields = Partial<Record<NoticeField, string | number>>;

/** What one named transition (src/notice/transitions.ts) asks of the transition script (lua/transition-8.lua). */
export interface TransitionSpec {
  name: TransitionName;
  /** Narrows the transition's `from` to the states this step read (optimistic steps). */
  onlyFrom?: readonly NoticeState[];
  /** Field equality guards; '' means the field must be absent. */
  eq?: Partial<Record<NoticeField, string>>;
  /** A field holding a time (ms) that must have been reached. */
  reached?: NoticeField;
  set?: NoticeFields;
  unset?: NoticeField[];
  entries: LogEntry[];
  /** '' keep, 'remove', or the time (ms) the reconciler should look at the notice. */
  due?: number | 'remove';
}

/** The content's stored string as read with its notice (`getWithContent`), not yet opened. */
export type StoredContentRead = Promise<string | null>;

export type TransitionResult =
  /** `notice`: the notice as the step left it, when the transition was asked for it (`{ read: true }`). */
  | { ok: true; state: NoticeState; notice?: StoredNotice }
  | { ok: false; reason: 'missing' }
  | { ok: false; reason: 'state'; state: NoticeState }
  | { ok: false; reason: 'guard'; field: string; value: string };

export interface CreateNoticeInput {
  id: string;
  createdAt: number;
  fields: NoticeFields;
  /** As stored: sealed (src/store/content.ts) when content encryption is on. */
  content: StoredContent;
  entries: LogEntry[];
  at: string;
  due: number;
  contentTtlMs: number;
  idempotency?: { shard: number; keyHash: string; bodyHash: string; ttlMs: number };
  /** Its members of the shard's address index (src/store/address-index.ts): `<hmac>:<id>`. */
  addressMembers?: string[];
}

/**
 * The content of a notice is there but cannot be opened: sealed with a key this process does
 * not hold, altered, or not content at all. Redis errors are not this: they pass through as
 * they are, since the content may well be readable once Redis answers.
 */
export class ContentUnreadableError extends Error {
  constructor(noticeId: string, cause: unknown) {
    // JSON.parse quotes the text it could not read, and that text is the message body.
    const why = cause instanceof SyntaxError ? 'it is not JSON' : cause instanceof Error ? cause.message : String(cause);
    super(`the content of notice ${noticeId} cannot be opened: ${why}`, { cause: cause instanceof SyntaxError ? undefined : cause });
    this.name = 'ContentUnreadableError';
  }
}

export type CreateNoticeResult = { created: true } | { created: false; existingId: string; bodyHash: string };

/** Field name of a channel's record in the notice hash: `emailAttemptId`, `smsStatus`, ... */
export function channelField(channel: Channel, name: keyof ChannelRecord): ChannelField {
  return `${channel}${name[0]!.toUpperCase()}${name.slice(1)}` as ChannelField;
}

/** Typed access to notices, their decision log and the due index. All writes go through scripts. */
export class NoticeStore {
  readonly keys: Keys;
  /** The master's replicas, for the writes that wait for one (src/store/replicas.ts). */
  readonly replicas: ReplicaWatch;
  private readonly redis: RedisClient & HeraldScripts;
  private readonly placement: NoticePlacement;

  /**
   * `keyring` opens sealed content; only the process that sends (the worker) needs it.
   * `replicasExpected`: the topology has replicas (Sentinel, Cluster), so a write that finds
   * none is counted as unreplicated. `contentTtlMs` (HERALD_CONTENT_TTL): a transition after
   * which nothing more is sent (`endsSending`) keeps the content no longer than its creation
   * plus this; a store without it (one that only reads) leaves the expiry creation set.
   */
  constructor(
    redis: RedisClient,
    prefix: string,
    private readonly options: { keyring?: Keyring; replicasExpected?: boolean; contentTtlMs?: number } = {},
  ) {
    this.redis = defineScripts(redis);
    this.keys = new Keys(prefix);
    this.replicas = new ReplicaWatch(redis, { expected: options.replicasExpected ?? false });
    this.placement = new NoticePlacement(redis);
  }

  /** The shard of a new notice (one without an idempotency record to follow): src/store/placement.ts. */
  newShard(): number {
    return this.placement.shard();
  }

  async create(input: CreateNoticeInput): Promise<CreateNoticeResult> {
    const k = this.keys.noticeKeysFor(input.id);
    const idem = input.idempotency;
    // Without an Idempotency-Key the script does not touch this key, but it is named in the notice's slot all the same.
    const idemKey = this.keys.idempotency(idem ? idem.shard : shardFor(input.id), idem ? idem.keyHash : 'unused');
    const lists: (string | number)[] = [];
    const fields = Object.entries(input.fields).flatMap(([field, value]) => [field, String(value)]);
    lists.push(fields.length / 2, ...fields, input.entries.length);
    for (const entry of input.entries) {
      const flat = encodeEntry(entry);
      lists.push(flat.length, ...flat);
    }
    const reply = await this.replicated('accept', k.metrics, metricIncrements(input.entries, 'accepted'), (on, counted) =>
      on.createNotice(
        k.notice,
        k.content,
        k.events,
        k.log,
        k.due,
        idemKey,
        k.metrics,
        k.stats,
        this.keys.notices(shardOfNoticeId(input.id)!),
        this.keys.addresses(shardOfNoticeId(input.id)!),
        input.id,
        input.at,
        input.contentTtlMs,
        idem?.ttlMs ?? 0,
        idem?.bodyHash ?? '',
        JSON.stringify(input.content),
        input.due,
        input.createdAt,
        (input.addressMembers ?? []).join(' '),
        ...lists,
        counted.length / 2,
        ...counted,
      ),
    );
    const code = Number(reply[0]);
    if (code === 1) return { created: true };
    if (code === 0) return { created: false, existingId: String(reply[1]), bodyHash: String(reply[2]) };
    throw new Error(`notice ${input.id} exists already`);
  }

  /** The notice an idempotency key created, with the hash of the body it was created from. */
  async findIdempotent(shard: number, keyHash: string): Promise<{ noticeId: string; bodyHash: string } | null> {
    const [noticeId, bodyHash] = await this.redis.hmget(this.keys.idempotency(shard, keyHash), 'noticeId', 'bodyHash');
    return noticeId && bodyHash ? { noticeId, bodyHash } : null;
  }

  /**
   * Runs one named, guarded transition (lua/transition-8.lua). Its guards, fields, entries and
   * metric increments go flat, each list led by its length, so that the script decodes no JSON.
   * A transition whose entries end what Herald sends (`endsSending`) also brings the content's
   * expiry back to createdAt + HERALD_CONTENT_TTL (at once when that has passed), in the same step.
   * `read`: the reply brings the notice as the step left it, for a step that goes on with it.
   */
  async transition(id: string, now: number, at: string, spec: TransitionSpec, opts: { read?: boolean } = {}): Promise<TransitionResult> {
    const { from, to } = movesOf(spec);
    const k = this.keys.noticeKeysFor(id);
    const lists: (string | number)[] = [];
    const pairs = (record: Partial<Record<string, string | number>> | undefined) => {
      const flat = Object.entries(record ?? {}).flatMap(([field, value]) => [field, String(value)]);
      lists.push(flat.length / 2, ...flat);
    };
    pairs(spec.eq);
    pairs(spec.set);
    lists.push(spec.unset?.length ?? 0, ...(spec.unset ?? []));
    lists.push(spec.entries.length);
    for (const entry of spec.entries) {
      const flat = encodeEntry(entry);
      lists.push(flat.length, ...flat);
    }
    const contentTtl = this.options.contentTtlMs !== undefined && spec.entries.some(endsSending) ? this.options.contentTtlMs : '';
    const script = (on: HeraldScripts | ScriptPipeline, increments: (string | number)[]) =>
      on.transition(
        k.notice,
        k.events,
        k.log,
        k.due,
        k.metrics,
        k.stats,
        k.content,
        k.contentExpiry,
        id,
        now,
        at,
        from === '*' ? '*' : from.join(','),
        to ?? '',
        spec.due === undefined ? '' : String(spec.due),
        spec.reached ?? '',
        contentTtl,
        ...lists,
        increments.length / 2,
        ...increments,
        ...(opts.read ? ['1'] : []),
      );
    const increments = metricIncrements(spec.entries, to);
    const replicated = (TRANSITIONS[spec.name] as Transition).replicated;
    const reply = replicated
      ? await this.replicated(replicated, k.metrics, increments, script)
      : ((await script(this.redis, increments)) as unknown[]);
    switch (Number(reply[0])) {
      case 1:
        return reply[2] === undefined
          ? { ok: true, state: String(reply[1]) as NoticeState }
          : { ok: true, state: String(reply[1]) as NoticeState, notice: parseNotice(id, hashOf(reply[2] as string[])) };
      case -1:
        return { ok: false, reason: 'missing' };
      case -2:
        return { ok: false, reason: 'state', state: String(reply[1]) as NoticeState };
      case -3:
        return { ok: false, reason: 'guard', field: String(reply[1]), value: String(reply[2]) };
      default:
        throw new Error(`transition script answered ${JSON.stringify(reply)}`);
    }
  }

  /**
   * Runs a script whose write must survive a failover (src/store/replicas.ts): where the master
   * has a replica, `WAIT 1 <ms>` follows it in the same pipeline, one round trip; where it has
   * none, the write goes ahead, counted as unreplicated by the script itself (so only when it
   * applied). A WAIT that times out lets it go ahead too, counted. A WAIT that fails (the
   * connection broke) throws, as the script's own failure would: the caller does not know the
   * write is safe, and treats it as not done (a 503; a send attempt left in doubt).
   */
  private async replicated(
    write: ReplicatedWrite,
    metricsKey: string,
    increments: (string | number)[],
    script: (on: HeraldScripts | ScriptPipeline, increments: (string | number)[]) => unknown,
  ): Promise<unknown[]> {
    const plan = await this.replicas.plan(write, metricsKey);
    if (!plan.wait) {
      const counted = plan.count ? [...increments, plan.count, 1] : increments;
      return (await script(this.redis, counted)) as unknown[];
    }
    const pipeline = this.redis.pipeline() as ScriptPipeline;
    script(pipeline, increments);
    pipeline.wait(1, plan.waitMs);
    const [[scriptError, reply], [waitError, acked]] = (await pipeline.exec()) as [[Error | null, unknown], [Error | null, unknown]];
    if (scriptError) throw scriptError;
    if (waitError) throw waitError;
    if (Number(acked) < 1 && Number((reply as unknown[])[0]) === 1) {
      // The replica is gone or lagging: the next write reads INFO again rather than wait once more.
      this.replicas.forget();
      await this.redis.hincrby(metricsKey, unreplicatedField(write, 'timeout'), 1).catch(() => undefined);
    }
    return reply as unknown[];
  }

  /**
   * Counts a provider webhook event that recorded nothing (an unknown message, a duplicate, a
   * notice that has moved past it) in /metrics. Spread over the shards by the message's ID.
   */
  async countWebhookEvent(provider: string, outcome: string, messageId: string): Promise<void> {
    await this.redis.hincrby(this.keys.metrics(shardOfKey(messageId)), `whevent|${provider}|${outcome}`, 1);
  }

  /** The notice as stored; the domain's `readNotice` (src/notice/notice.ts) adds its plans. */
  async get(id: string): Promise<StoredNotice | null> {
    const hash: Partial<Record<NoticeField, string>> = await this.redis.hgetall(this.keys.notice(id));
    return hash.state ? parseNotice(id, hash) : null;
  }

  /**
   * The notice and its stored content, read in the same tick (one round trip on a pipelining
   * connection); the content is opened only by `content(id, read)`, when a step needs it.
   */
  async getWithContent(id: string): Promise<{ notice: StoredNotice | null; content: StoredContentRead }> {
    const content: Promise<string | null> = this.redis.get(this.keys.content(id));
    // Its failure (a legacy hash's WRONGTYPE) is handled where it is used.
    content.catch(() => undefined);
    return { notice: await this.get(id), content };
  }

  /**
   * The notice's content, opened when sealed; null once it has expired. Throws
   * ContentUnreadableError when it is there but cannot be opened. `read`: the content as
   * `getWithContent` read it, instead of reading it again.
   */
  async content(id: string, read?: StoredContentRead): Promise<NoticeContent | null> {
    const key = this.keys.content(id);
    let json: string | null;
    let stored: Record<string, string> | undefined;
    try {
      json = await (read ?? this.redis.get(key));
    } catch (error) {
      // Content stored before it became one string was a hash of the same fields.
      if (!(error instanceof Error && error.message.startsWith('WRONGTYPE'))) throw error;
      json = null;
      stored = await this.redis.hgetall(key);
    }
    try {
      stored ??= json === null ? {} : (JSON.parse(json) as Record<string, string>);
      return openContent(this.options.keyring, id, stored);
    } catch (error) {
      throw new ContentUnreadableError(id, error);
    }
  }

  /** Ms the content has left: -2 when it is gone, -1 when it has no expiry (Redis's PTTL). */
  contentTtlMs(id: string): Promise<number> {
    return this.redis.pttl(this.keys.content(id));
  }

  async deleteContent(id: string): Promise<void> {
    await this.redis.del(this.keys.content(id));
  }

  /** The notice's decision log, in order, as far as Redis still holds it. */
  async events(id: string): Promise<StoredEntry[]> {
    const ids = await this.eventIds(id);
    const found = await this.logEntries(shardFor(id), ids);
    return ids.flatMap((entryId) => found.get(entryId) ?? []);
  }

  /** The notice's first decision-log entry (`notice.accepted`), while Redis holds it. */
  async firstEntry(id: string): Promise<StoredEntry | undefined> {
    const first = await this.redis.lindex(this.keys.events(id), 0);
    if (first === null) return undefined;
    return (await this.logEntries(shardFor(id), [first])).get(first);
  }

  /** The IDs of the notice's decision-log entries, in order (its events list); none once it is retired. */
  eventIds(id: string): Promise<string[]> {
    return this.redis.lrange(this.keys.events(id), 0, -1);
  }

  /** Those of the given entries the shard's log stream still holds, by ID, in one round trip. */
  async logEntries(shard: number, ids: readonly string[]): Promise<Map<string, StoredEntry>> {
    const found = new Map<string, StoredEntry>();
    if (ids.length === 0) return found;
    const pipeline = this.redis.pipeline();
    for (const entryId of ids) pipeline.xrange(this.keys.log(shard), entryId, entryId);
    for (const [error, rows] of (await pipeline.exec()) ?? []) {
      if (error) throw error;
      for (const [entryId, fields] of rows as [string, string[]][]) found.set(entryId, decodeEntry(entryId, fields));
    }
    return found;
  }

  /** The shard's log entries from `start` (a stream ID, `(` for after it) up to `end`, at most `count`. */
  async logRange(shard: number, start: string, end: string, count: number): Promise<StoredEntry[]> {
    const rows = await this.redis.xrange(this.keys.log(shard), start, end, 'COUNT', count);
    return rows.map(([entryId, fields]) => decodeEntry(entryId, fields));
  }

  /**
   * Lets go of a finished notice whose record the archive holds (lua/retireNotice-8.lua):
   * 'retired', 'changed' (it has entries the record lacks), or 'gone' (retired before).
   * `addressMembers`: its members of the address index, which leave with it.
   */
  async retire(
    id: string,
    entryCount: number,
    statsMember: string,
    addressMembers: readonly string[] = [],
  ): Promise<'retired' | 'changed' | 'gone'> {
    const shard = shardOfNoticeId(id)!;
    const reply = await this.redis.retireNotice(
      this.keys.notice(id),
      this.keys.events(id),
      this.keys.created(shard),
      this.keys.contentExpiry(shard),
      this.keys.retire(shard),
      this.keys.metrics(shard),
      this.keys.notices(shard),
      this.keys.addresses(shard),
      id,
      entryCount,
      statsMember,
      addressMembers.join(' '),
    );
    return reply === 1 ? 'retired' : reply === 0 ? 'changed' : 'gone';
  }

  /** Notices of one shard whose due time is at or before `upTo`, oldest first. */
  async dueNotices(shard: number, upTo: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.due(shard), '-inf', upTo, 'LIMIT', 0, limit);
  }

  /** Whether the notice is in its shard's due index: something is still to be done for it. */
  async isDue(id: string): Promise<boolean> {
    return (await this.redis.zscore(this.keys.noticeKeysFor(id).due, id)) !== null;
  }

  /** The state of each notice (undefined for one Redis no longer holds), in one round trip. */
  async statesOf(ids: readonly string[]): Promise<(NoticeState | undefined)[]> {
    const replies = await execAll(
      this.redis,
      ids.map((id) => this.stateRead(id)),
    );
    return ids.map((_, i) => stateOfReply(replies[i]?.[1]));
  }

  /**
   * The command that reads a notice's state (statesOf's, whose reply stateOfReply reads), for a
   * caller that sends it in a round trip of its own making: a job's move back (queues/index.ts).
   */
  stateRead(id: string): [command: string, key: string, field: string] {
    return ['hget', this.keys.notice(id), 'state'];
  }

  /** Moves a live notice's due time (only when it is still in the due index). */
  async setDue(id: string, at: number): Promise<void> {
    await this.redis.zadd(this.keys.noticeKeysFor(id).due, 'XX', at, id);
  }

  /** Takes the reconciler's lease on a notice; false when another worker holds it. */
  async tryLease(id: string, owner: string, ms: number): Promise<boolean> {
    return (await this.redis.set(this.keys.lease(id), owner, 'PX', ms, 'NX')) === 'OK';
  }

  /**
   * Releases the lease if `owner` still holds it, in one script (releaseLease-1.lua): once it
   * expired and another worker took it, it is left to that worker. True when it was released.
   */
  async releaseLease(id: string, owner: string): Promise<boolean> {
    return (await this.redis.releaseLease(this.keys.lease(id), owner)) === 1;
  }

  /** Finished notices whose time to leave Redis has come (`retire` members scored at or before `now`). */
  awaitingRetirement(now: number): Promise<number> {
    return this.sumOverShards((shard) => ['zcount', this.keys.retire(shard), '-inf', now]);
  }

  /** Number of live (not terminal) notices per shard, for readiness and metrics. */
  liveCount(): Promise<number> {
    return this.sumOverShards((shard) => ['zcard', this.keys.due(shard)]);
  }

  /** One count per shard, in one round trip, summed. */
  private async sumOverShards(count: (shard: number) => Command): Promise<number> {
    const replies = await execAll(
      this.redis,
      Array.from({ length: SHARD_COUNT }, (_, shard) => count(shard)),
    );
    return replies.reduce((sum, [, n]) => sum + Number(n ?? 0), 0);
  }
}

/** The states a transition may start from (the table's, narrowed by the step) and the state it ends in. */
function movesOf(spec: TransitionSpec): { from: readonly NoticeState[] | '*'; to: NoticeState | undefined } {
  const transition: Transition = TRANSITIONS[spec.name];
  if (spec.onlyFrom === undefined) return { from: transition.from, to: transition.to };
  const allowed = transition.from;
  const outside = allowed === '*' ? [] : spec.onlyFrom.filter((state) => !allowed.includes(state));
  // A step asking for more than its transition allows is a bug in the step, never a race.
  if (outside.length > 0) throw new Error(`transition ${spec.name} does not start from ${outside.join(', ')}`);
  return { from: spec.onlyFrom, to: transition.to };
}

/**
 * The entries after which Herald sends nothing more for a notice: it has finished
 * (`notice.completed`: delivered, failed, canceled, blocked), or it follows its SMS no further
 * (`sms.unconfirmed`). Its content is then kept no longer than HERALD_CONTENT_TTL, and the
 * notice is due to retire.
 */
export function endsSending(entry: { type: string }): boolean {
  return entry.type === 'notice.completed' || entry.type === 'sms.unconfirmed';
}

/** The notice-hash field that records the content purge (`content.purged`), so that it is recorded once. */
export const CONTENT_PURGED_FIELD: NoticeField = 'contentPurgedAt';

const HEADER_FIELDS = new Set(['type', 'noticeId', 'at', 'seq']);

/** Flattens an entry for the script: [type, field, JSON value, ...]; undefined fields are left out. */
export function encodeEntry(entry: LogEntry): string[] {
  const flat: string[] = [entry.type];
  for (const [field, value] of Object.entries(entry)) {
    if (field === 'type' || value === undefined) continue;
    if (HEADER_FIELDS.has(field)) throw new Error(`log entry field "${field}" is written by Herald itself`);
    flat.push(field, JSON.stringify(value));
  }
  return flat;
}

export function decodeEntry(id: string, fields: string[]): StoredEntry {
  const entry: Record<string, unknown> = { id };
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const field = fields[i]!;
    const raw = fields[i + 1]!;
    if (field === 'seq') entry.seq = Number(raw);
    else if (HEADER_FIELDS.has(field)) entry[field] = raw;
    else entry[field] = JSON.parse(raw);
  }
  return entry as unknown as StoredEntry;
}

/** The state a reply to stateRead's command holds: undefined for a notice Redis no longer holds. */
export function stateOfReply(reply: unknown): NoticeState | undefined {
  return typeof reply === 'string' ? (reply as NoticeState) : undefined;
}

/** A hash as a script's HGETALL gives it: field, value, field, value, ... */
function hashOf(flat: string[]): Partial<Record<NoticeField, string>> {
  const hash: Partial<Record<string, string>> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) hash[flat[i]!] = flat[i + 1];
  return hash;
}

/** The notice `id` as its hash holds it (the ID is the key's, not a field: earlier versions also stored it as `id`). */
function parseNotice(id: string, hash: Partial<Record<NoticeField, string>>): StoredNotice {
  const num = (field: NoticeField): number | undefined => (hash[field] === undefined ? undefined : Number(hash[field]));
  const channel = (c: Channel): ChannelRecord => ({
    idempotencyKey: hash[channelField(c, 'idempotencyKey')],
    attemptId: hash[channelField(c, 'attemptId')],
    attempts: num(channelField(c, 'attempts')) ?? 0,
    attemptStartedAt: num(channelField(c, 'attemptStartedAt')),
    attemptSettled: hash[channelField(c, 'attemptSettled')] === '1',
    attemptInDoubt: hash[channelField(c, 'attemptInDoubt')] === '1',
    providerMessageId: hash[channelField(c, 'providerMessageId')],
    status: hash[channelField(c, 'status')],
    providerStatus: hash[channelField(c, 'providerStatus')],
    lastObservedAt: num(channelField(c, 'lastObservedAt')),
    nextCheckAt: num(channelField(c, 'nextCheckAt')),
    checksDone: num(channelField(c, 'checksDone')) ?? 0,
    provider: hash[channelField(c, 'provider')],
  });
  return {
    id,
    state: hash.state as NoticeState,
    seq: Number(hash.seq ?? 0),
    category: hash.category!,
    recipientId: hash.recipientId!,
    email: hash.email,
    phone: hash.phone,
    region: hash.region,
    createdAt: Number(hash.createdAt),
    deadline: Number(hash.deadline),
    policyVersion: Number(hash.policyVersion ?? 0),
    emailPolicy: (hash.emailPolicy ?? 'allowed') as PolicyOutcome,
    providerTimeoutMs: Number(hash.providerTimeoutMs),
    // Plans are stored as their few numbers (small values keep the hash a compact listpack).
    pollFirstMs: Number(hash.pollFirstMs),
    pollIntervalMs: Number(hash.pollIntervalMs),
    smsPlanAt: num('smsPlanAt'),
    smsPlanFloorMs: num('smsPlanFloorMs'),
    smsPlanMax: num('smsPlanMax'),
    contentPurgedAt: num(CONTENT_PURGED_FIELD),
    idempotencyKey: hash.idempotencyKey,
    complianceDeadline: num('complianceDeadline'),
    fallbackReason: hash.fallbackReason,
    fallbackDecidedAt: num('fallbackDecidedAt'),
    smsSendNotBefore: num('smsSendNotBefore'),
    smsFrom: hash.smsFrom,
    smsSearchEndedAt: num('smsSearchEndedAt'),
    smsSegments: num('smsSegments') ?? 0,
    lateWebhooks: num('lateWebhooks') ?? 0,
    tenant: hash.tenant ?? 'default',
    emailChannel: channel('email'),
    smsChannel: channel('sms'),
  };
}
