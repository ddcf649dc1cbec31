import type { StoredEntry } from '../../src/store/notices.js';

/**
 * A decision-log entry as the tests read it: the typed entry, with any field reachable, since a
 * test reads the fields of the entry types it looked for without narrowing each one first.
 */
export type AnyEntry = StoredEntry & { [field: string]: any };
