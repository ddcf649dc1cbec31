import { isPossiblePhoneNumber } from 'libphonenumber-js';
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
// atext, dots), a quoted one ("john doe"@…), and any domain, dotted or not, in any script, or an
// address literal ([192.0.2.1], [IPv6:…]); the @ as written, percent-encoded in URLs, or full-width.
const EMAIL =
  /(?:"(?:[^"\\\r\n]|\\.){1,64}"|[^\s<>()[\]\\,;:"@＠﹫]+)(?:@|%40|＠|﹫)(?:\[[\w.:]+\]|[\p{L}\p{N}](?:[\p{L}\p{N}.．-]*[\p{L}\p{N}])?)/gu;
// E.164 allows as few as 7 digits (+290 1234), as written or percent-encoded (%2B) in a URL, its
// groups apart by spaces, dots, dashes or parentheses.
const INTERNATIONAL = /(?:\+|%2B)[1-9][0-9 ().-]{4,18}[0-9]/gi;
// Numbers without a `+` stand alone: not inside a word or an ID, a decimal, a stream ID
// (1700000000000-0), a dotted or dashed run, or percent-encoding.
const ALONE_BEFORE = String.raw`(?<![\w.+%-])`;
const ALONE_AFTER = String.raw`(?![\w]|[.-]\d)`;
// Digits in groups: `(202) 555-0100`, `202.555.0100`, `090-1234-5678`, `01 23 45 67 89` (three
// groups or more, one separator throughout), or a parenthesized area code before two or more.
const GROUPED = new RegExp(
  `${ALONE_BEFORE}(?:\\(\\d{1,4}\\)[ .-]?\\d{2,5}(?:[ .-]\\d{2,5}){1,3}|\\d{1,4}([ .-])\\d{1,4}(?:\\1\\d{1,4}){1,4})${ALONE_AFTER}`,
  'g',
);
// A run of digits as E.164 writes it without its `+` (or after the `00` international prefix).
const DIGITS = new RegExp(`${ALONE_BEFORE}\\d{8,17}${ALONE_AFTER}`, 'g');
// Grouped digits that are something else: an IPv4 address, a date.
const NOT_A_PHONE = /^(?:\d{1,3}(?:\.\d{1,3}){3}|\d{4}([ .-])\d{1,2}\1\d{1,2}|\d{1,2}([ .-])\d{1,2}\2\d{4})$/;

/** Grouped digits that may be a phone number: 8 to 15 digits, and not an address or a date. */
function groupedPhone(match: string): string {
  const digits = match.replace(/\D/g, '').length;
  return digits >= 8 && digits <= 15 && !NOT_A_PHONE.test(match) ? '[phone]' : match;
}

/** Around now: a 13-digit run this close to the clock in ms, or a 10-digit one in s, is a time. */
const TIME_WINDOW_MS = 5 * 365 * 86_400_000;

/** A time in ms (13 digits) or in s (10 digits) within TIME_WINDOW_MS of now: what Herald logs of times. */
function isTimeAroundNow(digits: string): boolean {
  const unitMs = digits.length === 13 ? 1 : digits.length === 10 ? 1000 : 0;
  return unitMs > 0 && Math.abs(Number(digits) * unitMs - Date.now()) <= TIME_WINDOW_MS;
}

/**
 * A bare run of digits that is an E.164 number with its `+` left out: a country code and a length
 * that country's numbers can have (libphonenumber's "possible" check), and not a time around now
 * (such runs begin with 1 or 2 and no number of that length does). Byte counts and most counters
 * are not possible numbers either.
 */
function barePhone(match: string): string {
  const digits = match.startsWith('00') ? match.slice(2) : match;
  if (digits.length < 8 || digits.length > 15 || isTimeAroundNow(digits)) return match;
  return isPossiblePhoneNumber(`+${digits}`) ? '[phone]' : match;
}

/** Replaces email addresses and phone numbers in free text (error messages, provider answers, URLs). */
export function scrub(text: string): string {
  return text.replace(EMAIL, '[email]').replace(INTERNATIONAL, '[phone]').replace(GROUPED, groupedPhone).replace(DIGITS, barePhone);
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
  return Object.fromEntries(
    Object.entries(withoutCommandArguments(value as Record<string, unknown>)).map(([k, v]) => [k, scrubDeep(v, depth + 1)]),
  );
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
