import type { FastifyBaseLogger } from 'fastify';
import { ArchiveIntegrityError, ArchiveUnavailableError } from '../archive/archive.js';
import { HttpError } from './errors.js';

/**
 * Runs a read that may need the audit archive (a retired notice, entries the log mirror trimmed
 * from Redis). Out of reach or failing its checks, the archive makes the read a 503 `unavailable`
 * that says what is there, never a 500: every route that reads a trail or a view goes through here.
 */
export async function fromArchive<T>(read: () => Promise<T>, log: FastifyBaseLogger, what: string): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof ArchiveUnavailableError) {
      log.warn({ err: error }, 'audit archive unreachable');
      throw new HttpError('unavailable', `${what} is in the audit archive, which cannot be reached; retry later.`);
    }
    if (error instanceof ArchiveIntegrityError) {
      // Never served: an object or record that fails its checks may have been forged.
      log.error({ err: error }, 'audit archive object fails its integrity check');
      throw new HttpError('unavailable', `${what} is in the audit archive, where it fails its integrity check; see herald audit --verify.`);
    }
    throw error;
  }
}
