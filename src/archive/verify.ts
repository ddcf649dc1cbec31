import { ArchiveIntegrityError, type Archive } from './archive.js';
import type { ChainState } from '../store/log-mirror.js';
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
}

/**
 * Checks one shard of the archive: every object in entry order (its SHA-256, its seal, its
 * entries against its name, its link to the object before it), the newest object the mirror
 * confirmed (the tip Redis keeps), then every notice record. Stops at the first that does not
 * hold. A link to a batch Redis still holds unacknowledged (a dead worker's, not yet claimed) is
 * to an object not stored yet; once it is stored, its own link is checked like any other. Unsigned objects before the first signed one are the legacy prefix of earlier versions;
 * after it, none may be unsigned.
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
  const tip = opts.chain?.tip;
  let tipSeen = false;
  let previous: { ref: ObjectRef; digest: string } | undefined;
  let chainFrom: ObjectRef | undefined;

  for await (const ref of archive.shardObjects(shard)) {
    let opened;
    try {
      opened = await archive.inspect(ref.key);
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
      const read = await archive.inspectRecord(key);
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
