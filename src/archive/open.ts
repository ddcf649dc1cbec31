import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { Keys } from '../store/keys.js';
import { Archive } from './archive.js';
import { createFileStore } from './file-store.js';
import { MirrorLog } from './mirror-log.js';
import { createS3Store } from './s3-store.js';
import { ArchiveKeyring } from './seal.js';
import type { ArchiveStore } from './store.js';

/** The directory of a `file://` archive URL: `file:///abs/path`, or `file://./rel` from the working directory. */
export function fileArchivePath(url: string): string {
  return decodeURIComponent(url.slice('file://'.length));
}

/** Bucket and key prefix of an `s3://bucket/prefix` archive URL. */
export function s3ArchiveLocation(url: string): { bucket: string; prefix: string } {
  const parsed = new URL(url);
  return { bucket: parsed.hostname, prefix: decodeURIComponent(parsed.pathname).replace(/^\/+|\/+$/g, '') };
}

/** The archive store `HERALD_ARCHIVE_URL` names. Whoever opens it closes it. */
export function openArchiveStore(config: Pick<Config, 'archiveUrl' | 's3'>): ArchiveStore {
  if (config.archiveUrl.startsWith('file://')) return createFileStore(fileArchivePath(config.archiveUrl));
  const { bucket, prefix } = s3ArchiveLocation(config.archiveUrl);
  return createS3Store({ bucket, prefix, ...config.s3 });
}

/**
 * Herald's archive for this configuration (its objects under `HERALD_PREFIX`, sealed with
 * HERALD_ARCHIVE_KEY). With `redis`, reads know where each shard's chain began, so that an object
 * stripped of its seal is not taken for a legacy one.
 */
export function openArchive(config: Pick<Config, 'archiveUrl' | 's3' | 'prefix' | 'archiveKeys'>, redis?: Redis): Archive {
  const chain = redis && new MirrorLog(redis, new Keys(config.prefix));
  return new Archive(openArchiveStore(config), config.prefix, {
    keys: new ArchiveKeyring(config.archiveKeys),
    chainStart: chain && ((shard) => chain.chain(shard)),
  });
}
