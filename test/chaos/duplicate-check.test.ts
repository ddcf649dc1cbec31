import { afterEach, describe, expect, it } from 'vitest';
import { jobIds } from '../../queues/index.js';
import { noticeBody } from '../helpers/herald.js';
import { testPrefix, waitFor } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

/**
 * Found by the chaos run (seed 896473010): a duplicate of a status-check job, under the check's
 * own job ID, ran before the SMS was accepted and finished without effect. BullMQ ignores an
 * `add` whose job ID exists, finished jobs included, so the real first check was never queued,
 * and the reconciler's repair (which queues the same check) was ignored too: the notice stayed
 * `sms_sent` for good.
 */
let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

describe('a status check whose job ID already ran', () => {
  it('still runs when the notice asks for it again', async () => {
    stack = await startStack({ prefix: testPrefix('dupcheck') });
    const phone = '+12075550100';
    const id = await stack.createNotice(
      noticeBody({ recipient: { id: 'p-dup', email: 'never@example.com', phone }, deadlineInSeconds: 2 }),
    );
    // The duplicate runs at once, while the notice is still waiting for its deadline.
    await stack.web.queues.smsPoll.add('sms-poll', { noticeId: id }, { jobId: jobIds.smsPoll(id) });
    await waitFor(
      async () => (await stack!.web.queues.smsPoll.getJobState(jobIds.smsPoll(id))) === 'completed',
      10_000,
      'the duplicate to finish',
    );

    const view = await stack.waitForState(id, ['sms_delivered', 'sms_failed'], 20_000);
    expect(view.state).toBe('sms_delivered');
    expect(stack.smsTo(phone)).toBe(1);
    expect((await stack.events(id)).filter((e) => e.type === 'sms.observed').at(-1)).toMatchObject({ status: 'delivered' });
  });
});
