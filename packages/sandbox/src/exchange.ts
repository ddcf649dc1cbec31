/**
 * The life of one emulated API request, shared by both providers: log it, check credentials,
 * apply an injected fault, do the operation, then answer — late, never, or by dropping the
 * connection when the behaviour or the fault says so.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SandboxState } from './state.js';
import type { WebhookOutbox } from './webhooks.js';
import type { Operation, SandboxRequest } from './types.js';

/** How to answer a request. */
export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Wait this long before answering (slow recipients). */
  delayMs?: number;
  /** Never answer (status reads that hang); the client's timeout ends the request. */
  hang?: boolean;
}

export interface SandboxContext {
  state: SandboxState;
  /** Aborted when the sandbox closes, to end pending delays. */
  closing: AbortSignal;
  indexLagMs: number;
  slowMs: number;
  /** Pushes the messages' events to Herald when a webhook target is configured (webhooks.ts). */
  webhooks: WebhookOutbox;
}

export interface ExchangeSpec {
  provider: SandboxRequest['provider'];
  operation: Operation;
  /** The email or number the request is about; faults with `match` look at it. */
  recipient?: string | undefined;
  /** A search's JSON body, recorded with the request when the question is not in its URL. */
  search?: unknown;
  /** Checks credentials; an answer here ends the request before any fault applies. */
  authorize(): Answer | undefined;
  /** The provider's error answer for an injected `status_*` fault. */
  faultAnswer(status: 429 | 500 | 503, retryAfterSeconds: number): Answer;
  /** Does the operation (creating, reading) and says how to answer. */
  run(): Answer;
}

const FAULT_STATUS = { status_500: 500, status_503: 503, status_429: 429 } as const;

/** Runs one API request through logging, auth, faults and the operation. */
export async function exchange(ctx: SandboxContext, request: FastifyRequest, reply: FastifyReply, spec: ExchangeSpec): Promise<void> {
  const entry = ctx.state.logRequest({
    provider: spec.provider,
    operation: spec.operation,
    method: request.method,
    path: request.url.split('?')[0] ?? request.url,
    url: request.url,
    ...(spec.recipient ? { recipient: spec.recipient } : {}),
    ...(spec.search !== undefined ? { search: spec.search } : {}),
    status: null,
    outcome: 'pending',
    at: Date.now(),
  });

  const denied = spec.authorize();
  if (denied) return answer(ctx, reply, entry, denied);

  const fault = ctx.state.faults.take(spec.operation, spec.recipient);
  if (fault) entry.fault = fault.mode;
  if (fault?.mode === 'hang') return hold(reply, entry);
  if (fault?.mode === 'hang_then_accept') {
    // The provider carries the request out only after the client has given up on it: a send
    // whose message appears later than the answer Herald waited for.
    hold(reply, entry);
    sleep(fault.acceptAfterMs, undefined, { signal: ctx.closing }).then(
      () => spec.run(),
      () => undefined,
    );
    return;
  }

  const result =
    fault && fault.mode in FAULT_STATUS
      ? withoutRetryAfter(
          spec.faultAnswer(FAULT_STATUS[fault.mode as keyof typeof FAULT_STATUS], fault.retryAfterSeconds),
          fault.omitRetryAfter,
        )
      : spec.run();

  if (fault?.mode === 'accept_then_hang') return hold(reply, entry);
  if (fault?.mode === 'accept_then_drop') {
    entry.outcome = 'dropped';
    reply.hijack();
    request.raw.socket.destroy();
    return;
  }
  if (result.hang) return hold(reply, entry);
  return answer(ctx, reply, entry, result);
}

async function answer(ctx: SandboxContext, reply: FastifyReply, entry: SandboxRequest, result: Answer): Promise<void> {
  if (result.delayMs) {
    try {
      await sleep(result.delayMs, undefined, { signal: ctx.closing });
    } catch {
      // The sandbox is closing and drops every connection: nothing left to answer.
      reply.hijack();
      return;
    }
  }
  entry.status = result.status;
  entry.outcome = 'answered';
  await reply
    .code(result.status)
    .headers(result.headers ?? {})
    .send(result.body ?? '');
}

/** Takes the request away from Fastify and never answers; closing the sandbox destroys the socket. */
function hold(reply: FastifyReply, entry: SandboxRequest): void {
  entry.outcome = 'hang';
  reply.hijack();
}

/** The answer without its Retry-After header, when the fault asks for a bare 429. */
function withoutRetryAfter(result: Answer, omit: boolean | undefined): Answer {
  if (!omit || !result.headers) return result;
  return {
    ...result,
    headers: Object.fromEntries(Object.entries(result.headers).filter(([name]) => name.toLowerCase() !== 'retry-after')),
  };
}
