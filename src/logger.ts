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

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+/g;
const PHONE = /\+[1-9][0-9 ()-]{6,18}[0-9]/g;

/** Replaces email addresses and phone numbers in free text (error messages, provider answers, URLs). */
export function scrub(text: string): string {
  return text.replace(EMAIL, '[email]').replace(PHONE, '[phone]');
}

function scrubDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrub(value);
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return scrubDeep({ ...stdSerializers.err(value) }, depth + 1);
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth + 1));
  // Class instances (a request, a socket) are left to their serializers.
  if (Object.getPrototypeOf(value) !== Object.prototype) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubDeep(v, depth + 1)]));
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
