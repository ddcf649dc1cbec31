import type { Logger } from 'pino';

/** What cancel logs to: a pino logger, or a request's. */
type Log = Pick<Logger, 'debug'>;
import { iso, type Clock } from '../clock.js';
import type { NoticeStore } from '../store/notices.js';
import type { Scheduler } from './outcome.js';
import type { NoticeState } from './states.js';

/** What a cancel came to: canceled, or the state that kept it from being canceled. */
export type CancelResult = { canceled: true } | { canceled: false; state: NoticeState };

/**
 * The `cancel` transition: a notice nothing has been handed to a provider for ends `canceled`.
 * It needs no provider, so the web process runs it for `POST /v1/notices/:id/cancel`.
 */
export async function cancelNotice(
  deps: { store: NoticeStore; scheduler: Scheduler; clock: Clock; log: Log },
  id: string,
): Promise<CancelResult | null> {
  const now = deps.clock.now();
  const result = await deps.store.transition(id, now, iso(now), {
    name: 'cancel',
    entries: [
      { type: 'notice.canceled', by: 'api' },
      { type: 'notice.completed', state: 'canceled' },
    ],
    due: 'remove',
  });
  if (!result.ok) return result.reason === 'state' ? { canceled: false, state: result.state } : null;
  // The deadline job would only find the notice canceled.
  await deps.scheduler.dropDeadline(id).catch((error: unknown) => deps.log.debug({ err: error, noticeId: id }, 'deadline job not removed'));
  return { canceled: true };
}
