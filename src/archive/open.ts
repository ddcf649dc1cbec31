import type { RedisClient } from '../store/redis.js';
import type { Config } from '../config.js';
import { Keys } from '../store/keys.js';
import { Archive } from './archive.js';
import { createFileStorage } from './file-storage.js';
import { LogMirrorStore } from '../store/log-mirror.js';
import { createS3Storage } from './s3-storage.js';
import { ArchiveKeyring } from './seal.js';
import type { ObjectStorage } from './object-storage.js';

/** The directory of a `file://` archive URL: `file:///abs/path`, or `file://./rel` from the working directory. */
export function fileArchivePath(url: string): string {
  return decodeURIComponent(url.slice('file://'.length));
}

/** Bucket and key prefix of an `s3://bucket/prefix` archive URL. */
export function s3ArchiveLocation(url: string): { bucket: string; prefix: string } {
  const parsed = new URL(url);
  return { bucket: parsed.hostname, prefix: decodeURIComponent(parsed.pathname).replace(/^\/+|\/+$/g, '') };
}

/** The object storage `HERALD_ARCHIVE_URL` names. Whoever opens it closes it. */
export function openObjectStorage(config: Pick<Config, 'archiveUrl' | 's3'>): ObjectStorage {
  if (config.archiveUrl.startsWith('file://')) return createFileStorage(fileArchivePath(config.archiveUrl));
  const { bucket, prefix } = s3ArchiveLocation(config.archiveUrl);
  return createS3Storage({ bucket, prefix, ...config.s3 });
}

/**
 * Herald's archive for this configuration (its objects under `HERALD_PREFIX`, sealed with
 * HERALD_ARCHIVE_KEY). Reads learn where each shard's chain began from its anchor in the archive,
 * so that an object stripped of its seal is not taken for a legacy one; with `redis`, also from
 * Redis's chain for a shard the log mirror has not anchored yet.
 */
export function openArchive(config: Pick<Config, 'archiveUrl' | 's3' | 'prefix' | 'archiveKeys'>, redis?: RedisClient): Archive {
  const chain = redis && new LogMirrorStore(redis, new Keys(config.prefix));
  return new Archive(openObjectStorage(config), config.prefix, {
    keys: new ArchiveKeyring(config.archiveKeys),
    chainStart: chain && ((shard) => chain.chain(shard)),
  });
}
