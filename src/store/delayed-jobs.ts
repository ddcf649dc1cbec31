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

/** A Redis command, as a pipeline's `call` takes it: its name, then its arguments. */
export type RedisCommand = readonly [command: string, ...args: string[]];

/** A reply in a pipeline's answer: its error, or its reply. */
export type PipelinedReply = [error: Error | null, reply: unknown];

/** A queue's connection (BullMQ's), as far as a pipeline of one of its scripts and a read goes. */
interface ScriptClient {
  isCluster?: boolean;
  pipeline(): {
    runCommand(name: string, args: unknown[]): unknown;
    call(command: string, ...args: string[]): unknown;
    exec(): Promise<PipelinedReply[] | null>;
  };
}

/**
 * Runs BullMQ's script `script` (its name with BullMQ's version) with `args` on a queue's
 * connection `client`, and the command `read` right after it, in one pipeline: one round trip,
 * the two replies in order. Undefined, sending nothing, on a Cluster's connection, whose
 * pipelines keep to one slot (a job's and a notice's differ): the caller sends them one after the
 * other. (A script Redis lost by a `SCRIPT FLUSH` is sent again on its own by ioredis, after the
 * read: the read then comes first, as it did before this pipeline.)
 */
export async function scriptThenRead(
  client: unknown,
  script: string,
  args: unknown[],
  read: RedisCommand,
): Promise<[script: PipelinedReply | undefined, read: PipelinedReply | undefined] | undefined> {
  const connection = client as ScriptClient;
  if (connection.isCluster) return undefined;
  const pipeline = connection.pipeline();
  pipeline.runCommand(script, args);
  pipeline.call(...read);
  const [scriptReply, readReply] = (await pipeline.exec()) ?? [];
  return [scriptReply, readReply];
}
