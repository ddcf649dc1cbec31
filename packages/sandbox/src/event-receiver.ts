/**
 * A caller's side of Herald's events, for `npm start`: an endpoint that receives whatever Herald
 * POSTs to it (`POST /__sandbox/events`) and a page that lists what came, newest first, each
 * verified with the endpoint's `whsec_` secret when the page is given it
 * (`GET /__sandbox/events?secret=whsec_…`), as a caller would verify it with the
 * `standardwebhooks` package. So the whole loop — a notice, its outcome, the signed event — can
 * be seen without writing a line of code.
 */
import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';

/** One POST the receiver took. */
export interface ReceivedEvent {
  receivedAt: number;
  headers: Record<string, string>;
  body: string;
}

/** How many POSTs are kept: the oldest go first. */
const KEPT = 500;

export class EventReceiver {
  private readonly received: ReceivedEvent[] = [];

  take(event: ReceivedEvent): void {
    this.received.unshift(event);
    if (this.received.length > KEPT) this.received.length = KEPT;
  }

  /** What came, newest first; with `secret`, each says whether its signature holds. */
  list(
    secret?: string,
  ): { receivedAt: string; webhookId: string; type: string; noticeId: string; verified: boolean | null; body: unknown }[] {
    const webhook = secret ? new Webhook(secret) : undefined;
    return this.received.map((event) => {
      let body: { type?: string; data?: { noticeId?: string } } = {};
      try {
        body = JSON.parse(event.body) as typeof body;
      } catch {
        // Shown as it came.
      }
      let verified: boolean | null = null;
      if (webhook) {
        try {
          webhook.verify(event.body, event.headers);
          verified = true;
        } catch {
          verified = false;
        }
      }
      return {
        receivedAt: new Date(event.receivedAt).toISOString(),
        webhookId: event.headers['webhook-id'] ?? '',
        type: body.type ?? '',
        noticeId: body.data?.noticeId ?? '',
        verified,
        body,
      };
    });
  }

  clear(): void {
    this.received.length = 0;
  }
}

/** Registers the receiver's routes, in a scope of their own (it reads bodies as the bytes signed). */
export function registerEventReceiver(app: FastifyInstance, receiver: EventReceiver): void {
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'string', bodyLimit: 1_048_576 }, (_request, body, done) => done(null, body));
    scope.post('/__sandbox/events', async (request, reply) => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(request.headers)) if (typeof value === 'string') headers[name] = value;
      receiver.take({ receivedAt: Date.now(), headers, body: typeof request.body === 'string' ? request.body : '' });
      return reply.code(204).send();
    });
  });
  app.get<{ Querystring: { secret?: string } }>('/__sandbox/events', async (request, reply) => {
    const events = receiver.list(request.query.secret);
    if (!(request.headers.accept ?? '').includes('text/html')) return { events };
    return reply.type('text/html; charset=utf-8').send(page(events, request.query.secret !== undefined));
  });
  app.delete('/__sandbox/events', async (_request, reply) => {
    receiver.clear();
    return reply.code(204).send();
  });
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(events: ReturnType<EventReceiver['list']>, checked: boolean): string {
  const rows = events
    .map(
      (e) =>
        `<tr><td>${escape(e.receivedAt)}</td><td><code>${escape(e.type)}</code></td><td><code>${escape(e.noticeId)}</code></td><td><code>${escape(e.webhookId)}</code></td><td>${
          e.verified === null ? '—' : e.verified ? 'verified' : '<strong>does not verify</strong>'
        }</td><td><pre>${escape(JSON.stringify(e.body, null, 2))}</pre></td></tr>`,
    )
    .join('\n');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Events received</title>
<style>body{font:14px/1.4 system-ui,sans-serif;margin:24px}table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}pre{margin:0;font-size:12px}</style></head>
<body><h1>Events Herald posted here</h1>
<p>${events.length} received, newest first.${checked ? '' : " Add <code>?secret=whsec_…</code> (the endpoint's secret) to verify their signatures."} Reload for new ones.</p>
<table><tr><th>received</th><th>type</th><th>notice</th><th>webhook-id</th><th>signature</th><th>body</th></tr>
${rows}</table></body></html>`;
}
