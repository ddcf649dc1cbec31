import { Gauge } from 'prom-client';
import type { BacklogSummary } from './backlog.js';

/**
 * Gauges of the log mirror's backlog, computed from Redis at scrape time (so any process that
 * serves `/metrics` reports the state of every worker): register them on that registry.
 * Scrapes within a second share one read.
 */
export function logMirrorBacklogGauges(read: () => Promise<BacklogSummary>): Gauge[] {
  let cached: { at: number; summary: Promise<BacklogSummary> } | undefined;
  const summary = () => {
    if (!cached || Date.now() - cached.at > 1000) cached = { at: Date.now(), summary: read() };
    return cached.summary;
  };
  return [
    new Gauge({
      name: 'herald_log_unarchived_entries',
      help: 'Decision-log entries in Redis that the archive does not hold yet, by shard.',
      labelNames: ['shard'],
      registers: [],
      async collect() {
        for (const s of (await summary()).shards) this.set({ shard: String(s.shard) }, s.unarchived);
      },
    }),
    new Gauge({
      name: 'herald_log_oldest_unarchived_seconds',
      help: 'Age of the oldest decision-log entry not yet archived (0: all archived).',
      registers: [],
      async collect() {
        this.set((await summary()).oldestUnarchivedSeconds);
      },
    }),
    new Gauge({
      name: 'herald_log_stream_entries',
      help: 'Decision-log entries held in Redis, archived ones inside the hot window included.',
      registers: [],
      async collect() {
        this.set((await summary()).streamEntries);
      },
    }),
  ];
}
