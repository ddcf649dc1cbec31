import { SHARD_COUNT, shardOfNoticeId } from '../notice/ids.js';
import type { Channel } from '../providers/types.js';
import { SLOT_COUNT, slotOf } from './slots.js';

/** The keys of one notice and of its shard that a transition touches. */
export interface NoticeKeys {
  notice: string;
  events: string;
  log: string;
  due: string;
  metrics: string;
  stats: string;
  content: string;
  contentExpiry: string;
}

/**
 * Redis key layout. Every key of a notice carries its shard's hash tag `{sN}`, so that one
 * transition script touches one Redis Cluster slot; the shard's decision log, due index and
 * idempotency records share that tag. Recipient policies have their own tag per recipient.
 */
export class Keys {
  constructor(readonly prefix: string) {}

  private shard(shard: number): string {
    return `${this.prefix}:{s${shard}}`;
  }

  /** The hash holding a notice's state and fields. */
  notice(id: string): string {
    return `${this.shard(shardFor(id))}:notice:${id}`;
  }
  /** The notice's message content, kept only for the content TTL. */
  content(id: string): string {
    return `${this.shard(shardFor(id))}:content:${id}`;
  }
  /** A list of the notice's decision-log entry IDs, in order. */
  events(id: string): string {
    return `${this.shard(shardFor(id))}:events:${id}`;
  }
  /** The reconciler's lease on a notice. */
  lease(id: string): string {
    return `${this.shard(shardFor(id))}:lease:${id}`;
  }
  /** An API key made by `herald keys create` (src/store/api-keys.ts): its tenant, scopes, name, times; never the secret. */
  apiKey(id: string): string {
    return `${this.prefix}:{keys}:key:${id}`;
  }
  /** The key ID of an API key's secret, by the SHA-256 of the secret. */
  apiKeyBySecret(sha256Hex: string): string {
    return `${this.prefix}:{keys}:secret:${sha256Hex}`;
  }
  /** Every API key made by `herald keys create`, by creation time. */
  get apiKeys(): string {
    return `${this.prefix}:{keys}:all`;
  }
  /** An event endpoint of a caller (src/store/event-endpoints.ts): its URL, events, secret and state. */
  eventEndpoint(id: string): string {
    return `${this.prefix}:{evt}:endpoint:${id}`;
  }
  /** Every event endpoint, by creation time. */
  get eventEndpoints(): string {
    return `${this.prefix}:{evt}:endpoints`;
  }
  /** An endpoint's recent delivery attempts, newest first (capped). */
  eventDeliveries(id: string): string {
    return `${this.prefix}:{evt}:deliveries:${id}`;
  }
  /** Events queued for an endpoint and not yet delivered (or given up), scored by when they happened. */
  get eventsUndelivered(): string {
    return `${this.prefix}:{evt}:undelivered`;
  }
  /** The event deliveries' counters, by outcome, read by /metrics. */
  get eventMetrics(): string {
    return `${this.prefix}:{evt}:metrics`;
  }
  /** The shard's decision-log stream (append-only; trimmed only below what the archive holds). */
  log(shard: number): string {
    return `${this.shard(shard)}:log`;
  }
  /** Log-mirror batches handed out and not yet acknowledged (src/store/log-mirror.ts). */
  mirrorBatches(shard: number): string {
    return `${this.shard(shard)}:mirror-batches`;
  }
  /** The shard's archive chain: last batch handed out, genesis, since, v1through, v2since, tip (src/store/log-mirror.ts). */
  archiveChain(shard: number): string {
    return `${this.shard(shard)}:archive-chain`;
  }
  /** Sorted set of the shard's live notices, scored by when each must next be looked at. */
  due(shard: number): string {
    return `${this.shard(shard)}:due`;
  }
  /**
   * Sorted set of the shard's notices by creation time (ms), written by earlier versions for
   * /v1/stats; now read only by the stats backfill and `indexUnretired`, and emptied as those
   * notices retire or pass HERALD_STATS_RETENTION.
   */
  created(shard: number): string {
    return `${this.shard(shard)}:created`;
  }
  /**
   * Sorted set of every notice of the shard that Redis holds, all scored 0 so that members sort
   * by ID, which is by creation time (src/store/notice-index.ts); a notice leaves it as it retires.
   */
  notices(shard: number): string {
    return `${this.shard(shard)}:notices`;
  }
  /**
   * Sorted set of the address lookup's index of the shard's live notices (src/store/address-index.ts):
   * members `<HMAC of the address>:<notice ID>`, all scored 0, so that one address's notices are
   * a lexicographic range, by creation; a notice's members leave with it as it retires.
   */
  addresses(shard: number): string {
    return `${this.shard(shard)}:addresses`;
  }
  /** Sorted set of the shard's finished notices, scored by when Redis may let go of them (src/retention/retire.ts). */
  retire(shard: number): string {
    return `${this.shard(shard)}:retire`;
  }
  /** Sorted set of the shard's notices by when their content expires (src/retention/content-purge.ts). */
  contentExpiry(shard: number): string {
    return `${this.shard(shard)}:content-expiry`;
  }
  /** The shard's /v1/stats counters by creation hour (src/store/lua/includes/countStats.lua). */
  stats(shard: number): string {
    return `${this.shard(shard)}:stats`;
  }
  /** Which web process exports the cluster-wide series on /metrics, as a lease (src/store/metrics-owner.ts). */
  get metricsOwner(): string {
    return `${this.prefix}:metrics-owner`;
  }
  /** When the stats backfill of the `created` indexes last completed (src/notice/stats.ts). */
  get statsBackfilled(): string {
    return `${this.prefix}:stats-backfilled`;
  }
  /** When the notices indexes were filled with the notices of earlier versions (src/store/notice-index.ts). */
  get noticesIndexed(): string {
    return `${this.prefix}:notices-indexed`;
  }
  /** When the address index was filled with the live notices of earlier versions (src/store/address-index.ts). */
  get addressesIndexed(): string {
    return `${this.prefix}:addresses-indexed`;
  }
  /** The shard's metric counters (src/store/metrics.ts). */
  metrics(shard: number): string {
    return `${this.shard(shard)}:metrics`;
  }
  /** Idempotency record of one API key + Idempotency-Key pair (hashed). */
  idempotency(shard: number, hash: string): string {
    return `${this.shard(shard)}:idem:${hash}`;
  }
  /** A recipient's versioned policy. */
  recipientPolicy(recipientId: string, tenant = 'default'): string {
    // The default tenant keeps the key of before tenants; a recipient ID has no "/", a tenant none either.
    return tenant === 'default' ? `${this.prefix}:{r:${recipientId}}:policy` : `${this.prefix}:{r:${tenant}/${recipientId}}:policy`;
  }
  /** An admin login session, by the SHA-256 of its cookie value (src/http/admin-auth.ts). */
  adminSession(hash: string): string {
    return `${this.prefix}:{adm}:session:${hash}`;
  }
  /** The suppression list of one channel: normalized address → record (src/store/suppressions.ts). */
  suppressions(channel: Channel): string {
    return `${this.prefix}:{sup}:${channel}`;
  }
  /** Where the per-key rate limit (`@fastify/rate-limit`) keeps its counters: `<namespace><api key id>`. */
  get rateLimitNamespace(): string {
    return `${this.prefix}:{rl}:`;
  }
  /**
   * A provider webhook's signature that may be accepted once (Mailgun's timestamp and token), by
   * the digest of its identity, for as long as the signature is honoured (src/store/webhook-once.ts).
   */
  webhookOnce(provider: string, digest: string): string {
    return `${this.prefix}:{wh}:once:${provider}:${digest}`;
  }
  /**
   * The status reads a provider has had in one second (`window`, seconds since the epoch), all
   * workers together, and the key that holds them all back for a provider's Retry-After
   * (`window` `pause`): src/store/status-reads.ts.
   */
  statusReads(provider: string, window: number | 'pause'): string {
    return `${this.prefix}:{lim}:status:${provider}:${window}`;
  }
  /** Failed authentications of one client address (an IPv6 /64) in the current minute (src/http/auth-failures.ts). */
  authFailures(ip: string): string {
    return `${this.prefix}:{rl}:authfail:${ip}`;
  }
  /**
   * A feed provider's latest observation of one message (src/store/provider-feed.ts). Each
   * message has its own hash tag, so that feed records spread over a cluster's slots.
   */
  feedObservation(provider: string, messageId: string): string {
    return `${this.prefix}:{f:${provider}:${messageId}}:obs`;
  }
  /** The messages a feed provider's events carried one idempotency tag on (by its digest), scored by send time. */
  feedTag(provider: string, tagDigest: string): string {
    return `${this.prefix}:{f:${provider}:${tagDigest}}:tag`;
  }
  /** When the feed sweep last read a feed provider's events queue to its end (ms): what an absence rests on. */
  feedRead(provider: string): string {
    return `${this.prefix}:{f:${provider}}:read`;
  }
  /**
   * BullMQ's prefix of the sweep queues, and of every notice queue when HERALD_QUEUE_PARTITIONS
   * is 1: all of them in the one slot of `{q}`.
   */
  get queuePrefix(): string {
    return `${this.prefix}:{q}`;
  }
  /**
   * BullMQ's prefix of each partition of the notice queues: with one partition the
   * unpartitioned `queuePrefix`; with more, partition i carries its own hash tag
   * (queuePartitionTags), so that the partitions spread over a Cluster's masters.
   */
  queuePartitionPrefixes(count: number): string[] {
    return count === 1 ? [this.queuePrefix] : queuePartitionTags(count).map((tag) => `${this.prefix}:{${tag}}`);
  }

  /** The keys a notice's transition touches (lua/transition-8.lua), all in the notice's shard. */
  noticeKeysFor(id: string): NoticeKeys {
    const shard = shardFor(id);
    return {
      notice: this.notice(id),
      events: this.events(id),
      log: this.log(shard),
      due: this.due(shard),
      metrics: this.metrics(shard),
      stats: this.stats(shard),
      content: this.content(id),
      contentExpiry: this.contentExpiry(shard),
    };
  }

  allShards(): number[] {
    return Array.from({ length: SHARD_COUNT }, (_, i) => i);
  }
}

/** The shard of a notice ID; throws for anything else. */
export function shardFor(id: string): number {
  const shard = shardOfNoticeId(id);
  if (shard === undefined) throw new Error(`not a notice ID: ${id}`);
  return shard;
}

/** How many candidates the search for a partition's hash tag tries. */
const TAG_CANDIDATES = 4096;

/**
 * The hash tags of `count` queue partitions: partition i's is `q<count>.<i>.<n>` for the first n
 * (in base 36) whose slot is at or just above slot i·16384/count, i.e. nearest it from above
 * among the first TAG_CANDIDATES. A Cluster split evenly over `count` masters (as
 * `redis-cli --cluster create` splits it) serves each partition from the master whose slot range
 * starts there. The search is deterministic, so every process finds the same tags; `count` is
 * part of the tag, so the partitions of two counts never share a queue.
 */
export function queuePartitionTags(count: number): string[] {
  return Array.from({ length: count }, (_, i) => {
    const target = Math.ceil((i * SLOT_COUNT) / count);
    let best = '';
    let bestAbove = Infinity;
    for (let n = 0; n < TAG_CANDIDATES && bestAbove > 0; n += 1) {
      const tag = `q${count}.${i}.${n.toString(36)}`;
      const above = (slotOf(`{${tag}}`) - target + SLOT_COUNT) % SLOT_COUNT;
      if (above < bestAbove) [best, bestAbove] = [tag, above];
    }
    return best;
  });
}

/** The slot of each shard's hash tag `{s<N>}`, by shard. */
const SHARD_SLOTS = Array.from({ length: SHARD_COUNT }, (_, shard) => slotOf(`{s${shard}}`));

/** The slot of a shard's keys. */
export function shardSlot(shard: number): number {
  return SHARD_SLOTS[shard]!;
}

/** The first slot of each partition's share of the slot range, by partition count. */
const partitionStarts = new Map<number, number[]>();

/**
 * The queue partition of a shard: the one whose share of the slot range holds the shard's slot,
 * partition i of P starting at slot round(i·16384/P) — where `redis-cli --cluster create` starts
 * the i-th of P masters, and just below partition i's tag (queuePartitionTags). On a Cluster
 * split evenly over P masters a notice's jobs are then served by its shard's master, so each
 * master does all the work of the notices it holds. The same in every process; it depends on the
 * count only, never on the live topology.
 */
export function partitionOfShard(shard: number, count: number): number {
  let starts = partitionStarts.get(count);
  if (!starts) {
    starts = Array.from({ length: count }, (_, i) => Math.round((i * SLOT_COUNT) / count));
    partitionStarts.set(count, starts);
  }
  const slot = shardSlot(shard);
  let partition = 0;
  while (partition + 1 < count && starts[partition + 1]! <= slot) partition += 1;
  return partition;
}

/** The queue partition of a notice: its shard's (partitionOfShard). */
export function partitionOfNotice(id: string, count: number): number {
  return partitionOfShard(shardFor(id), count);
}

/**
 * Where versions before partitionOfShard put a notice's jobs: shard modulo the count. Jobs they
 * queued stay there after an upgrade (every worker consumes every partition), so finding or
 * removing a notice's job looks there too.
 */
export function earlierPartitionOfNotice(id: string, count: number): number {
  return shardFor(id) % count;
}
