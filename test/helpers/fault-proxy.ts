/**
 * A small HTTP proxy in front of a Herald web, for the client's tests: it forwards each request,
 * unless a fault was planned for it, and notes what reached it. Faults are taken in order, each
 * by the first request it matches: an answer of its own (a 503 with Retry-After), a connection
 * reset before forwarding (nothing reached Herald), a reset after forwarding (Herald did the
 * work, the answer is lost), or no answer at all.
 */
import { createServer, request as forward, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault =
  | { kind: 'answer'; status: number; headers?: Record<string, string>; body?: string }
  | { kind: 'reset' }
  | { kind: 'forward-then-reset' }
  | { kind: 'hang' };

/** Which requests a fault is for; every request when empty. */
export interface FaultMatch {
  method?: string;
  path?: RegExp;
}

/** A request as it reached the proxy, and what the proxy did with it. */
export interface SeenRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  fault: Fault['kind'] | 'forwarded';
}

export class FaultProxy {
  readonly seen: SeenRequest[] = [];
  url = '';
  private readonly planned: { match: FaultMatch; fault: Fault }[] = [];
  private server: Server | undefined;

  constructor(private readonly target: string) {}

  /** Plans `fault` for the next request that matches. */
  fail(fault: Fault, match: FaultMatch = {}): this {
    this.planned.push({ match, fault });
    return this;
  }

  /** Requests that reached the proxy for a method (and path). */
  requests(method: string, path?: RegExp): SeenRequest[] {
    return this.seen.filter((s) => s.method === method && (path === undefined || path.test(s.path)));
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      void this.handle(req, res);
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const path = req.url ?? '/';
    const at = this.planned.findIndex(
      ({ match }) => (match.method === undefined || match.method === req.method) && (match.path === undefined || match.path.test(path)),
    );
    const fault = at === -1 ? undefined : this.planned.splice(at, 1)[0]!.fault;
    const key = req.headers['idempotency-key'];
    this.seen.push({
      method: req.method ?? 'GET',
      path,
      idempotencyKey: typeof key === 'string' ? key : undefined,
      fault: fault?.kind ?? 'forwarded',
    });
    if (fault?.kind === 'answer') {
      res.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers }).end(fault.body ?? '');
      return;
    }
    if (fault?.kind === 'reset') {
      req.socket.destroy();
      return;
    }
    if (fault?.kind === 'hang') return;
    const upstream = forward(`${this.target}${path}`, { method: req.method, headers: { ...req.headers, host: new URL(this.target).host } });
    upstream.on('response', (answer) => {
      if (fault?.kind === 'forward-then-reset') {
        // Herald has done the work; the caller never hears of it.
        answer.resume();
        answer.on('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => req.socket.destroy());
    upstream.end(body);
  }
}
