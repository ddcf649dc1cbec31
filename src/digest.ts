import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

/** SHA-256 of `data`. */
export const sha256 = (data: Buffer | string): Buffer => createHash('sha256').update(data).digest();

/** SHA-256 of `data` as lower-case hex. */
export const sha256Hex = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

/** Byte 9 of a gzip header names the OS that wrote it; zlib builds differ, so it is fixed. */
const GZIP_OS_BYTE = 9;
const GZIP_OS_UNKNOWN = 0xff;

/**
 * Gzip whose bytes depend on the input alone: gzip writes no time, and the OS byte is fixed. So
 * an archive object or record uploaded again after a crash is byte for byte the one stored.
 */
export function gzipStable(data: Buffer | string): Buffer {
  const body = gzipSync(data, { level: 6 });
  body[GZIP_OS_BYTE] = GZIP_OS_UNKNOWN;
  return body;
}
