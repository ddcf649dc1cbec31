/** Events to callers: how long a delivery is retried, how its backoff starts, which endpoint addresses are allowed. */
import { duration, flag, integer, readSection } from './schema.js';
import type { Platform } from './platform.js';
import type { Config } from './types.js';

export const SCHEMA = {
  HERALD_EVENT_RETRY_FOR: duration(3 * 86_400_000),
  HERALD_EVENT_RETRY_BASE_MS: integer(5_000, 1, 3_600_000),
  HERALD_ALLOW_PRIVATE_EVENT_URLS: flag(),
};

export function readEvents(env: Record<string, string>, platform: Platform, problems: string[]): Pick<Config, 'events'> {
  const read = readSection(env, SCHEMA, problems);
  return {
    events: {
      retryForMs: read.HERALD_EVENT_RETRY_FOR,
      retryBaseMs: read.HERALD_EVENT_RETRY_BASE_MS,
      allowPrivateUrls: read.HERALD_ALLOW_PRIVATE_EVENT_URLS ?? false,
      // Outside production an endpoint may be plain http (a listener on the developer's machine).
      httpsOnly: platform.production,
    },
  };
}
