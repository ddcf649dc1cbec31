import type { Processor } from 'bullmq';
import type { LogMirror } from '../src/retention/mirror.js';

/** The `log-mirror` queue: a scheduled job that runs one sweep of the log mirror over every shard. */
export function logMirrorProcessor(mirror: LogMirror): Processor {
  return async () => mirror.mirrorOnce();
}
