import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEV_ARCHIVE_KEY, describeConfig, loadConfig } from '../../src/config.js';
import { configProblems } from '../helpers/env.js';
import { runEntryPoint } from '../helpers/web-process.js';

const problemsOf = configProblems;

const run = runEntryPoint;

describe('retention and archive configuration', () => {
  it('reads HERALD_ENCRYPTION_KEY as keyId:base64 pairs, the first one sealing', () => {
    const [a, b] = [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')];
    const config = loadConfig({ HERALD_ENCRYPTION_KEY: `2026-11:${a}, 2026-05:${b}` });
    expect(config.encryptionKeys.map((k) => k.id)).toEqual(['2026-11', '2026-05']);
    expect(loadConfig({}).encryptionKeys).toEqual([]);
  });

  it('names each bad encryption key without printing key material', () => {
    const short = randomBytes(16).toString('base64');
    const good = randomBytes(32).toString('base64');
    const problems = problemsOf({ HERALD_ENCRYPTION_KEY: `${good},k1:${short},k2:${good},k2:${good}` }).join('\n');
    expect(problems).toMatch(/key 1 must be written keyId:base64/);
    expect(problems).toMatch(/key 2 \("k1"\) must be 32 bytes/);
    expect(problems).toMatch(/key 4 \("k2"\): the key ID is used twice/);
    expect(problems).not.toContain(short);
    expect(problems).not.toContain(good);
  });

  it('reads HERALD_ARCHIVE_KEY as keyId:base64 pairs, the first one signing, and falls back to the published dev key', () => {
    const [a, b] = [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')];
    const config = loadConfig({ HERALD_ARCHIVE_KEY: `2026-12:${a},2026-06:${b}` });
    expect(config.archiveKeys.map((k) => k.id)).toEqual(['2026-12', '2026-06']);
    expect(JSON.stringify(describeConfig(config))).not.toContain(a);
    expect(describeConfig(config).archiveAuthentication).toBe('hmac-sha256, signing with key "2026-12"');
    expect(loadConfig({}).archiveKeys).toEqual([DEV_ARCHIVE_KEY]);
    expect(describeConfig(loadConfig({})).archiveAuthentication).toMatch(/published dev key/);

    const short = randomBytes(16).toString('base64');
    const problems = problemsOf({ HERALD_ARCHIVE_KEY: `k1:${short}` }).join('\n');
    expect(problems).toMatch(/HERALD_ARCHIVE_KEY: key 1 \("k1"\) must be 32 bytes/);
    expect(problems).not.toContain(short);
    expect(problemsOf({ NODE_ENV: 'production' })).toContain('HERALD_ARCHIVE_KEY must be set when NODE_ENV=production');
    expect(problemsOf({ NODE_ENV: 'production', HERALD_ARCHIVE_KEY: `k:${a}` }).join()).not.toMatch(/HERALD_ARCHIVE_KEY/);
  });

  it('checks the archive URL and the S3 settings', () => {
    expect(problemsOf({ HERALD_ARCHIVE_URL: 'ftp://x' }).join()).toMatch(/HERALD_ARCHIVE_URL/);
    expect(problemsOf({ HERALD_ARCHIVE_URL: 's3:///prefix' }).join()).toMatch(/must name a bucket/);
    const s3 = loadConfig({ HERALD_ARCHIVE_URL: 's3://herald-archive/log', S3_ENDPOINT: 'http://minio:9000' });
    expect(s3.s3).toEqual({ endpoint: 'http://minio:9000', region: 'us-east-1', forcePathStyle: true });
    expect(loadConfig({ HERALD_ARCHIVE_URL: 's3://b', AWS_REGION: 'eu-west-1' }).s3).toEqual({
      endpoint: undefined,
      region: 'eu-west-1',
      forcePathStyle: false,
    });
  });

  it('lets the hot window be zero (trim as soon as archived), and defaults the mirror knobs', () => {
    expect(loadConfig({ HERALD_LOG_KEEP_HOT: '0s' }).mirror.keepHotMs).toBe(0);
    expect(loadConfig({}).mirror).toEqual({
      batchSize: 1000,
      intervalMs: 1000,
      reclaimAfterMs: 60_000,
      keepHotMs: 600_000,
      warnLagMs: 300_000,
      warnBacklog: 1_000_000,
    });
    expect(problemsOf({ HERALD_MIRROR_BATCH_SIZE: '0' }).join()).toMatch(/HERALD_MIRROR_BATCH_SIZE/);
  });
});

describe('with NODE_ENV=production', () => {
  const env = { NODE_ENV: 'production', REDIS_URL: 'redis://127.0.0.1:1', HERALD_API_KEYS: 'prod-key-0123456789abcdef' };

  it.each(['dist/src/worker.js', 'dist/src/server.js'])(
    '%s refuses to start until retention and the archive are decided',
    async (script) => {
      const { code, output } = await run(script, env);
      expect(code).toBe(1);
      for (const name of ['HERALD_CONTENT_TTL', 'HERALD_AUDIT_RETENTION', 'HERALD_ARCHIVE_URL'])
        expect(output).toContain(`${name} must be set explicitly`);
      expect(output).toContain('HERALD_ARCHIVE_KEY must be set when NODE_ENV=production');
    },
  );
});
