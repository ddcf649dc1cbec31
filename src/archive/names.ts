/**
 * Stream entry IDs (`<ms>-<seq>`, Redis time) and the archive's object names.
 *
 * An object is `<herald prefix>/s<NN>/<YYYY-MM-DD>/<HH>/<firstId>_<lastId>.ndjson.gz`: the shard,
 * then the UTC hour of its entries. The mirror never lets a batch cross an hour, so the object
 * holding an entry is always in the hour of that entry's ID and finding it takes one listing of
 * that hour; and keys sort by hour, so a period (export, retention) is one listing from its
 * first hour on.
 */

export const PARTITION_MS = 3_600_000;
const OBJECT_NAME = /^(\d+-\d+)_(\d+-\d+)\.ndjson\.gz$/;

/** The millisecond part of a stream entry ID. */
export function idTime(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

/** Orders stream entry IDs (numerically, as Redis does). */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am - bm || as - bs;
}

/** The start (ms) of the partition an entry ID or a time belongs to. */
export function partitionStart(timeMs: number): number {
  return Math.floor(timeMs / PARTITION_MS) * PARTITION_MS;
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** A stream entry ID: `<ms>-<seq>`. */
export const STREAM_ID = /^\d+-\d+$/;

/** A shard as the archive names it: `s05`. */
export function shardName(shard: number): string {
  return `s${pad(shard)}`;
}

export function shardDir(heraldPrefix: string, shard: number): string {
  return `${heraldPrefix}/${shardName(shard)}/`;
}

export function dayDir(heraldPrefix: string, shard: number, timeMs: number): string {
  const d = new Date(timeMs);
  return `${shardDir(heraldPrefix, shard)}${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}/`;
}

export function partitionDir(heraldPrefix: string, shard: number, timeMs: number): string {
  return `${dayDir(heraldPrefix, shard, timeMs)}${pad(new Date(timeMs).getUTCHours())}/`;
}

export function objectKey(heraldPrefix: string, shard: number, firstId: string, lastId: string): string {
  return `${partitionDir(heraldPrefix, shard, idTime(firstId))}${firstId}_${lastId}.ndjson.gz`;
}

/** An archive object as listed: its key and the entry IDs it spans. */
export interface ObjectRef {
  key: string;
  firstId: string;
  lastId: string;
}

/** Parses a listed key; undefined for anything that is not a batch object. */
export function parseObjectKey(key: string): ObjectRef | undefined {
  const match = OBJECT_NAME.exec(key.slice(key.lastIndexOf('/') + 1));
  return match ? { key, firstId: match[1]!, lastId: match[2]! } : undefined;
}

const SHARD_OF_KEY = /\/s(\d{2})\/\d{4}-\d{2}-\d{2}\/\d{2}\/[^/]+$/;

/** The shard a batch object's key names, or undefined for anything else. */
export function shardOfObjectKey(key: string): number | undefined {
  const match = SHARD_OF_KEY.exec(key);
  return match ? Number(match[1]) : undefined;
}

/** `<firstId>_<lastId>`: how an object's name, and a chain link, write an entry range. */
export function rangeOf(ref: { firstId: string; lastId: string }): string {
  return `${ref.firstId}_${ref.lastId}`;
}
