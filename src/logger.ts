import { pino, type Logger, type LoggerOptions } from 'pino';

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

export function loggerOptions(name: string, level = process.env.LOG_LEVEL ?? 'info'): LoggerOptions {
  return { name, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
}

/** A pino JSON logger with Herald's redaction. */
export function createLogger(name: string, level?: string): Logger {
  return pino(loggerOptions(name, level));
}
