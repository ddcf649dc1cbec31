import type { EntryType, LogEntry, StoredEntry } from '../../src/notice/entries.js';

/**
 * A decision-log entry as the tests read it: the typed entry, with any field reachable, since a
 * test reads the fields of the entry types it looked for without narrowing each one first.
 */
export type AnyEntry = StoredEntry & { [field: string]: any };

/** The entry interface whose `type` may be `T` (`Requested` for both `email.requested` and `sms.requested`). */
type EntryFor<T extends EntryType, E extends LogEntry = LogEntry> = E extends unknown ? (T extends E['type'] ? E : never) : never;

/** Some of a value's fields, at every depth: a `cost` with only its `byChannel.email`. */
type Some<V> = V extends readonly unknown[] ? V : V extends object ? { [K in keyof V]?: Some<V[K]> } : V;

/**
 * A log entry of `type` with only the fields the test gives, each of the type the entry type
 * declares. For tests of the store, the mirror, the archive and the counters, which write
 * entries Herald's steps would write whole but read only some of their fields. The cast below
 * is the one place such an entry passes for a whole one.
 */
export function entryOf<T extends EntryType>(type: T, fields?: Some<Omit<EntryFor<T>, 'type'>>): LogEntry {
  return { type, ...fields } as LogEntry;
}
