import type { Processor } from 'bullmq';
import { reconcileOnce, type ReconcilerDeps } from '../src/notice/reconciler.js';

/** The `reconcile` queue: a scheduled job that runs one reconciler sweep. */
export function reconcileProcessor(deps: ReconcilerDeps): Processor {
  return async () => reconcileOnce(deps);
}
