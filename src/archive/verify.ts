import { ArchiveIntegrityError, type Archive, type LegacyRule } from './archive.js';
import type { ChainState } from '../store/log-mirror.js';
import { anchorKey } from './anchor.js';
import { compareIds, idTime, objectKey, rangeOf, type ObjectRef } from './names.js';
import { linkIds } from './seal.js';

/** What `herald audit --verify` found in one shard. */
export interface ShardVerdict {
  shard: number;
  /** Batch objects checked (seal, entries, link). */
  objects: number;
  /** Unsigned objects of earlier versions, before the chain began: read, not an error. */
  legacy: number;
  records: number;
  legacyRecords: number;
  /** The first object left after retention deleted the ones before it (its predecessor is past the retention). */
  afterRetention?: string;
  /** Links to batches Redis still holds, not archived yet. */
  unarchived: number;
  /** The shard has objects or records but no anchor, and `allowUnanchored` let it go on: from Redis's chain start, or none. */
  unanchored?: 'redis' | 'none';
  /** The first object or record that does not hold, and why; undefined when all hold. */
  broken?: { key: string; why: string };
}

export interface VerifyOptions {
  /** Objects whose entries are all older than this may be gone (HERALD_AUDIT_RETENTION). */
  retainedSince: number;
  /** The shard's chain as Redis holds it; undefined when Redis was not reachable (the tip is not checked). */
  chain: ChainState | null | undefined;
  /**
   * The batches Redis holds handed out and not yet acknowledged (a dead worker's, until another
   * claims it): a link to one of them is to an object not stored yet, not to a removed one.
   */
  pending?: ReadonlySet<string>;
  /**
   * A shard with objects or records and no anchor in the archive is broken, unless this is set
   * (`--allow-unanchored`): then its chain start is Redis's, or, without Redis, unsigned objects
   * before its first signed one are read as legacy.
   */
  allowUnanchored?: boolean;
}

/**
 * Checks one shard of the archive: its anchor (where its chain began: src/archive/anchor.ts),
 * every object in entry order (its SHA-256, its seal, its entries against its name, its link to
 * the object before it), the newest object the mirror confirmed (the tip Redis keeps), then
 * every notice record. Stops at the first that does not hold. A link to a batch Redis still
 * holds unacknowledged (a dead worker's, not yet claimed) is to an object not stored yet; once it
 * is stored, its own link is checked like any other. The anchor says which objects and records
 * may be unsigned (the legacy prefix of earlier versions, before the chain) or v1-sealed; Redis
 * is not needed for that, and is not trusted over the anchor.
 */
export async function verifyShard(archive: Archive, shard: number, opts: VerifyOptions): Promise<ShardVerdict> {
  const verdict: ShardVerdict = { shard, objects: 0, legacy: 0, unarchived: 0, records: 0, legacyRecords: 0 };
  const nameOf = (range: string) => {
    const { firstId, lastId } = linkIds({ range, digest: '' });
    return objectKey(archive.heraldPrefix, shard, firstId, lastId);
  };
  const broken = (key: string, why: string) => {
    verdict.broken = { key, why };
    return verdict;
  };
  let rule: LegacyRule;
  try {
    const anchor = await archive.readAnchor(shard);
    if (anchor) rule = anchor;
    else if (!(await holdsAnything(archive, shard))) rule = 'lenient';
    else if (!opts.allowUnanchored)
      return broken(
        anchorKey(archive.heraldPrefix, shard),
        "the anchor of the shard's chain is missing, so nothing says which of its objects may be unsigned (--allow-unanchored goes on without it)",
      );
    else {
      verdict.unanchored = opts.chain?.genesisFirstId !== undefined ? 'redis' : 'none';
      rule = opts.chain?.genesisFirstId !== undefined ? opts.chain : 'lenient';
    }
  } catch (error) {
    if (error instanceof ArchiveIntegrityError) return broken(error.key, error.problem);
    throw error;
  }
  const tip = opts.chain?.tip;
  let tipSeen = false;
  let previous: { ref: ObjectRef; digest: string } | undefined;
  let chainFrom: ObjectRef | undefined;

  for await (const ref of archive.shardObjects(shard)) {
    let opened;
    try {
      opened = await archive.inspect(ref.key, rule);
    } catch (error) {
      if (error instanceof ArchiveIntegrityError) return broken(ref.key, error.problem);
      throw error;
    }
    if (!opened) return broken(ref.key, 'it was listed but cannot be read back');
    verdict.objects += 1;
    const { seal } = opened;
    if (!seal) {
      if (chainFrom) return broken(ref.key, `it has no seal, though the chain began before it (at ${chainFrom.key})`);
      verdict.legacy += 1;
    } else if (seal.prev === null) {
      if (chainFrom)
        return broken(
          ref.key,
          `it starts a chain of its own, though the chain began at ${chainFrom.key} (Redis lost the mirror's chain state, or the object is not Herald's)`,
        );
      chainFrom = ref;
    } else {
      const named = linkIds(seal.prev);
      if (previous && rangeOf(previous.ref) === seal.prev.range) {
        if (previous.digest !== seal.prev.digest)
          return broken(ref.key, `the object before it, ${previous.ref.key}, is not the one it was chained to`);
      } else if (previous && compareIds(named.firstId, previous.ref.firstId) < 0) {
        return broken(
          previous.ref.key,
          `it lies between ${nameOf(seal.prev.range)} and ${ref.key}, which names that one as its predecessor`,
        );
      } else if (!chainFrom && idTime(named.lastId) < opts.retainedSince) {
        verdict.afterRetention = ref.key;
      } else if (opts.pending?.has(seal.prev.range)) {
        verdict.unarchived += 1;
      } else {
        return broken(ref.key, `the object before it in the chain, ${nameOf(seal.prev.range)}, is missing`);
      }
      chainFrom ??= ref;
    }
    if (tip && rangeOf(ref) === tip.range) {
      if (opened.digest !== tip.digest) return broken(ref.key, 'it is not the object the mirror confirmed storing under this name');
      tipSeen = true;
    }
    previous = { ref, digest: opened.digest };
  }
  if (tip && !tipSeen && idTime(linkIds(tip).lastId) >= opts.retainedSince)
    return broken(nameOf(tip.range), 'the newest object the mirror confirmed storing (the chain tip in Redis) is missing');

  for await (const key of archive.recordKeys(shard)) {
    try {
      const read = await archive.inspectRecord(key, rule);
      if (!read) continue;
      verdict.records += 1;
      if (!read.sealed) verdict.legacyRecords += 1;
    } catch (error) {
      if (error instanceof ArchiveIntegrityError) return broken(key, error.problem);
      throw error;
    }
  }
  return verdict;
}

/** Whether the shard holds any object or record. */
async function holdsAnything(archive: Archive, shard: number): Promise<boolean> {
  for await (const _ of archive.shardObjects(shard)) return true;
  for await (const _ of archive.recordKeys(shard)) return true;
  return false;
}
