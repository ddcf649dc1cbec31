/** Where the decision log goes and how long things are kept: the archive, its keys, content retention, the mirror. */
import { deriveKeys, parseEncryptionKeys, type EncryptionKey } from '../crypto.js';
import { duration, flag, integer, readSection, text, url } from './schema.js';
import type { Platform } from './platform.js';
import type { Config } from './types.js';
import { withoutCredentials } from './urls.js';

/**
 * The archive key used when HERALD_ARCHIVE_KEY is unset with sandbox providers: fixed and
 * published (docs/CONFIGURATION.md), so it authenticates nothing against anyone who reads the source. Live
 * providers and production refuse it.
 */
export const DEV_ARCHIVE_KEY: EncryptionKey = Object.freeze({
  id: 'dev',
  key: Buffer.from('herald-dev-archive-key-unsafe!!!').toString('base64'),
});

type RetentionConfig = Pick<
  Config,
  | 'archiveUrl'
  | 's3'
  | 'archiveKeys'
  | 'addressKeys'
  | 'encryptionKeys'
  | 'contentTtlMs'
  | 'auditRetentionMs'
  | 'mirror'
  | 'contentPurgeIntervalMs'
  | 'noticeKeepHotMs'
  | 'statsRetentionMs'
>;

const DAY_MS = 86_400_000;

/** HKDF's `info` for the address lookup's keys when HERALD_ADDRESS_KEY is unset (src/notice/address-lookup.ts). */
export const ADDRESS_KEY_INFO = 'herald address lookup v1';

export const SCHEMA = {
  HERALD_ARCHIVE_URL: url(['file:', 's3:'], 'file://./data/archive', withoutCredentials),
  S3_ENDPOINT: url(['http:', 'https:'], undefined, withoutCredentials),
  S3_FORCE_PATH_STYLE: flag(),
  AWS_REGION: text(undefined),
  AWS_DEFAULT_REGION: text(undefined),
  HERALD_ARCHIVE_KEY: text(undefined),
  HERALD_ENCRYPTION_KEY: text(undefined),
  HERALD_ADDRESS_KEY: text(undefined),
  HERALD_CONTENT_TTL: duration(7 * DAY_MS),
  HERALD_AUDIT_RETENTION: duration(400 * DAY_MS),
  HERALD_MIRROR_BATCH_SIZE: integer(1000, 1, 5000),
  HERALD_MIRROR_INTERVAL_MS: integer(1000, 50),
  HERALD_MIRROR_RECLAIM_MS: integer(60_000, 0),
  HERALD_LOG_KEEP_HOT: duration(10 * 60_000, true),
  HERALD_MIRROR_WARN_LAG: duration(5 * 60_000),
  HERALD_MIRROR_WARN_BACKLOG: integer(1_000_000, 1),
  HERALD_CONTENT_PURGE_INTERVAL_MS: integer(10_000, 50),
  HERALD_NOTICE_KEEP_HOT: duration(DAY_MS, true),
  HERALD_STATS_RETENTION: duration(31 * DAY_MS),
};

export function readRetention(env: Record<string, string>, platform: Platform, problems: string[]): RetentionConfig {
  const read = readSection(env, SCHEMA, problems);
  const archiveUrl = read.HERALD_ARCHIVE_URL ?? 'file://./data/archive';
  if (archiveUrl.startsWith('s3:') && !/^s3:\/\/[^/]+/.test(archiveUrl)) {
    problems.push(`HERALD_ARCHIVE_URL="${archiveUrl}" must name a bucket: s3://bucket/prefix`);
  }
  if (archiveUrl.startsWith('file:') && archiveUrl.length <= 'file://'.length) {
    problems.push('HERALD_ARCHIVE_URL must name a directory: file:///var/lib/herald/archive or file://./data/archive');
  }

  const archiveKeyText = read.HERALD_ARCHIVE_KEY;
  const archiveKeys = parseEncryptionKeys(archiveKeyText ?? '');
  if (archiveKeyText !== undefined) for (const problem of archiveKeys.problems) problems.push(`HERALD_ARCHIVE_KEY: ${problem}`);
  // The dev key is published: with live providers (production or not) it would seal real trails with a key anyone has.
  if (archiveKeyText === undefined && platform.production) problems.push('HERALD_ARCHIVE_KEY must be set when NODE_ENV=production');
  else if (archiveKeyText === undefined && !platform.sandbox) problems.push('HERALD_ARCHIVE_KEY must be set when HERALD_PROVIDERS=live');
  if (!platform.sandbox && archiveKeys.keys.some((k) => k.key === DEV_ARCHIVE_KEY.key)) {
    problems.push('HERALD_ARCHIVE_KEY holds the published dev key: make a key of your own (openssl rand -base64 32)');
  }
  const encryption = parseEncryptionKeys(read.HERALD_ENCRYPTION_KEY ?? '');
  if (read.HERALD_ENCRYPTION_KEY !== undefined)
    for (const problem of encryption.problems) problems.push(`HERALD_ENCRYPTION_KEY: ${problem}`);

  const addressKeys = parseEncryptionKeys(read.HERALD_ADDRESS_KEY ?? '');
  if (read.HERALD_ADDRESS_KEY !== undefined) for (const problem of addressKeys.problems) problems.push(`HERALD_ADDRESS_KEY: ${problem}`);
  const sealing = archiveKeyText === undefined ? [DEV_ARCHIVE_KEY] : archiveKeys.keys;

  const s3Endpoint = read.S3_ENDPOINT;
  return {
    archiveUrl,
    s3: {
      endpoint: s3Endpoint,
      region: read.AWS_REGION ?? read.AWS_DEFAULT_REGION ?? 'us-east-1',
      // Custom endpoints (MinIO and most S3-compatible stores) need path-style URLs.
      forcePathStyle: read.S3_FORCE_PATH_STYLE ?? s3Endpoint !== undefined,
    },
    archiveKeys: sealing,
    addressKeys: read.HERALD_ADDRESS_KEY === undefined ? deriveKeys(sealing, ADDRESS_KEY_INFO) : addressKeys.keys,
    encryptionKeys: read.HERALD_ENCRYPTION_KEY === undefined ? [] : encryption.keys,
    contentTtlMs: read.HERALD_CONTENT_TTL,
    auditRetentionMs: read.HERALD_AUDIT_RETENTION,
    mirror: {
      batchSize: read.HERALD_MIRROR_BATCH_SIZE,
      intervalMs: read.HERALD_MIRROR_INTERVAL_MS,
      reclaimAfterMs: read.HERALD_MIRROR_RECLAIM_MS,
      keepHotMs: read.HERALD_LOG_KEEP_HOT,
      warnLagMs: read.HERALD_MIRROR_WARN_LAG,
      warnBacklog: read.HERALD_MIRROR_WARN_BACKLOG,
    },
    contentPurgeIntervalMs: read.HERALD_CONTENT_PURGE_INTERVAL_MS,
    noticeKeepHotMs: read.HERALD_NOTICE_KEEP_HOT,
    statsRetentionMs: read.HERALD_STATS_RETENTION,
  };
}
