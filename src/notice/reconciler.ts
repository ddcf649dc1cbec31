import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import type { NoticeStore } from '../store/notices.js';
import { readNotice, type Notice } from './notice.js';
import type { NoticeEngine } from './engine.js';

export interface ReconcilerDeps {
  store: NoticeStore;
  engine: NoticeEngine;
  clock: Clock;
  log: Logger;
  /** How long past its due time a notice is left to its own job. */
  graceMs: number;
  /** How long one notice's lease lasts: longer than any one step (a few provider timeouts). */
  leaseMs: number;
  /** Identifies this worker process in leases. */
  owner: string;
  batchSize?: number;
}

export interface ReconcileReport {
  examined: number;
  driven: number;
  /** Driven notices whose drive wrote something (each got its `notice.reconciled`). */
  repaired: number;
  skipped: number;
}

/**
 * One sweep of the reconciler: every notice whose next action is overdue by more than the
 * grace (a lost job, a crash between two writes, a send in doubt) is leased and driven one
 * step forward. Safe to run in any number of workers at once.
 */
export async function reconcileOnce(deps: ReconcilerDeps): Promise<ReconcileReport> {
  const report: ReconcileReport = { examined: 0, driven: 0, repaired: 0, skipped: 0 };
  const upTo = deps.clock.now() - deps.graceMs;
  for (const shard of deps.store.keys.allShards()) {
    const ids = await deps.store.dueNotices(shard, upTo, deps.batchSize ?? 200);
    for (const id of ids) {
      report.examined += 1;
      if (!(await deps.store.tryLease(id, deps.owner, deps.leaseMs))) {
        report.skipped += 1;
        continue;
      }
      try {
        const notice = await readNotice(deps.store, id);
        if (!notice) continue;
        const outcome = await deps.engine.drive(id);
        if (outcome.kind === 'retry') await deps.store.setDue(id, outcome.at);
        report.driven += 1;
        if (await recordRepair(deps, notice)) {
          report.repaired += 1;
          deps.log.info({ noticeId: id, state: notice.state, outcome: outcome.note }, 'reconciler drove an overdue notice');
        }
      } catch (error) {
        deps.log.error({ err: error, noticeId: id }, 'reconciler step failed');
      } finally {
        await deps.store.releaseLease(id, deps.owner).catch(() => undefined);
      }
    }
  }
  return report;
}

/** How often `recordRepair` reads the notice again when a job moves it while the entry is written. */
const MAX_RACES = 3;

/**
 * Appends `notice.reconciled` when the drive changed the notice (its log grew), and only then:
 * a notice that needed nothing (its job was merely late, or waits for quiet hours) gets no
 * entry. The entry follows what the drive wrote and names the state the notice is in now, and
 * the one it was in when the reconciler took it (`stateBefore`).
 */
async function recordRepair(deps: ReconcilerDeps, before: Notice): Promise<boolean> {
  for (let race = 0; race < MAX_RACES; race += 1) {
    const after = await readNotice(deps.store, before.id);
    if (!after || after.seq === before.seq) return false;
    const now = deps.clock.now();
    const result = await deps.store.transition(before.id, now, iso(now), {
      name: 'annotate',
      onlyFrom: [after.state],
      entries: [{ type: 'notice.reconciled', state: after.state, stateBefore: before.state, entriesWritten: after.seq - before.seq }],
    });
    if (result.ok) return true;
    if (result.reason !== 'state') return false;
  }
  return false;
}
