/**
 * Herald's configuration: read once from the environment at start-up, validated, frozen. Each
 * section reads its own variables against a declarative schema (src/config/schema.ts) and keeps
 * Herald's rules across them as code: the platform (production, sandbox or live), Redis, the
 * web, the providers, the engine, retention and the archive. This module and its sections import
 * no provider SDK and nothing of the product but small value modules, so any process or tool
 * may read the configuration cheaply.
 */
import { randomBytes } from 'node:crypto';
import { formatDuration } from './durations.js';
import { DEV_ARCHIVE_KEY, readRetention } from './config/archive.js';
import { readEngine } from './config/engine.js';
import { readPlatform } from './config/platform.js';
import { readProviders } from './config/providers.js';
import { readRedis } from './config/redis.js';
import { normalizedEnv, type Env } from './config/schema.js';
import type { Config } from './config/types.js';
import { readWeb } from './config/web.js';
import { readEvents } from './config/events.js';
import { unknownHeraldVariables } from './config/known.js';

export type { Config, HostPort, Prices, RedisTarget } from './config/types.js';
export { DEV_ARCHIVE_KEY } from './config/archive.js';
export { DEFAULT_PRICES } from './config/engine.js';
export { MIN_WEBHOOK_SECRET_LENGTH, SANDBOX_SECRETS, sendgridPublicKeyProblem } from './config/providers.js';
export { withoutCredentials } from './config/urls.js';
export { unknownHeraldVariables };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Herald cannot start; fix the configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and validates the configuration; throws ConfigError naming every bad or missing variable. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const clean = normalizedEnv(env);
  const platform = readPlatform(clean, problems);
  const web = readWeb(clean, platform, problems);
  const providers = readProviders(clean, platform, problems);
  const engine = readEngine(clean, problems);
  const retention = readRetention(clean, platform, problems);
  const redis = readRedis(clean, problems);
  const events = readEvents(clean, platform, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  const config: Config = {
    nodeEnv: platform.nodeEnv,
    providers: platform.providers,
    allowInsecureProviderUrls: platform.allowInsecureProviderUrls,
    prefix: platform.prefix,
    ...redis,
    ...web,
    ...providers,
    ...engine,
    ...retention,
    ...events,
  };
  return deepFreeze(config);
}

/** A summary safe to log: no secrets. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    providers: config.providers,
    emailProvider: config.emailProvider,
    smsProvider: config.smsProvider,
    prefix: config.prefix,
    providerTimeoutMs: config.providerTimeoutMs,
    minPollIntervalMs: config.minPollIntervalMs,
    maxChecksPerNotice: config.maxChecksPerNotice,
    contentTtl: formatDuration(config.contentTtlMs),
    auditRetention: formatDuration(config.auditRetentionMs),
    archiveUrl: config.archiveUrl,
    archiveAuthentication:
      config.archiveKeys[0] === DEV_ARCHIVE_KEY
        ? 'hmac-sha256 with the published dev key (set HERALD_ARCHIVE_KEY)'
        : `hmac-sha256, signing with key "${config.archiveKeys[0]!.id}"`,
    contentEncryption: config.encryptionKeys.length > 0 ? `aes-256-gcm, sealing with key "${config.encryptionKeys[0]!.id}"` : 'off',
    rulesVersion: config.rules?.version ?? null,
  };
}

/** Says, once at start-up, which HERALD_* variables of `env` Herald does not read (a misspelt name passes unnoticed otherwise). */
export function warnUnknownVariables(env: Env, log: { warn(details: object, message: string): void }): void {
  for (const { name, meant } of unknownHeraldVariables(env)) {
    log.warn(
      { variable: name, meant },
      meant ? `${name} is not a variable Herald reads: did you mean ${meant}?` : `${name} is not a variable Herald reads`,
    );
  }
}

/** A fresh API key for `npm start`: printed to the terminal, never logged. */
export function newDevApiKey(): string {
  return `dev_${randomBytes(18).toString('base64url')}`;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
