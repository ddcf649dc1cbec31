/** An object as read back: its bytes, and the SHA-256 and seal stored with it (undefined when none was). */
export interface StoredObject {
  body: Buffer;
  sha256: string | undefined;
  /** Its authentication (src/archive/seal.ts); objects of earlier versions have none. */
  seal: string | undefined;
}

/**
 * Where archive objects live: a local directory (`file://`) or an S3-compatible bucket
 * (`s3://bucket/prefix`). Keys are relative paths (`herald/s03/2026-11-29/14/…ndjson.gz`);
 * each object carries its SHA-256 and its seal (object metadata on S3, a `.sha256` file beside it
 * on disk), written with it, never after it.
 */
export interface ObjectStorage {
  /** Where the storage writes, for logs and messages (no credentials). */
  readonly location: string;
  /** Writes an object with its checksum and seal; resolves once the storage holds it durably. */
  put(key: string, body: Buffer, sha256: string, seal: string): Promise<void>;
  /** The object, or null when there is none. */
  get(key: string): Promise<StoredObject | null>;
  /**
   * Object keys that start with `prefix`, in lexicographic order, after `startAfter` when
   * given (S3's ListObjectsV2 without a delimiter: a flat walk that can start anywhere).
   */
  list(prefix: string, startAfter?: string): AsyncIterable<string>;
  delete(keys: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

/** Most keys one `delete` call is given (S3's DeleteObjects takes up to 1000). */
export const DELETE_BATCH = 1000;
