import { iso } from '../../clock.js';
import { done, retryAt, type StepOutcome } from '../outcome.js';
import type { StepContext } from './context.js';
import { runDeadline } from './deadline.js';
import { sendEmail, sendSms } from './send.js';

/**
 * Drives an overdue notice forward with whatever step its state needs; used by the
 * reconciler when a job was lost, killed or never enqueued.
 */
export async function drive(ctx: StepContext, id: string): Promise<StepOutcome> {
  const notice = await ctx.notice(id);
  if (!notice) return done('no such notice');
  const now = ctx.now();
  const { schedule, settings } = ctx.deps;
  switch (notice.state) {
    case 'accepted':
    case 'email_sending':
      return now >= notice.deadline ? runDeadline(ctx, id, { sendSms: false }) : sendEmail(ctx, id);
    case 'email_sent': {
      if (now >= notice.deadline) return runDeadline(ctx, id, { sendSms: false });
      // The check runs in the notice's job, made due now (added when it was lost), so the
      // provider's shared status-read limit holds for repairs too.
      await schedule.emailPoll(id, now);
      return retryAt(now + settings.minPollIntervalMs, 'status check queued');
    }
    case 'sms_pending':
    case 'sms_sending':
      return sendSms(ctx, id);
    case 'sms_sent': {
      await schedule.smsPoll(id, now);
      return retryAt(now + settings.minPollIntervalMs, 'status check queued');
    }
    default:
      // A finished notice has nothing due: it leaves the reconciler's index.
      await ctx.store.transition(id, now, iso(now), { name: 'annotate', entries: [], due: 'remove' });
      return done(`state is ${notice.state}`);
  }
}
