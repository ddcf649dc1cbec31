/**
 * Which URLs an event endpoint may have, and the address check every delivery makes: an
 * endpoint is a URL a caller chose, and Herald's workers POST to it, so without these checks a
 * caller could make the workers reach loopback, link-local or private addresses (the worker's
 * own metrics, a cloud metadata service, Redis). The check is made when the endpoint is created
 * and again on every connection, against the address it resolves to then (a name that resolved
 * to a public address at creation may resolve to a private one later).
 */
import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { promisify } from 'node:util';

/** The most characters an endpoint URL may have. */
export const MAX_ENDPOINT_URL_LENGTH = 2048;

const PRIVATE = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  PRIVATE.addSubnet(network, prefix, 'ipv6');
}

/** True for a loopback, link-local, private or otherwise non-public address (IPv4-mapped IPv6 included). */
export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return PRIVATE.check(mapped[1]!, 'ipv4');
  const version = isIP(address);
  if (version === 0) return true;
  return PRIVATE.check(address, version === 4 ? 'ipv4' : 'ipv6');
}

export interface EndpointUrlRules {
  /** Only `https://` (production). */
  httpsOnly: boolean;
  /** Loopback, link-local and private addresses allowed (HERALD_ALLOW_PRIVATE_EVENT_URLS). */
  allowPrivate: boolean;
}

/** Why an endpoint URL is refused, as the API says it. */
export class EndpointUrlError extends Error {}

const lookupAll = promisify(dnsLookup) as unknown as (host: string, opts: { all: true }) => Promise<LookupAddress[]>;

/**
 * Checks an endpoint URL as a caller gives it: a well-formed `https://` URL (or `http://` outside
 * production), no credentials in it, a host that resolves, and, unless allowed, to no private
 * address. Returns the URL as Herald keeps it.
 */
export async function checkEndpointUrl(raw: string, rules: EndpointUrlRules, resolve = lookupAll): Promise<string> {
  if (raw.length > MAX_ENDPOINT_URL_LENGTH) throw new EndpointUrlError(`url must be at most ${MAX_ENDPOINT_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new EndpointUrlError('url is not a URL');
  }
  const protocols = rules.httpsOnly ? ['https:'] : ['https:', 'http:'];
  if (!protocols.includes(url.protocol))
    throw new EndpointUrlError(rules.httpsOnly ? 'url must be https:// in production' : 'url must be http:// or https://');
  if (url.username || url.password) throw new EndpointUrlError('url must not carry credentials: the deliveries are signed instead');
  if (url.hash) throw new EndpointUrlError('url must not have a #fragment');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await resolve(host, { all: true })).map((a) => a.address);
  } catch {
    throw new EndpointUrlError(`url's host ${host} does not resolve`);
  }
  if (!rules.allowPrivate && addresses.some(isPrivateAddress)) {
    throw new EndpointUrlError(`url's host resolves to a loopback, link-local or private address, which endpoints may not have`);
  }
  return url.toString();
}

/**
 * A `lookup` for node:http(s) that refuses, unless allowed, any private address a host resolves
 * to at connection time, so that a delivery reaches only what the endpoint's rules allow.
 */
export function guardedLookup(allowPrivate: boolean): typeof dnsLookup {
  return ((
    hostname: string,
    options: object,
    callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => {
    dnsLookup(hostname, { ...options, all: true }, (error, found) => {
      if (error) return callback(error, '', 0);
      const addresses = found as LookupAddress[];
      const allowed = allowPrivate ? addresses : addresses.filter((a) => !isPrivateAddress(a.address));
      if (allowed.length === 0) {
        const refused = Object.assign(new Error(`${hostname} resolves to a private address only; event endpoints may not reach it`), {
          code: 'EPRIVATEADDRESS',
        });
        return callback(refused, '', 0);
      }
      if ((options as { all?: boolean }).all) return callback(null, allowed);
      callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  }) as typeof dnsLookup;
}
