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

/** A queue's connection (BullMQ's), as far as a pipeline of scripts and a read goes. */
interface ScriptClient {
  isCluster?: boolean;
  pipeline(): {
    runCommand(name: string, args: unknown[]): unknown;
    call(command: string, ...args: string[]): unknown;
    exec(): Promise<PipelinedReply[] | null>;
  };
}

/**
 * A script call a pipeline sends: one of BullMQ's (its name with BullMQ's version), or one of
 * Herald's, which `define` defines on the connection first (once; ioredis keeps it).
 */
export interface ScriptCall {
  script: string;
  args: unknown[];
  define?: (client: unknown) => void;
}

/**
 * Runs the scripts `calls` in order on a queue's connection `client`, and the command `read` right
 * after them, in one pipeline: one round trip, the replies in order, the read's last. Undefined,
 * sending nothing, on a Cluster's connection, whose pipelines keep to one slot (a job's and a
 * notice's differ): the caller sends them one after the other. (A script Redis lost by a
 * `SCRIPT FLUSH` is loaded again by ioredis before the pipeline goes.)
 */
export async function scriptsThenRead(
  client: unknown,
  calls: readonly ScriptCall[],
  read: RedisCommand,
): Promise<{ scripts: (PipelinedReply | undefined)[]; read: PipelinedReply | undefined } | undefined> {
  const connection = client as ScriptClient;
  if (connection.isCluster) return undefined;
  for (const call of calls) call.define?.(client);
  const pipeline = connection.pipeline();
  for (const call of calls) pipeline.runCommand(call.script, call.args);
  pipeline.call(...read);
  const replies = (await pipeline.exec()) ?? [];
  return { scripts: calls.map((_, i) => replies[i]), read: replies[calls.length] };
}
