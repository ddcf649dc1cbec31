import { isIP } from 'node:net';
import type { FastifyReply } from 'fastify';
import type { RedisClient } from '../store/redis.js';
import type { Clock } from '../clock.js';
import { AuthFailureStore } from '../store/admin.js';
import type { Keys } from '../store/keys.js';
import { errorBody } from './errors.js';

const WINDOW_MS = 60_000;
/** Client addresses remembered as blocked by one process; the oldest go first past this. */
const MAX_BLOCKED = 10_000;

/**
 * Failed authentications (a wrong API key, admin token, login, metrics token, or a webhook that
 * does not verify) per client address per minute, counted in Redis so every web process shares
 * the count. It limits guessing, not users: a request whose credential holds is never refused
 * here, whatever its address did before; only failing attempts over the limit get 429
 * `rate_limited` instead of their 401/403, until the address's minute ends.
 *
 * Each failure takes its place in the count atomically (one MULTI) before it is answered, so a burst
 * of concurrent guesses gets at most the limit's worth of 401s from all processes together. A
 * process that saw the address go over the limit answers its next failures from memory.
 */
export class AuthFailures {
  private readonly blocked = new Map<string, number>();
  private readonly store: AuthFailureStore;

  constructor(
    redis: RedisClient,
    keys: Keys,
    private readonly limitPerMinute: number,
    private readonly clock: Clock,
  ) {
    this.store = new AuthFailureStore(redis, keys);
  }

  /**
   * Counts a failed attempt of the client at `ip`; returns the seconds it must wait when this
   * attempt is over the limit (answer 429), undefined when it is still within it.
   */
  async fail(ip: string): Promise<number | undefined> {
    if (this.limitPerMinute <= 0) return undefined;
    const address = clientBucket(ip);
    const known = this.waitOf(address);
    if (known !== undefined) return known;
    let count: number;
    let ttlMs: number;
    try {
      ({ count, ttlMs } = await this.store.count(address, WINDOW_MS));
    } catch {
      // Without Redis the request fails on its own (401/403); the count is not worth a 503.
      return undefined;
    }
    if (!(count > this.limitPerMinute)) return undefined;
    const waitMs = ttlMs > 0 ? ttlMs : WINDOW_MS;
    this.blocked.delete(address);
    this.blocked.set(address, this.clock.now() + waitMs);
    if (this.blocked.size > MAX_BLOCKED) this.blocked.delete(this.blocked.keys().next().value!);
    return Math.ceil(waitMs / 1000);
  }

  private waitOf(address: string): number | undefined {
    const until = this.blocked.get(address);
    if (until === undefined) return undefined;
    const left = until - this.clock.now();
    if (left <= 0) {
      this.blocked.delete(address);
      return undefined;
    }
    return Math.ceil(left / 1000);
  }
}

/**
 * What the limiter counts a client by: an IPv4 address as it is (an IPv4-mapped IPv6 address as
 * its IPv4), an IPv6 address by its /64 (one host may hold a whole /64), anything else as one
 * bucket. So a key of the limiter stays short whatever a request carries.
 */
export function clientBucket(ip: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped) return mapped[1]!;
  const version = isIP(ip);
  if (version === 4) return ip;
  if (version === 6) return `${expandIpv6(ip).slice(0, 4).join(':')}::/64`;
  return 'unknown';
}

/** The eight 16-bit groups of a valid IPv6 address, in lower-case hex without leading zeros. */
function expandIpv6(ip: string): string[] {
  const bare = ip.split('%')[0]!.toLowerCase();
  const [head, tail] = bare.includes('::') ? bare.split('::') : [bare, undefined];
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const toHex = (group: string) => (group.includes('.') ? ipv4Groups(group) : [String(parseInt(group, 16).toString(16))]);
  const left = groups(head).flatMap(toHex);
  const right = groups(tail).flatMap(toHex);
  const fill = tail === undefined ? [] : Array.from({ length: 8 - left.length - right.length }, () => '0');
  return [...left, ...fill, ...right];
}

function ipv4Groups(dotted: string): string[] {
  const [a, b, c, d] = dotted.split('.').map(Number) as [number, number, number, number];
  return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
}

/** The 429 answer of a blocked client. */
export function sendTooManyFailures(reply: FastifyReply, retryAfterSeconds: number): FastifyReply {
  return reply
    .status(429)
    .header('retry-after', String(retryAfterSeconds))
    .send(errorBody('rate_limited', `Too many failed authentications from this address; retry in ${retryAfterSeconds} s.`));
}
