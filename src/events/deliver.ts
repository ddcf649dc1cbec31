/**
 * One delivery attempt of one event to one endpoint: a POST signed per Standard Webhooks
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature` with the endpoint's `whsec_` secret),
 * answered within 10 s. A 2xx is delivered; a 410 disables the endpoint; anything else (another
 * status, no answer, a refused address) is retried with exponential backoff and jitter until
 * `retryForMs` after the event, and an endpoint still failing then is disabled.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { CallerEventType, DeliveryOutcome, EventEndpointStore } from '../store/event-endpoints.js';
import type { EventDeliveryJob } from './dispatch.js';
import { guardedLookup, isPrivateAddress } from './endpoint-url.js';

/** How long an endpoint has to answer. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** The longest wait between two attempts. */
export const MAX_RETRY_DELAY_MS = 3_600_000;
/** How much of an endpoint's answer is read (and a short part kept for the record). */
const ANSWER_READ_BYTES = 64 * 1024;

export interface DeliveryDeps {
  endpoints: EventEndpointStore;
  clock: Clock;
  logger: Pick<Logger, 'warn' | 'info'>;
  settings: { retryForMs: number; retryBaseMs: number; allowPrivateUrls: boolean };
  /** Jitter in [0, 1) (tests pass a fixed one). */
  random?: () => number;
}

/** What to do with the job after an attempt. */
export type DeliveryStep = { kind: 'done'; outcome: DeliveryOutcome } | { kind: 'retry'; at: number; attempts: number };

/** The n-th retry's delay: about `base × 2^(n−1)`, jittered between half and the whole of it, at most an hour. */
export function retryDelayMs(base: number, retry: number, random: () => number = Math.random): number {
  const full = Math.min(MAX_RETRY_DELAY_MS, base * 2 ** Math.max(0, retry - 1));
  return Math.round(full / 2 + (full / 2) * random());
}

/** Makes one attempt of `job` and records it; says whether the job is done or when to try again. */
export async function deliverEvent(deps: DeliveryDeps, job: EventDeliveryJob): Promise<DeliveryStep> {
  const endpoint = await deps.endpoints.get(job.endpointId);
  const attempts = (job.attempts ?? 0) + 1;
  const record = (outcome: DeliveryOutcome, status: number | null, error: string | null, settled: boolean) =>
    deps.endpoints.recordAttempt(
      job.endpointId,
      {
        eventId: job.eventId,
        type: job.type as CallerEventType,
        noticeId: job.noticeId,
        outcome,
        status,
        attempts,
        error,
        at: deps.clock.now(),
      },
      settled,
    );
  if (!endpoint || endpoint.disabledAt !== undefined) {
    // Deleted, or disabled since: the event is settled for it, undelivered.
    await record('dropped', null, endpoint ? `the endpoint is disabled (${endpoint.disabledReason})` : 'the endpoint was deleted', true);
    return { kind: 'done', outcome: 'dropped' };
  }
  const answer = await post(endpoint.url, endpoint.secret, job, deps.settings.allowPrivateUrls, deps.clock.now());
  if (answer.status !== null && answer.status >= 200 && answer.status < 300) {
    await record('delivered', answer.status, null, true);
    return { kind: 'done', outcome: 'delivered' };
  }
  const now = deps.clock.now();
  if (answer.status === 410) {
    // The endpoint says it is gone for good: no more events go to it.
    await deps.endpoints.disable(endpoint.id, 'gone', now);
    await record('gone', 410, answer.error, true);
    deps.logger.warn({ endpointId: endpoint.id }, 'event endpoint answered 410: disabled');
    return { kind: 'done', outcome: 'gone' };
  }
  const at = now + retryDelayMs(deps.settings.retryBaseMs, attempts, deps.random);
  if (at - job.at > deps.settings.retryForMs) {
    await deps.endpoints.disable(endpoint.id, 'failing', now);
    await record('given_up', answer.status, answer.error, true);
    deps.logger.warn(
      { endpointId: endpoint.id, eventId: job.eventId, attempts },
      'event endpoint still failing when its retries ran out: disabled',
    );
    return { kind: 'done', outcome: 'given_up' };
  }
  await record('failed', answer.status, answer.error, false);
  return { kind: 'retry', at, attempts };
}

/** The signed POST, and what came of it: the status, or why there was none. */
async function post(
  url: string,
  secret: string,
  job: EventDeliveryJob,
  allowPrivate: boolean,
  now: number,
): Promise<{ status: number | null; error: string | null }> {
  const target = new URL(url);
  const host = target.hostname.replace(/^\[|\]$/g, '');
  // An address literal is connected to without a lookup: it is checked here.
  if (!allowPrivate && isIP(host) && isPrivateAddress(host)) return { status: null, error: 'the endpoint address is private' };
  const timestamp = new Date(Math.floor(now / 1000) * 1000);
  const signature = new Webhook(secret).sign(job.eventId, timestamp, job.body);
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'Herald-Webhooks/1',
    'webhook-id': job.eventId,
    'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    'webhook-signature': signature,
    'content-length': String(Buffer.byteLength(job.body)),
  };
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const req = send(
      target,
      { method: 'POST', headers, lookup: guardedLookup(allowPrivate), timeout: DELIVERY_TIMEOUT_MS },
      (res: IncomingMessage) => {
        let read = 0;
        let snippet = '';
        res.on('data', (chunk: Buffer) => {
          if (snippet.length < 200) snippet += chunk.toString('utf8').slice(0, 200 - snippet.length);
          read += chunk.length;
          if (read > ANSWER_READ_BYTES) res.destroy();
        });
        const done = () => {
          const status = res.statusCode ?? null;
          resolve({
            status,
            error:
              status !== null && status >= 200 && status < 300
                ? null
                : `HTTP ${status}${snippet ? `: ${snippet.replace(/\s+/g, ' ').trim()}` : ''}`,
          });
        };
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      },
    );
    // No answer within the bound: the same as a failure, retried.
    req.setTimeout(DELIVERY_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${DELIVERY_TIMEOUT_MS / 1000} s`)));
    req.on('error', (error) => resolve({ status: null, error: error.message.slice(0, 200) }));
    req.end(job.body);
  });
}
