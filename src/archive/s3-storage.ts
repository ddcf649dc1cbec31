import {
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { DELETE_BATCH, type ObjectStorage, type StoredObject } from './object-storage.js';

export interface S3StorageOptions {
  bucket: string;
  /** Key prefix inside the bucket ('' for the bucket root). */
  prefix: string;
  /** An S3-compatible endpoint (MinIO, R2, ...); undefined for AWS. */
  endpoint: string | undefined;
  region: string;
  /** Path-style URLs (`endpoint/bucket/key`), which MinIO and most S3-compatible stores need. */
  forcePathStyle: boolean;
  /** Only for tests against a local server; production takes the SDK's default credential chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

const METADATA_SHA256 = 'sha256';
const METADATA_SEAL = 'seal';

/**
 * The archive in an S3-compatible bucket (`s3://bucket/prefix`). Credentials come from the AWS
 * SDK's default chain (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, profiles, instance roles).
 * The SHA-256 and the seal of each object travel as its `x-amz-meta-sha256` and `x-amz-meta-seal`
 * metadata, written in the same PUT as the object.
 */
export function createS3Storage(options: S3StorageOptions): ObjectStorage {
  const client = new S3Client({
    region: options.region,
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    credentials: options.credentials,
    // S3-compatible stores (older MinIO, R2, GCS interop) reject or ignore the newer default
    // CRC checksums; Herald checks its own SHA-256 on every read instead.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 3,
    requestHandler: { connectionTimeout: 3_000, requestTimeout: 15_000 },
  });
  const root = options.prefix.replace(/^\/+|\/+$/g, '');
  const full = (key: string) => (root ? `${root}/${key}` : key);
  const relative = (key: string) => (root ? key.slice(root.length + 1) : key);
  const Bucket = options.bucket;

  return {
    location: `s3://${Bucket}/${root}${options.endpoint ? ` at ${options.endpoint}` : ''}`,

    async put(key, body, sha256, seal) {
      await client.send(
        new PutObjectCommand({
          Bucket,
          Key: full(key),
          Body: body,
          ContentLength: body.length,
          // Not Content-Encoding: gzip, which would let HTTP layers unzip it on the way and break the checksum.
          ContentType: 'application/gzip',
          Metadata: { [METADATA_SHA256]: sha256, [METADATA_SEAL]: seal },
        }),
      );
    },

    async get(key): Promise<StoredObject | null> {
      try {
        const answer = await client.send(new GetObjectCommand({ Bucket, Key: full(key) }));
        const body = Buffer.from(await answer.Body!.transformToByteArray());
        return { body, sha256: answer.Metadata?.[METADATA_SHA256], seal: answer.Metadata?.[METADATA_SEAL] };
      } catch (error) {
        if (error instanceof S3ServiceException && (error.name === 'NoSuchKey' || error.$metadata.httpStatusCode === 404)) return null;
        throw error;
      }
    },

    async *list(prefix, startAfter) {
      let token: string | undefined;
      do {
        const page = await client.send(
          new ListObjectsV2Command({
            Bucket,
            Prefix: full(prefix),
            StartAfter: token || startAfter === undefined ? undefined : full(startAfter),
            ContinuationToken: token,
          }),
        );
        for (const object of page.Contents ?? []) if (object.Key) yield relative(object.Key);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    },

    async delete(keys) {
      for (let i = 0; i < keys.length; i += DELETE_BATCH) {
        const answer = await client.send(
          new DeleteObjectsCommand({
            Bucket,
            Delete: { Objects: keys.slice(i, i + DELETE_BATCH).map((key) => ({ Key: full(key) })), Quiet: true },
          }),
        );
        if (answer.Errors && answer.Errors.length > 0) {
          const first = answer.Errors[0]!;
          throw new Error(`S3 refused to delete ${answer.Errors.length} objects (first: ${first.Key}: ${first.Code} ${first.Message})`);
        }
      }
    },

    async close() {
      client.destroy();
    },
  };
}
