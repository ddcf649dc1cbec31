import { timingSafeEqual } from 'node:crypto';
import { sha256 as digest } from '../digest.js';
import type { FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';


/** Verifies `Authorization: Bearer <key>` in constant time; returns a stable ID of the key. */
export function apiKeyVerifier(keys: readonly string[]) {
  const known = keys.map((key) => ({ digest: digest(key), id: digest(`herald-api-key:${key}`).toString('hex').slice(0, 16) }));
  return (request: FastifyRequest): string => {
    const header = request.headers.authorization;
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) throw new HttpError('unauthorized', 'Send Authorization: Bearer <api key>.');
    const presented = digest(match[1]!);
    let found: string | undefined;
    for (const key of known) if (timingSafeEqual(key.digest, presented)) found = key.id;
    if (!found) throw new HttpError('unauthorized');
    return found;
  };
}
