/**
 * The HTTP connections of one provider client: a keep-alive agent per protocol, handed to the
 * client's SDK, and a `fetch` over them for the clients that take a fetch (Postmark, Infrai).
 *
 * - Sockets are kept open between calls, so a status check or a send does not pay a TCP and TLS
 *   handshake each time, and at most `maxSockets` are open to one host.
 * - An idle socket is closed after `idleMs`, below the idle timeouts of the load balancers in
 *   front of the providers' APIs and of Node's HTTP server (5 s): a socket is seldom reused just
 *   as the server closes it. Node's agent also honours a server's `Keep-Alive: timeout=` hint.
 *   A call that still meets a socket closed under it (ECONNRESET, "socket hang up") fails as it
 *   would on a fresh connection: a transport error, classified `server_error` (classify.ts), so a
 *   send is left in doubt and searched for before any new attempt. Nothing here resends.
 * - `close()` destroys the sockets; the worker calls it once its jobs have stopped.
 *
 * The fetch is Node's `http.request` under the fetch signature, for clients that would otherwise
 * use the global fetch: the global fetch's WHATWG machinery (request objects, body streams, abort
 * signals) costs several times the CPU of the exchange itself, and its connection pool cannot be
 * given to one client. It buffers the whole answer (provider answers are small JSON) into a
 * `BufferedResponse`, and follows no redirects (a provider API answers, it does not redirect).
 */
import http from 'node:http';
import https from 'node:https';

/** Sockets open to one host, at most: beyond it calls wait for a socket (within their timeout). */
export const MAX_SOCKETS_PER_HOST = 50;
/** How long a socket may stay idle in the pool before it is closed. */
export const IDLE_SOCKET_MS = 4_000;

export interface ProviderTransport {
  readonly httpAgent: http.Agent;
  readonly httpsAgent: https.Agent;
  /** `fetch` over the agents, each exchange (answer body included) bounded by `timeoutMs`. */
  fetch(timeoutMs: number): typeof fetch;
  /** One request over the agents, bounded by `timeoutMs` (see `exchange`). */
  exchange(url: URL, init: ExchangeRequest, timeoutMs: number): Promise<ExchangeAnswer>;
  /** Destroys every socket of the agents; calls made after it open new ones. */
  close(): void;
}

/** The options of a provider client's agents (also given to the AWS clients, which build their own from them). */
export function keepAliveAgentOptions(opts: { maxSockets?: number; idleMs?: number } = {}) {
  const maxSockets = opts.maxSockets ?? MAX_SOCKETS_PER_HOST;
  return {
    keepAlive: true,
    maxSockets,
    maxFreeSockets: maxSockets,
    // The agent applies `timeout` to the sockets it keeps idle; requests set their own bounds.
    timeout: opts.idleMs ?? IDLE_SOCKET_MS,
    scheduling: 'lifo' as const,
  };
}

/** The connections of one provider client. */
export function createTransport(opts: { maxSockets?: number; idleMs?: number } = {}): ProviderTransport {
  const agentOptions = keepAliveAgentOptions(opts);
  const httpAgent = new http.Agent(agentOptions);
  const httpsAgent = new https.Agent(agentOptions);
  return {
    httpAgent,
    httpsAgent,
    fetch: (timeoutMs) => agentFetch({ httpAgent, httpsAgent }, timeoutMs),
    exchange: (url, init, timeoutMs) => exchange({ httpAgent, httpsAgent }, url, init, timeoutMs),
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

/** The error a fetch rejects with when its bound passes: what `AbortSignal.timeout` aborts with. */
function timeoutError(): DOMException {
  return new DOMException('The operation was aborted due to timeout', 'TimeoutError');
}

/** One HTTP exchange as the transport makes it. */
export interface ExchangeRequest {
  method: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Aborts the exchange with the signal's reason. */
  signal?: AbortSignal;
}

/** A whole answer: status, headers (lower-case names) and the body's bytes. */
export interface ExchangeAnswer {
  status: number;
  statusText: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/**
 * One request over the agents, bounded by `timeoutMs` from its start to the last byte of the
 * answer: a transport failure rejects with Node's error (its `code`), the bound with a
 * `TimeoutError` like `AbortSignal.timeout`'s. Redirects are not followed.
 */
function exchange(
  agents: { httpAgent: http.Agent; httpsAgent: https.Agent },
  url: URL,
  init: ExchangeRequest,
  timeoutMs: number,
): Promise<ExchangeAnswer> {
  return new Promise<ExchangeAnswer>((resolve, reject) => {
    const { signal } = init;
    if (signal?.aborted) throw signal.reason;
    const secure = url.protocol === 'https:';
    if (!secure && url.protocol !== 'http:') throw new TypeError(`provider transport: not an http(s) URL: ${url.href}`);
    const headers = init.body === undefined ? init.headers : { ...init.headers, 'content-length': String(init.body.byteLength) };
    const request = (secure ? https : http).request(url, {
      method: init.method,
      headers,
      agent: secure ? agents.httpsAgent : agents.httpAgent,
    });
    let settled = false;
    const finish = (error: unknown, answer?: ExchangeAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (answer) resolve(answer);
      else {
        request.destroy();
        reject(error);
      }
    };
    const onAbort = () => finish(signal!.reason);
    const timer = setTimeout(() => finish(timeoutError()), Math.ceil(timeoutMs));
    signal?.addEventListener('abort', onAbort, { once: true });
    request.once('error', (error) => finish(error));
    request.once('response', (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.once('error', (error) => finish(error));
      answer.once('aborted', () => finish(Object.assign(new Error('the answer was cut off'), { code: 'ECONNRESET' })));
      answer.once('end', () =>
        finish(undefined, {
          status: answer.statusCode ?? 0,
          statusText: answer.statusMessage ?? '',
          headers: answer.headers,
          body: Buffer.concat(chunks),
        }),
      );
    });
    request.end(init.body);
  });
}

function agentFetch(agents: { httpAgent: http.Agent; httpsAgent: https.Agent }, timeoutMs: number): typeof fetch {
  return async (input, init = {}) => {
    const url = typeof input === 'string' ? new URL(input) : input instanceof URL ? input : undefined;
    if (url === undefined) throw new TypeError('provider fetch: the request must be given as a URL');
    const answer = await exchange(
      agents,
      url,
      {
        method: init.method ?? 'GET',
        headers: requestHeaders(init.headers),
        body: requestBody(init.body),
        signal: init.signal ?? undefined,
      },
      timeoutMs,
    );
    // The clients it is given to read no more of a Response than BufferedResponse has (test/adapters).
    return new BufferedResponse(answer.status, answer.statusText, answer.headers, answer.body) as unknown as Response;
  };
}

/** The request body as bytes; provider clients send strings (JSON, form-encoded). */
function requestBody(body: RequestInit['body']): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof URLSearchParams) return Buffer.from(body.toString());
  throw new TypeError('provider fetch: the body must be a string, bytes or URLSearchParams');
}

function requestHeaders(headers: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === undefined) return out;
  const entries = headers instanceof Headers || Array.isArray(headers) ? new Headers(headers).entries() : Object.entries(headers);
  for (const [name, value] of entries) {
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}

/**
 * One buffered answer, with the parts of a fetch `Response` that provider clients read: `status`,
 * `ok`, `statusText`, `headers.get`/`has`, and the body as text, JSON or bytes (once, as a fetch
 * body). A WHATWG Response would wrap the bytes already in hand in a stream and a header list:
 * per answer, more CPU than the rest of the exchange.
 */
export class BufferedResponse {
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null; has(name: string): boolean };
  bodyUsed = false;

  constructor(
    readonly status: number,
    readonly statusText: string,
    headers: http.IncomingHttpHeaders,
    private readonly body: Buffer,
  ) {
    this.ok = status >= 200 && status < 300;
    this.headers = {
      get(name) {
        const value = headers[name.toLowerCase()];
        if (value === undefined) return null;
        return Array.isArray(value) ? value.join(', ') : value;
      },
      has: (name) => headers[name.toLowerCase()] !== undefined,
    };
  }

  private consume(): Buffer {
    if (this.bodyUsed) throw new TypeError('provider fetch: the body has already been read');
    this.bodyUsed = true;
    return this.body;
  }

  async text(): Promise<string> {
    return this.consume().toString('utf8');
  }

  async json(): Promise<unknown> {
    return JSON.parse(this.consume().toString('utf8'));
  }

  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = this.consume();
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }
}
