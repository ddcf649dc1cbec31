import { noticeCreatedAt } from '../notice/ids.js';
import { gzipStable, sha256Hex } from '../digest.js';
import { compareIds, shardDir, STREAM_ID, type ObjectRef } from './names.js';
import { LEGACY_SEAL_VERSION, type Seal } from './seal.js';

/**
 * Where a shard's chain starts, and so what may be read unauthenticated before it: an object
 * without a seal, or with the v1 seal of earlier versions, has to be decompressed before anything
 * can be checked, and is accepted only where the chain had not begun yet, or had not begun
 * sealing with v2 yet. After that point such an object has been stripped or downgraded.
 *
 * The log mirror keeps these facts in Redis (`<prefix>:{s<N>}:archive-chain`), and copies them
 * into the archive itself as the shard's anchor: a small sealed object,
 * `<herald prefix>/s<NN>/anchor.json.gz`, written before the shard's first sealed object (and,
 * for a chain an earlier version began, on the mirror's first run), never overwritten. So a
 * reader without Redis, or after Redis lost its chain keys, still knows where the chain began;
 * one that finds neither refuses what it cannot authenticate. The name sits in the shard's
 * directory, after its day directories (letters sort after digits), and is no batch object's
 * name: every listing of objects passes over it.
 */
export interface ChainStart {
  /** Objects whose entries reach this ID must be sealed; undefined: none yet (a chain of an earlier version before its first batch). */
  genesisFirstId: string | undefined;
  /** Records of notices created since (ms) must be sealed. */
  sinceMs: number;
  /**
   * v1 seals are accepted on objects whose entries all lie at or before this ID (the last batch
   * an earlier version handed out); null: on none (the chain was sealed with v2 from its start);
   * undefined: on all (Redis's chain as an earlier version left it, before the mirror's first run).
   */
  v1ThroughId: string | null | undefined;
  /** v1 seals are accepted on records of notices created before this (ms); undefined: on all, as above. */
  v2SinceMs: number | undefined;
}

/** A chain start the mirror can write as an anchor: every fact known. */
export type AnchoredStart = ChainStart & { genesisFirstId: string; v1ThroughId: string | null; v2SinceMs: number };

const ANCHOR_NAME = 'anchor.json.gz';

/** An anchor is a few hundred bytes. */
export const MAX_ANCHOR_BYTES = 64 * 1024;

export function anchorKey(heraldPrefix: string, shard: number): string {
  return `${shardDir(heraldPrefix, shard)}${ANCHOR_NAME}`;
}

/** True when every fact of the start is known (the mirror's script has run on the shard). */
export function isAnchorable(start: ChainStart): start is AnchoredStart {
  return start.genesisFirstId !== undefined && start.v1ThroughId !== undefined && start.v2SinceMs !== undefined;
}

/** The anchor's bytes: gzip JSON, the same start always giving the same bytes. */
export function encodeAnchor(shard: number, start: AnchoredStart): { body: Buffer; sha256: string } {
  const json = JSON.stringify({
    shard,
    genesis: start.genesisFirstId,
    since: start.sinceMs,
    v1Through: start.v1ThroughId,
    v2Since: start.v2SinceMs,
  });
  const body = gzipStable(json);
  return { body, sha256: sha256Hex(body) };
}

/** The start an anchor's decompressed JSON gives, or why it is not the anchor of `shard`. */
export function decodeAnchor(json: Buffer, shard: number): AnchoredStart | string {
  let value: unknown;
  try {
    value = JSON.parse(json.toString('utf8'));
  } catch {
    return 'it is not JSON';
  }
  const anchor = (value ?? {}) as Record<string, unknown>;
  if (anchor.shard !== shard) return `it is the anchor of shard ${String(anchor.shard)}, not of shard ${shard}`;
  const { genesis, since, v1Through, v2Since } = anchor;
  if (typeof genesis !== 'string' || !STREAM_ID.test(genesis)) return 'its genesis is not a stream ID';
  if (!Number.isSafeInteger(since) || !Number.isSafeInteger(v2Since)) return 'its times are not times';
  if (v1Through !== null && (typeof v1Through !== 'string' || !STREAM_ID.test(v1Through))) return 'its v1Through is not a stream ID';
  return { genesisFirstId: genesis, sinceMs: since as number, v1ThroughId: v1Through, v2SinceMs: v2Since as number };
}

export function sameStart(a: ChainStart, b: ChainStart): boolean {
  return a.genesisFirstId === b.genesisFirstId && a.sinceMs === b.sinceMs && a.v1ThroughId === b.v1ThroughId && a.v2SinceMs === b.v2SinceMs;
}

const NO_ANCHOR = "and no anchor of its shard's chain (in the archive or in Redis) says it is older than the chain";

/**
 * Why an object that is unsigned or v1-sealed (`seal`) may not be read where it lies, given its
 * shard's chain start (null: none found); undefined when it may.
 */
export function objectAdmission(ref: ObjectRef, seal: Seal | undefined, start: ChainStart | null): string | undefined {
  if (!seal) {
    if (!start) return `it has no seal, ${NO_ANCHOR}`;
    if (start.genesisFirstId !== undefined && compareIds(ref.lastId, start.genesisFirstId) >= 0)
      return `it has no seal, though its shard's chain began before it (at ${start.genesisFirstId})`;
    return undefined;
  }
  if (seal.version !== LEGACY_SEAL_VERSION) return undefined;
  if (!start) return `it has a ${LEGACY_SEAL_VERSION} seal, ${NO_ANCHOR}`;
  if (start.v1ThroughId === null) return `it has a ${LEGACY_SEAL_VERSION} seal, though its shard's chain was sealed with v2 from its start`;
  if (start.v1ThroughId !== undefined && compareIds(ref.lastId, start.v1ThroughId) > 0)
    return `it has a ${LEGACY_SEAL_VERSION} seal, though its shard's objects after ${start.v1ThroughId} are sealed with v2`;
  return undefined;
}

/** The same for a notice record: by when its notice was created. */
export function recordAdmission(noticeId: string, seal: Seal | undefined, start: ChainStart | null): string | undefined {
  const createdAt = noticeCreatedAt(noticeId) ?? Infinity;
  if (!seal) {
    if (!start) return `it has no seal, ${NO_ANCHOR}`;
    if (createdAt >= start.sinceMs) return 'it has no seal, though its notice was created after its shard began signing';
    return undefined;
  }
  if (seal.version !== LEGACY_SEAL_VERSION) return undefined;
  if (!start) return `it has a ${LEGACY_SEAL_VERSION} seal, ${NO_ANCHOR}`;
  if (start.v2SinceMs !== undefined && createdAt >= start.v2SinceMs)
    return `it has a ${LEGACY_SEAL_VERSION} seal, though its notice was created after its shard began sealing with v2`;
  return undefined;
}
