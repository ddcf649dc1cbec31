/** The settings every other section depends on: production or not, sandbox or live providers, the key prefix. */
import { flag, readSection, text } from './schema.js';

export interface Platform {
  nodeEnv: string;
  providers: 'sandbox' | 'live';
  sandbox: boolean;
  production: boolean;
  /** HERALD_ALLOW_INSECURE_PROVIDER_URLS: production may use `http://` provider URLs (a proxy on the same host). */
  allowInsecureProviderUrls: boolean;
  prefix: string;
}

export const SCHEMA = {
  NODE_ENV: text('development'),
  HERALD_PROVIDERS: text('sandbox'),
  HERALD_ALLOW_INSECURE_PROVIDER_URLS: flag(),
  HERALD_PREFIX: text('herald'),
};

/** The variables production must set itself: no default may silently keep or drop data. */
const DECIDED_IN_PRODUCTION = ['HERALD_CONTENT_TTL', 'HERALD_AUDIT_RETENTION', 'HERALD_ARCHIVE_URL'] as const;

export function readPlatform(env: Record<string, string>, problems: string[]): Platform {
  const read = readSection(env, SCHEMA, problems);
  const nodeEnv = read.NODE_ENV;
  const providersRaw = read.HERALD_PROVIDERS;
  if (providersRaw !== 'sandbox' && providersRaw !== 'live') {
    problems.push(`HERALD_PROVIDERS="${providersRaw}" must be "sandbox" or "live"`);
  }
  const providers = providersRaw === 'live' ? 'live' : 'sandbox';
  const production = nodeEnv === 'production';
  if (production) {
    for (const name of DECIDED_IN_PRODUCTION)
      if (env[name] === undefined) problems.push(`${name} must be set explicitly when NODE_ENV=production`);
    // The emulators answer "delivered": in production they would log deliveries that never happened.
    if (providers !== 'live') {
      problems.push(
        `HERALD_PROVIDERS must be "live" when NODE_ENV=production (it is "${providersRaw}": the sandbox emulators send nothing)`,
      );
    }
  }
  const prefix = read.HERALD_PREFIX;
  if (!/^[A-Za-z0-9_.-]+$/.test(prefix)) {
    problems.push(`HERALD_PREFIX="${prefix}" may hold only letters, digits, "_", "." and "-"`);
  }
  return {
    nodeEnv,
    providers,
    sandbox: providers === 'sandbox',
    production,
    allowInsecureProviderUrls: read.HERALD_ALLOW_INSECURE_PROVIDER_URLS ?? false,
    prefix,
  };
}
