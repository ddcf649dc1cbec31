import { randomBytes, randomFillSync } from 'node:crypto';
import { sha256 } from '../digest.js';

/**
 * Notices are spread over a fixed number of shards. Every key of one notice carries its shard's
 * hash tag, so each transition script touches one Redis Cluster slot, and each shard has one
 * decision-log stream. The shard is written into the notice ID, so changing this number later
 * never moves an existing notice.
 */
export const SHARD_COUNT = 16;

const ID_PATTERN = /^ntc_([0-9a-f]{2})([0-9a-z]{26})$/;

/** A new notice ID in `shard`: `ntc_` + two hex digits of shard + a time-ordered random part. */
export function newNoticeId(shard: number, now: number): string {
  return `ntc_${shard.toString(16).padStart(2, '0')}${timeOrderedToken(now)}`;
}

/** The shard of a notice ID, or undefined when the ID is not one of Herald's. */
export function shardOfNoticeId(id: string): number | undefined {
  const match = ID_PATTERN.exec(id);
  if (!match) return undefined;
  const shard = parseInt(match[1]!, 16);
  return shard < SHARD_COUNT ? shard : undefined;
}

/**
 * When a notice was created, from its ID (`ntc_` + 2 hex digits of shard + 10 base-36 digits
 * of milliseconds + 16 random), or undefined for anything else.
 */
export function noticeCreatedAt(noticeId: string): number | undefined {
  if (shardOfNoticeId(noticeId) === undefined) return undefined;
  const ms = parseInt(noticeId.slice(6, 16), 36);
  return Number.isFinite(ms) ? ms : undefined;
}

/** A stable shard for any string (an idempotency key), so a replay lands where the original did. */
export function shardOfKey(key: string): number {
  return sha256(key).readUInt32BE(0) % SHARD_COUNT;
}

/** Any shard, uniformly: where a new notice goes on one Redis node. */
export function randomShard(): number {
  return randomBelow(SHARD_COUNT);
}

/** A uniform random integer in [0, n), for n ≤ 256: bytes of the pool, those above the last whole multiple of n drawn again. */
export function randomBelow(n: number): number {
  const limit = 256 - (256 % n);
  for (;;) {
    const byte = randomByte();
    if (byte < limit) return byte % n;
  }
}

/**
 * Random bytes drawn from a pool filled 4 KB at a time: one call into the system's generator
 * per 256 notices instead of two per notice, which showed in the accept path's profile.
 */
const pool = Buffer.alloc(4096);
let poolUsed = pool.length;
function randomByte(): number {
  if (poolUsed === pool.length) {
    randomFillSync(pool);
    poolUsed = 0;
  }
  return pool[poolUsed++]!;
}

/** 10 base-36 characters of milliseconds, then 16 random ones: sorts by creation time. */
function timeOrderedToken(now: number): string {
  const time = now.toString(36).padStart(10, '0');
  let random = '';
  for (let i = 0; i < 16; i += 1) random += (randomByte() % 36).toString(36);
  return time + random;
}

/** A short random ID for one provider attempt. */
export function newAttemptId(): string {
  return `att_${randomBytes(9).toString('base64url')}`;
}
