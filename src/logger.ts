import { pino, stdSerializers, type Logger, type LoggerOptions } from 'pino';

/**
 * Paths never written to logs: credentials, addresses and message content, wherever they
 * appear in a logged object (requests, errors, provider answers).
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  '*.email',
  '*.phone',
  '*.to',
  '*.To',
  '*.from',
  '*.From',
  '*.subject',
  '*.text',
  '*.html',
  '*.sms',
  '*.body',
  '*.Body',
  '*.content',
  'content',
  'body',
];

// Wider than the API's validator on purpose: any local part the validator accepts (RFC 5322
// atext, dots, quotes) and any domain, dotted or not; percent-encoded in URLs too.
const EMAIL = /[^\s<>()[\]\\,;:"@]+(?:@|%40)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?/g;
// E.164 allows as few as 7 digits (+290 1234), as written or percent-encoded (%2B) in a URL.
const PHONE = /(?:\+|%2B)[1-9][0-9 ()-]{4,18}[0-9]/gi;

/** Replaces email addresses and phone numbers in free text (error messages, provider answers, URLs). */
export function scrub(text: string): string {
  return text.replace(EMAIL, '[email]').replace(PHONE, '[phone]');
}

/**
 * A Redis client's error carries the command that failed, arguments and all (ioredis
 * `ReplyError.command`): for a script, the message body and addresses. Only its name is kept.
 */
function withoutCommandArguments(error: Record<string, unknown>): Record<string, unknown> {
  const command = error.command as { name?: unknown } | undefined;
  if (command === undefined || command === null || typeof command !== 'object') return error;
  return { ...error, command: typeof command.name === 'string' ? command.name : '[redacted]' };
}

function scrubDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrub(value);
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return scrubDeep(withoutCommandArguments({ ...stdSerializers.err(value) }), depth + 1);
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth + 1));
  // Class instances (a request, a socket) are left to their serializers.
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  return Object.fromEntries(Object.entries(withoutCommandArguments(value as Record<string, unknown>)).map(([k, v]) => [k, scrubDeep(v, depth + 1)]));
}

export function loggerOptions(name: string, level = process.env.LOG_LEVEL ?? 'info'): LoggerOptions {
  return {
    name,
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // Errors carry provider messages ("Invalid 'To' address: ...") and their causes; scrub them
    // and everything else logged, so no address reaches a log line by any path.
    serializers: { err: (error: Error) => scrubDeep(error) as ReturnType<typeof stdSerializers.err> },
    formatters: { log: (object) => scrubDeep(object) as Record<string, unknown> },
  };
}

/** A pino JSON logger with Herald's redaction; `destination` is for tests that read the lines. */
export function createLogger(name: string, level?: string, destination?: NodeJS.WritableStream): Logger {
  return destination ? pino(loggerOptions(name, level), destination) : pino(loggerOptions(name, level));
}
