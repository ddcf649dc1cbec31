import type { RedisClient } from './redis.js';
import { sha256Hex } from '../digest.js';
import { shardOfKey } from '../notice/ids.js';
import type { NormalizedStatus, StatusObservation } from '../providers/types.js';
import { Keys } from './keys.js';
import { channelField } from './notices.js';
import { defineScripts, type HeraldScripts } from './scripts.js';

/** One event of a feed provider, reduced to what the observation keeps (src/providers/feed-events.ts). */
export interface FeedEvent {
  messageId: string;
  /** When the provider says the event happened (ms). */
  at: number;
  /** How far along the message's life the event is; 0 for events that say nothing of delivery (opens, complaints). */
  rank: number;
  status: NormalizedStatus;
  /** The provider's own name of the event, e.g. `Delivery` or `Bounce(Permanent/General)`. */
  providerStatus: string;
  bounceType?: string;
  errorCode?: number;
  /** The provider says the address is now suppressed (permanent bounce, complaint, suppression list). */
  suppressed?: boolean;
  /** `opened`, `clicked`, `complained`: recorded, never delivery. */
  engagement?: string;
}

/**
 * What the feed sweep learned about a feed provider's messages (SES, AWS SMS), and what their
 * adapters read back: each message's latest observation, and the messages that carried an
 * idempotency tag (how a send in doubt is found). Every record expires after `ttlMs`, the
 * longest a notice may still read it (its deadline and SMS plan), so the feed cannot grow
 * Redis without bound; an observation read final (delivered, bounced, failed) is kept only
 * KEEP_AFTER_FINAL_READ_MS more, so that most records leave Redis soon after their notice ends.
 */
/** The rank of events that end a message's life (delivered, bounced, failed). */
const FINAL_RANK = 5;

/**
 * How long an observation stays once a notice has read it final: its notice is decided, and
 * only the read after quiet hours (at most a day later) may come back to it.
 */
export const KEEP_AFTER_FINAL_READ_MS = 2 * 24 * 3600_000;

export class ProviderFeedStore {
  private readonly redis: RedisClient & HeraldScripts;
  readonly keys: Keys;

  constructor(
    redis: RedisClient,
    prefix: string,
    private readonly ttlMs: number,
  ) {
    this.redis = defineScripts(redis);
    this.keys = new Keys(prefix);
  }

  /** Records one event; resolves true when the message's status changed. */
  async record(provider: string, event: FeedEvent): Promise<boolean> {
    const changed = await this.redis.recordFeedEvent(
      this.keys.feedObservation(provider, event.messageId),
      event.rank,
      Math.round(event.at),
      event.status,
      event.providerStatus,
      event.bounceType ?? '',
      event.errorCode === undefined ? '' : String(event.errorCode),
      event.suppressed ? '1' : '',
      event.engagement ?? '',
      this.ttlMs,
    );
    return changed === 1;
  }

  /** Records that `messageId`, sent at `at`, carried `tag` (Herald's idempotency key). */
  async recordTag(provider: string, tag: string, messageId: string, at: number): Promise<void> {
    const key = this.keys.feedTag(provider, sha256Hex(tag));
    await this.redis.multi().zadd(key, Math.round(at), messageId).pexpire(key, this.ttlMs).exec();
  }

  /**
   * Notes that a sweep read the provider's events queue to its end, having started at `at` (ms):
   * every event visible by then is stored. Kept as long as the observations.
   */
  async markRead(provider: string, at: number): Promise<void> {
    await this.redis.set(this.keys.feedRead(provider), String(Math.floor(at)), 'PX', this.ttlMs);
  }

  /** When a sweep last read the provider's events queue to its end (ms); undefined when none has. */
  async readThrough(provider: string): Promise<number | undefined> {
    const at = await this.redis.get(this.keys.feedRead(provider));
    return at === null ? undefined : Number(at);
  }

  /** The messages that carried `tag`, sent at or after `since` (ms), oldest first. */
  async tagged(provider: string, tag: string, since = 0): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.feedTag(provider, sha256Hex(tag)), Math.floor(since), '+inf');
  }

  /**
   * The email address Herald recorded for a notice whose email it handed to a provider at least
   * once: the one address a feed event about that notice's message may suppress. Undefined when
   * Redis holds no such notice (never one, not sent yet, or retired).
   */
  async noticeEmail(noticeId: string): Promise<string | undefined> {
    const [email, attempts] = await this.redis.hmget(this.keys.notice(noticeId), 'email', channelField('email', 'attempts'));
    return email && Number(attempts) >= 1 ? email : undefined;
  }

  /**
   * Counts what the sweep did with the messages of one receive, by outcome, in /metrics
   * (`herald_feed_messages_total`): one shard's metrics hash per provider, summed at scrape time.
   */
  async countMessages(provider: string, outcomes: ReadonlyMap<string, number>): Promise<void> {
    if (outcomes.size === 0) return;
    const key = this.keys.metrics(shardOfKey(provider));
    const pipeline = this.redis.pipeline();
    for (const [outcome, n] of outcomes) pipeline.hincrby(key, `feed|${provider}|${outcome}`, n);
    const replies = (await pipeline.exec()) ?? [];
    for (const [error] of replies) if (error) throw error;
  }

  /** The message's latest observation, or undefined when the feed has shown nothing of it yet. */
  async observation(provider: string, messageId: string): Promise<(StatusObservation & { events: number }) | undefined> {
    const key = this.keys.feedObservation(provider, messageId);
    const fields = await this.redis.hgetall(key);
    if (Object.keys(fields).length === 0) return undefined;
    // Read final, the record has done its work: it need not wait out the longest deadline.
    if (Number(fields['rank']) >= FINAL_RANK) await this.redis.pexpire(key, Math.min(this.ttlMs, KEEP_AFTER_FINAL_READ_MS));
    const engagement = Object.keys(fields)
      .filter((name) => name.startsWith('engagement:'))
      .map((name) => name.slice('engagement:'.length))
      .sort();
    const observation: StatusObservation & { events: number } = {
      // Only engagement seen so far (its Send still on the way): accepted, nothing more known.
      providerStatus: fields['providerStatus'] ?? 'NoStatusEventYet',
      status: (fields['status'] as NormalizedStatus | undefined) ?? 'pending',
      engagement,
      events: Number(fields['events'] ?? 0),
    };
    if (fields['bounceType'] !== undefined) observation.bounceType = fields['bounceType'];
    if (fields['errorCode'] !== undefined) observation.errorCode = Number(fields['errorCode']);
    if (fields['suppressed'] === '1') observation.suppressed = true;
    return observation;
  }
}
