/**
 * The events' listener: a process of its own that answers every `POST /events` with 204 as soon
 * as the body is in, and records, per delivery, its `webhook-id`, the entry time the body
 * carries (`timestamp`) and the time it arrived. `GET /received` returns the records (and one
 * body, for the raw baseline to send the same bytes); `POST /reset` forgets them. It verifies
 * no signature: the figure is Herald's sending, not a receiver's checking. Env: PORT.
 */
import { createServer } from 'node:http';

/** [webhook-id, entry time (ms), arrival time (ms)] */
type Record = [string, number, number];

let records: Record[] = [];
let sample: string | undefined;

const server = createServer((request, response) => {
  if (request.method === 'POST' && request.url === '/events') {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      let entryAt = Number.NaN;
      try {
        entryAt = Date.parse((JSON.parse(body) as { timestamp?: string }).timestamp ?? '');
      } catch {
        // Recorded with no entry time: the count still sees it.
      }
      records.push([String(request.headers['webhook-id'] ?? ''), entryAt, at]);
      sample ??= body;
      response.writeHead(204).end();
    });
    return;
  }
  if (request.method === 'GET' && request.url === '/received') {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ records, sample }));
    return;
  }
  if (request.method === 'GET' && request.url === '/count') {
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: records.length }));
    return;
  }
  if (request.method === 'POST' && request.url === '/reset') {
    records = [];
    response.writeHead(204).end();
    return;
  }
  if (request.method === 'GET' && request.url === '/healthz') {
    response.writeHead(200).end('ok');
    return;
  }
  response.writeHead(404).end();
});
// Herald's deliveries and the raw baseline's keep their connections open between requests.
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
