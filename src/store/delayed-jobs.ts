import type { Queue } from 'bullmq';

/**
 * When a job waiting in a queue's delayed set is due (ms), from its score there; undefined when
 * the set does not hold it. BullMQ has no call for it (a job's `delay` field is relative to when it
 * was last moved), and scores a delayed job by its time shifted left 12 bits, a counter in the low bits.
 */
export async function delayedUntil(queue: Queue, jobId: string): Promise<number | undefined> {
  const score = await (await queue.backend.client).zscore(queue.toKey('delayed'), jobId);
  return score === null ? undefined : Math.floor(Number(score) / 0x1000);
}
