import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { earlierPartitionOfNotice, partitionOfNotice } from '../../src/store/keys.js';
import { newNoticeId } from '../../src/notice/ids.js';
import { startWorker, shareLimit, type WorkerHandle } from '../../src/worker.js';
import { jobIds } from '../../queues/index.js';
import { testConfig, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';

let stack: Stack | undefined;
let worker: WorkerHandle | undefined;
let web3: WebUnderTest | undefined;
afterEach(async () => {
  await worker?.close();
  await web3?.close();
  await stack?.close();
  [stack, worker, web3] = [undefined, undefined, undefined];
});

describe('HERALD_QUEUE_PARTITIONS raised on a running deployment', () => {
  it('runs the jobs the unpartitioned queues hold, and puts new ones in the partition of their shard', async () => {
    const prefix = testPrefix('parts');
    // One partition, and no worker yet: the notice's jobs wait in the `{q}` queues of before.
    stack = await startStack({ prefix, inProcessWorker: false, env: { HERALD_QUEUE_PARTITIONS: '1' } });
    const before = await stack.createNotice(
      noticeBody({ recipient: { id: 'parts-1', email: 'delivered+100ms@example.com' }, deadlineInSeconds: 60 }),
    );
    const waiting = await stack.web.queues.deadline.getJob(jobIds.deadline(before));
    expect(waiting?.queueQualifiedName).toBe(`${prefix}:{q}:deadline`);

    // Web and worker now run with 3 partitions.
    const config = testConfig(prefix, { ...stack.env, HERALD_QUEUE_PARTITIONS: '3' });
    worker = await startWorker(config, { logger: createLogger('herald-test-worker', 'silent') });
    web3 = await startWebUnderTest(config);
    const res = await web3.call(
      'POST',
      '/v1/notices',
      noticeBody({ recipient: { id: 'parts-2', email: 'delivered+100ms@example.com' }, deadlineInSeconds: 60 }),
    );
    expect(res.statusCode).toBe(202);
    const after = res.json().id as string;
    const partition = partitionOfNotice(after, 3);
    const job = await web3.queues.deadline.getJob(jobIds.deadline(after));
    expect(job?.queueQualifiedName).toBe(`${web3.queues.deadline.partitions[partition]!.opts.prefix}:deadline`);
    expect(job?.queueQualifiedName).toMatch(new RegExp(`^${prefix}:\\{q3\\.${partition}\\.[0-9a-z]+\\}:deadline$`));

    // Both are delivered: the one of before from the drained `{q}` queue, the new one from its partition.
    for (const id of [before, after]) expect((await stack.waitForState(id, ['email_delivered'], 30_000)).state).toBe('email_delivered');
    // The new notice's one job ends with the delivery, in its partition.
    await waitFor(async () => (await web3!.queues.deadline.getJobState(jobIds.deadline(after))) === 'completed', 5_000, 'its job to end');
  });
});

describe('jobs an earlier version put in the partition of shard modulo the count', () => {
  it('are found and removed where they are', async () => {
    const prefix = testPrefix('parts-earlier');
    web3 = await startWebUnderTest(testConfig(prefix, { HERALD_QUEUE_PARTITIONS: '3' }));
    // A shard whose partition moved with the placement by slot range.
    const shard = Array.from({ length: 16 }, (_, s) => s).find((s) => {
      const id = newNoticeId(s, Date.now());
      return earlierPartitionOfNotice(id, 3) !== partitionOfNotice(id, 3);
    })!;
    const id = newNoticeId(shard, Date.now());
    const earlier = web3.queues.deadline.partitions[earlierPartitionOfNotice(id, 3)]!;
    await earlier.add('deadline', { noticeId: id }, { jobId: jobIds.deadline(id), delay: 600_000 });

    expect((await web3.queues.deadline.getJob(jobIds.deadline(id)))?.queueQualifiedName).toBe(`${earlier.opts.prefix}:deadline`);
    expect(await web3.queues.deadline.getJobState(jobIds.deadline(id))).toBe('delayed');
    await web3.queues.deadline.remove(jobIds.deadline(id));
    expect(await earlier.getJob(jobIds.deadline(id))).toBeUndefined();
    expect(await web3.queues.deadline.getJobState(jobIds.deadline(id))).toBe('unknown');

    // A job where it goes now is removed there, and the earlier partition is not asked at all.
    const now = web3.queues.deadline.of(id);
    await now.add('deadline', {}, { jobId: jobIds.deadline(id), delay: 600_000 });
    const askedEarlier = vi.spyOn(earlier, 'remove');
    try {
      expect(await web3.queues.deadline.remove(jobIds.deadline(id))).toBe(1);
      expect(askedEarlier).not.toHaveBeenCalled();
    } finally {
      askedEarlier.mockRestore();
    }
    expect(await web3.queues.deadline.getJobState(jobIds.deadline(id))).toBe('unknown');
    await Promise.all(web3.queues.deadline.all.map((q) => q.obliterate({ force: true })));
  });
});

describe('shareLimit', () => {
  it('splits a global limit so that the partitions together never exceed it', () => {
    expect(shareLimit({ max: 10, duration: 1000 }, 3)).toEqual([
      { max: 4, duration: 1000 },
      { max: 3, duration: 1000 },
      { max: 3, duration: 1000 },
    ]);
    expect(shareLimit({ max: 2, duration: 1000 }, 4)).toEqual(Array.from({ length: 4 }, () => ({ max: 1, duration: 2000 })));
    expect(shareLimit({ max: 7, duration: 1000 }, 1)).toEqual([{ max: 7, duration: 1000 }]);
  });
});
