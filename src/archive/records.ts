import type { NoticeView } from '../notice/view.js';
import { shardOfNoticeId } from '../notice/ids.js';
import { gzipStable, sha256Hex } from '../digest.js';
import { shardName, STREAM_ID } from './names.js';

/**
 * A retired notice as the archive keeps it, once Redis has let go of it (src/retention/retire.ts):
 * its last view (what `GET /v1/notices/:id` answered), the IDs of its decision-log entries in
 * order (the entries themselves are in the log's batch objects), and the counts `/v1/stats`
 * needs. Stored as gzip JSON under `<herald prefix>/notices/s<NN>/<noticeId>.json.gz`, with
 * its SHA-256 and seal like every object (src/archive/seal.ts). Notice IDs begin with their creation time, so keys sort by it.
 */
export interface NoticeRecord {
  id: string;
  view: NoticeView;
  entryIds: string[];
  stats: RetiredStats;
}

/** What `/v1/stats` counts of a notice, kept for it when the notice leaves Redis. */
export interface RetiredStats {
  state: string;
  fallbackReason: string | null;
  emailChecks: number;
  smsChecks: number;
  emailSent: boolean;
  smsSegments: number;
}

const RECORDS_DIR = 'notices';
const RECORD_NAME = /^(ntc_[0-9a-z]+)\.json\.gz$/;

/** The records of one shard live under this key prefix. */
export function recordsDir(heraldPrefix: string, shard: number): string {
  return `${heraldPrefix}/${RECORDS_DIR}/${shardName(shard)}/`;
}

export function recordKey(heraldPrefix: string, noticeId: string): string {
  const shard = shardOfNoticeId(noticeId);
  if (shard === undefined) throw new Error(`not a notice ID: ${noticeId}`);
  return `${recordsDir(heraldPrefix, shard)}${noticeId}.json.gz`;
}

/** The notice ID of a listed record key; undefined for anything else. */
export function parseRecordKey(key: string): string | undefined {
  return RECORD_NAME.exec(key.slice(key.lastIndexOf('/') + 1))?.[1];
}

/**
 * The same record always gives the same bytes (gzip writes no time; the OS byte is fixed);
 * `sha256` is of those bytes, which the seal covers.
 */
export function encodeRecord(record: NoticeRecord): { body: Buffer; sha256: string } {
  const body = gzipStable(JSON.stringify(record));
  return { body, sha256: sha256Hex(body) };
}

/** Why a decoded record is not the record of `noticeId`, or undefined when it is. */
export function checkRecord(value: unknown, noticeId: string): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'it is not a record';
  const record = value as Partial<NoticeRecord>;
  if (record.id !== noticeId) return `it is the record of ${String(record.id)}, not of ${noticeId}`;
  if (record.view === null || typeof record.view !== 'object' || record.view.id !== noticeId) return `its view is not of ${noticeId}`;
  if (typeof record.view.state !== 'string') return 'its view has no state';
  if (!Array.isArray(record.entryIds) || !record.entryIds.every((id) => typeof id === 'string' && STREAM_ID.test(id)))
    return 'its entry IDs are not stream IDs';
  if (record.stats === null || typeof record.stats !== 'object') return 'it has no counts';
  return undefined;
}

/** A retired notice's member in its shard's `created` index: its ID and counts, space-separated. */
export function statsMember(id: string, stats: RetiredStats): string {
  const reason = stats.fallbackReason ?? '-';
  return [id, stats.state, reason, stats.emailChecks, stats.smsChecks, stats.emailSent ? 1 : 0, stats.smsSegments].join(' ');
}

/** Reads a `created` member written by statsMember; undefined for a plain notice ID (a notice still in Redis). */
export function parseStatsMember(member: string): (RetiredStats & { id: string }) | undefined {
  const parts = member.split(' ');
  if (parts.length !== 7) return undefined;
  const [id, state, reason, emailChecks, smsChecks, emailSent, smsSegments] = parts as [string, ...string[]];
  return {
    id,
    state: state!,
    fallbackReason: reason === '-' ? null : reason!,
    emailChecks: Number(emailChecks),
    smsChecks: Number(smsChecks),
    emailSent: emailSent === '1',
    smsSegments: Number(smsSegments),
  };
}
