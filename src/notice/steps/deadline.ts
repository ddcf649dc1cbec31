import { iso } from '../../clock.js';
import { done, retryAt, type StepOutcome } from '../outcome.js';
import { UNDECIDED_STATES } from '../states.js';
import type { StepContext } from './context.js';
import { decideFallback } from './decide.js';
import { observeEmail } from './observe.js';

/**
 * The deadline step: never before the deadline; reads the email status one last time and
 * records it; then, unless that read proved delivery, decides the fallback.
 */
export async function runDeadline(ctx: StepContext, id: string): Promise<StepOutcome> {
  const notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  if (!UNDECIDED_STATES.includes(notice.state)) return done(`state is ${notice.state}`);
  const now = ctx.now();
  if (now < notice.deadline) return retryAt(notice.deadline, 'deadline not reached');

  if (notice.emailChannel.providerMessageId) {
    await observeEmail(ctx, notice, true);
  } else {
    // No message to read: the read is recorded all the same, saying why.
    await ctx.store.transition(id, now, iso(now), {
      name: 'observeEmail',
      onlyFrom: UNDECIDED_STATES,
      entries: [
        {
          type: 'email.observed',
          attemptId: notice.emailChannel.attemptId,
          providerStatus: null,
          status: 'unknown',
          observedAt: iso(now),
          nextCheckAt: null,
          deadline: iso(notice.deadline),
          note: notice.state === 'accepted' ? 'email_not_sent' : 'email_send_unconfirmed',
        },
      ],
    });
  }
  return decideFallback(ctx, id, 'email_deadline_elapsed');
}
