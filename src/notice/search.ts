import { iso } from '../clock.js';
import type { Archive } from '../archive/archive.js';
import { retiredNoticeIds, retiredNoticeIdsByAddress } from '../archive/recipient-index.js';
import { normalizeEmail, normalizePhone, RejectedRequest } from './accept.js';
import { AddressLookup, type AddressChannel } from './address-lookup.js';
import type { Config } from '../config.js';
import type { NoticeView } from './view.js';
import { noticeCreatedAt, SHARD_COUNT, shardOfNoticeId } from './ids.js';
import { FALLBACK_REASONS, STATES, UNDECIDED_STATES, type FallbackReason, type NoticeState } from './states.js';
import type { LexRange, NoticeIndex, NoticeSummary } from '../store/notice-index.js';

/**
 * The notices list (`/admin/notices`, `herald notices list`): newest first, filtered, paginated
 * by an opaque cursor, with bounded work per page. Live notices come from the shards' `notices`
 * indexes in Redis (src/store/notice-index.ts), merged newest first across the 16 shards; a
 * notice Redis let go of is found by its ID (its archive record) or by its recipient ID or
 * address (the archive's recipient index, src/archive/recipient-index.ts). A search by address
 * (`email` / `phone`, for support) reads the shards' address indexes instead of walking every
 * notice (src/store/address-index.ts): only the HMAC of the address is looked up.
 */

export { FALLBACK_REASONS } from './states.js';

/**
 * Operator views. `late`: the fallback decision at the deadline came more than
 * HERALD_RECONCILE_GRACE_MS after it (the point where the reconciler takes a notice for
 * overdue), or a notice still undecided that long after its deadline. `in_doubt`: a send
 * attempt that may have reached the provider without Herald learning the answer (it timed out
 * or failed with a 5xx, or its worker died with it in flight past the provider timeout).
 */
export const NOTICE_VIEWS = ['late', 'in_doubt'] as const;
export type NoticeListView = (typeof NOTICE_VIEWS)[number];

export interface NoticeFilters {
  id?: string;
  /** Only the notices of this tenant (the API's: the key's own; the admin pages': any, or one). */
  tenant?: string;
  state?: NoticeState;
  reason?: FallbackReason;
  category?: string;
  recipientId?: string;
  /** The recipient's email address, normalized. */
  email?: string;
  /** The recipient's phone, E.164. */
  phone?: string;
  /** Creation time, inclusive (ms). */
  from?: number;
  /** Creation time, exclusive (ms). */
  to?: number;
  view?: NoticeListView;
}

/** One line of the list. */
export interface NoticeRow {
  id: string;
  state: NoticeState;
  category: string;
  recipientId: string;
  tenant: string;
  createdAt: string;
  deadline: string;
  fallbackReason: string | null;
  /** Redis let go of it: read from its archive record. */
  retired: boolean;
}

export interface NoticePage {
  notices: NoticeRow[];
  /** The cursor of the next page; null when nothing older can match. */
  next: string | null;
  /** How many notices this page looked at (at most MAX_EXAMINED_PER_PAGE). */
  examined: number;
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;
/** A page looks at no more notices than this; one with fewer rows then offers the next cursor. */
export const MAX_EXAMINED_PER_PAGE = 2000;
const CHUNK = 100;
const MAX_TEXT = 256;

export interface SearchDeps {
  index: NoticeIndex;
  /** Opened on first need: only lookups of retired notices read the archive. */
  archive: () => Archive;
  now: number;
  /** HERALD_RECONCILE_GRACE_MS: how late a decision may come before the `late` view lists it. */
  lateAfterMs: number;
  /** HERALD_AUDIT_RETENTION: how far back the archive's recipient index is read. */
  auditRetentionMs: number;
  /** The address lookup's HMAC, for `email` and `phone`. */
  addressLookup: AddressLookup;
}

/** The search's dependencies under `config`, for a page read `now`. */
export function searchDeps(
  config: Pick<Config, 'reconcileGraceMs' | 'auditRetentionMs' | 'addressKeys'>,
  parts: { index: NoticeIndex; archive: () => Archive; now: number },
): SearchDeps {
  return {
    ...parts,
    lateAfterMs: config.reconcileGraceMs,
    auditRetentionMs: config.auditRetentionMs,
    addressLookup: new AddressLookup(config.addressKeys),
  };
}

/** Bad filters: each problem names its field. */
export class NoticeQueryError extends Error {
  constructor(readonly problems: { field: string; message: string }[]) {
    super(problems.map((p) => `${p.field}: ${p.message}`).join('; '));
    this.name = 'NoticeQueryError';
  }
}

/**
 * Reads filters, cursor and page size from query parameters (the admin page) or flags (the
 * CLI, which maps its names onto these): `id`, `state`, `reason`, `category`, `recipientId`,
 * `email`, `phone`, `from`, `to` (ISO 8601), `view`, `cursor`, `limit`. Empty values are no filter.
 */
export function parseNoticeQuery(query: Record<string, unknown>): { filters: NoticeFilters; cursor: string | undefined; limit: number } {
  const problems: { field: string; message: string }[] = [];
  const text = (field: string): string | undefined => {
    const value = query[field];
    if (value === undefined || value === '') return undefined;
    if (typeof value !== 'string') {
      problems.push({ field, message: 'give it once' });
      return undefined;
    }
    if (value.length > MAX_TEXT) {
      problems.push({ field, message: `at most ${MAX_TEXT} characters` });
      return undefined;
    }
    return value;
  };
  const oneOf = <T extends string>(field: string, allowed: readonly T[]): T | undefined => {
    const value = text(field);
    if (value === undefined) return undefined;
    if ((allowed as readonly string[]).includes(value)) return value as T;
    problems.push({ field, message: `one of ${allowed.join(', ')}` });
    return undefined;
  };
  const time = (field: string): number | undefined => {
    const value = text(field);
    if (value === undefined) return undefined;
    const ms = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isFinite(ms)) return ms;
    problems.push({ field, message: 'an ISO 8601 time, e.g. 2026-11-29 or 2026-11-29T14:00:00Z' });
    return undefined;
  };
  const address = (field: 'email' | 'phone'): string | undefined => {
    const value = text(field);
    if (value === undefined) return undefined;
    if (field === 'email') {
      if (/^[^@\s]+@[^@\s]+$/.test(value)) return normalizeEmail(value);
      problems.push({ field, message: 'an email address' });
      return undefined;
    }
    try {
      return normalizePhone(value);
    } catch (error) {
      if (!(error instanceof RejectedRequest)) throw error;
      problems.push({ field, message: 'a phone number in E.164 form, like +819012345678' });
      return undefined;
    }
  };
  const filters: NoticeFilters = {
    id: text('id'),
    state: oneOf('state', STATES),
    reason: oneOf('reason', FALLBACK_REASONS),
    category: text('category'),
    recipientId: text('recipientId'),
    email: address('email'),
    phone: address('phone'),
    tenant: text('tenant'),
    from: time('from'),
    to: time('to'),
    view: oneOf('view', NOTICE_VIEWS),
  };
  if (filters.id !== undefined && shardOfNoticeId(filters.id) === undefined) problems.push({ field: 'id', message: 'not a notice ID' });
  if (filters.from !== undefined && filters.to !== undefined && filters.to <= filters.from)
    problems.push({ field: 'to', message: 'must be after from' });
  const cursor = text('cursor');
  if (cursor !== undefined && decodeCursor(cursor) === undefined) problems.push({ field: 'cursor', message: 'not a cursor of this list' });
  let limit = DEFAULT_PAGE_SIZE;
  const given = text('limit');
  if (given !== undefined) {
    limit = /^\d{1,4}$/.test(given) ? Number(given) : Number.NaN;
    if (!(limit >= 1 && limit <= MAX_PAGE_SIZE)) problems.push({ field: 'limit', message: `a whole number from 1 to ${MAX_PAGE_SIZE}` });
  }
  if (problems.length > 0) throw new NoticeQueryError(problems);
  for (const key of Object.keys(filters) as (keyof NoticeFilters)[]) if (filters[key] === undefined) delete filters[key];
  return { filters, cursor, limit };
}

/** A cursor is the last notice a page looked at; the next page starts below it. */
export function encodeCursor(noticeId: string): string {
  return Buffer.from(`n1:${noticeId}`).toString('base64url');
}

function decodeCursor(cursor: string): string | undefined {
  const text = /^[A-Za-z0-9_-]{1,96}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const id = text.startsWith('n1:') ? text.slice(3) : undefined;
  return id !== undefined && shardOfNoticeId(id) !== undefined ? id : undefined;
}

/**
 * The list's order: newest first across shards. An ID sorts by creation within its shard, so
 * across shards the order is the ID after its shard digits (time, then random), then the shard.
 */
const orderKey = (id: string) => id.slice(6) + id.slice(4, 6);
const shardPrefix = (shard: number) => `ntc_${shard.toString(16).padStart(2, '0')}`;
const time36 = (ms: number) => Math.max(0, Math.floor(ms)).toString(36).padStart(10, '0');

/** One page of the notices list. */
export async function searchNotices(
  deps: SearchDeps,
  filters: NoticeFilters,
  opts: { cursor?: string; limit?: number; maxExamined?: number } = {},
): Promise<NoticePage> {
  const limit = Math.min(opts.limit ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  const maxExamined = Math.min(opts.maxExamined ?? MAX_EXAMINED_PER_PAGE, MAX_EXAMINED_PER_PAGE);
  const after = opts.cursor === undefined ? undefined : decodeCursor(opts.cursor);
  if (filters.id !== undefined) return byId(deps, filters, filters.id);

  const sources: Source[] = liveSources(deps, filters, after);
  if (filters.recipientId !== undefined || filters.email !== undefined || filters.phone !== undefined) {
    sources.push(await retiredSource(deps, filters, after));
  }

  const rows: NoticeRow[] = [];
  let examined = 0;
  let last: string | undefined;
  let previous: string | undefined;
  let unexamined = false;
  for (;;) {
    await Promise.all(sources.map((s) => s.refill()));
    // Take candidates in order while every source that may still hold older ones has some buffered.
    const batch: { id: string; source: Source }[] = [];
    while (batch.length < Math.min(CHUNK, maxExamined) && examined + batch.length < maxExamined) {
      let best: Source | undefined;
      for (const s of sources) if (s.head() !== undefined && (best === undefined || orderKey(s.head()!) > orderKey(best.head()!))) best = s;
      if (best === undefined) break;
      if (sources.some((s) => s.head() === undefined && !s.exhausted)) break;
      batch.push({ id: best.take()!, source: best });
    }
    if (batch.length === 0) break;
    const candidates = await resolve(batch);
    for (const [i, { id, row, matchable }] of candidates.entries()) {
      examined += 1;
      last = id;
      // A notice retiring meanwhile can come from Redis and from the archive: the first read found wins.
      if (row === null || id === previous) continue;
      previous = id;
      if (matchable(filters)) rows.push(row);
      if (rows.length === limit) {
        unexamined = i < candidates.length - 1;
        break;
      }
    }
    if (rows.length === limit || examined >= maxExamined) break;
  }
  const more = unexamined || sources.some((s) => s.head() !== undefined || !s.exhausted);
  return { notices: rows, next: more && last !== undefined ? encodeCursor(last) : null, examined };
}

interface Source {
  exhausted: boolean;
  head(): string | undefined;
  take(): string | undefined;
  refill(): Promise<void>;
  /** Reads these notices (all of this source), in order. */
  read(ids: string[]): Promise<{ row: NoticeRow | null; matchable: (f: NoticeFilters) => boolean }[]>;
}

/**
 * Where the live notices come from: every shard's `notices` index, or, with an address among
 * the filters, every shard's address index under each hash the address may have (one per
 * address key: the first indexes new notices, older keys still hold older ones).
 */
function liveSources(deps: SearchDeps, filters: NoticeFilters, after: string | undefined): Source[] {
  const shards = Array.from({ length: SHARD_COUNT }, (_, shard) => shard);
  const address = addressFilter(filters);
  if (address === undefined) return shards.map((shard) => liveSource(deps, { shard }, filters, after));
  const hashes = deps.addressLookup.hashesOf(address.channel, address.value);
  return shards.flatMap((shard) => hashes.map((hash) => liveSource(deps, { shard, address: hash }, filters, after)));
}

/** The address a search reads the address indexes by: the email when given, else the phone. */
function addressFilter(filters: NoticeFilters): { channel: AddressChannel; value: string } | undefined {
  if (filters.email !== undefined) return { channel: 'email', value: filters.email };
  if (filters.phone !== undefined) return { channel: 'phone', value: filters.phone };
  return undefined;
}

/**
 * The live notices of one shard below the cursor and within [from, to), newest first: from its
 * `notices` index, or from its address index under one hash (members `<hash>:<noticeId>`, the
 * same bounds behind the hash).
 */
function liveSource(
  deps: SearchDeps,
  index: { shard: number; address?: string },
  filters: NoticeFilters,
  after: string | undefined,
): Source {
  const { shard } = index;
  const prefix = shardPrefix(shard);
  let max = filters.to === undefined ? '+' : `(${prefix}${time36(filters.to)}`;
  if (after !== undefined) {
    // Equal after the shard digits: a lower shard comes later in the order, so it is still to come.
    const afterShard = shardOfNoticeId(after)!;
    const bound = `${shard < afterShard ? '[' : '('}${prefix}${after.slice(6)}`;
    if (max === '+' || bound.slice(1) < max.slice(1)) max = bound;
  }
  let min = filters.from === undefined ? '-' : `[${prefix}${time36(filters.from)}`;
  // Behind an address's hash: '-' and '+' become the ends of its range (';' follows ':').
  const member = index.address === undefined ? '' : `${index.address}:`;
  if (member !== '') {
    max = max === '+' ? `(${index.address};` : `${max[0]}${member}${max.slice(1)}`;
    min = min === '-' ? `[${member}` : `${min[0]}${member}${min.slice(1)}`;
  }
  let buffer: string[] = [];
  const source: Source = {
    exhausted: false,
    head: () => buffer[0],
    take: () => buffer.shift(),
    async refill() {
      if (buffer.length > 0 || source.exhausted) return;
      const range: LexRange = { shard, max, min, ...(index.address === undefined ? {} : { address: true }) };
      const [members = []] = await deps.index.newest([range], CHUNK);
      buffer = members.map((m) => m.slice(member.length));
      if (members.length < CHUNK) source.exhausted = true;
      if (members.length > 0) max = `(${members.at(-1)}`;
    },
    async read(ids) {
      const summaries = await deps.index.summaries(ids);
      return summaries.map((summary) =>
        summary === null ? { row: null, matchable: () => false } : { row: liveRow(summary), matchable: (f) => matches(f, summary, deps) },
      );
    },
  };
  return source;
}

/**
 * The retired notices of the filtered recipient ID or address, from the archive's recipient
 * index, newest first: with several of them, the notices every one of them names.
 */
async function retiredSource(deps: SearchDeps, filters: NoticeFilters, after: string | undefined): Promise<Source> {
  const from = Math.max(filters.from ?? 0, deps.now - deps.auditRetentionMs);
  const to = filters.to ?? deps.now + 1;
  const archive = deps.archive();
  const named: string[][] = [];
  if (filters.recipientId !== undefined) named.push(await retiredNoticeIds(archive, filters.recipientId, from, to));
  for (const [channel, value] of [
    ['email', filters.email],
    ['phone', filters.phone],
  ] as const) {
    if (value === undefined) continue;
    const byKey = await Promise.all(
      deps.addressLookup.hashesOf(channel, value).map((hash) => retiredNoticeIdsByAddress(archive, hash, from, to)),
    );
    named.push([...new Set(byKey.flat())]);
  }
  const [first = [], ...rest] = named;
  const ids = first
    .filter((id) => rest.every((other) => other.includes(id)))
    .filter((id) => after === undefined || orderKey(id) < orderKey(after))
    .sort((a, b) => (orderKey(a) < orderKey(b) ? 1 : -1));
  return {
    exhausted: true,
    head: () => ids[0],
    take: () => ids.shift(),
    refill: async () => {},
    async read(batch) {
      const views = await Promise.all(batch.map((id) => readRetired(deps, id)));
      return views.map((view) =>
        view === null
          ? { row: null, matchable: () => false }
          : { row: retiredRow(view), matchable: (f) => matches(f, summaryOfView(view), deps) },
      );
    },
  };
}

/** Reads a batch taken from several sources, each source's part in one go, back in the batch's order. */
async function resolve(batch: { id: string; source: Source }[]) {
  const bySource = new Map<Source, string[]>();
  for (const { id, source } of batch) bySource.set(source, [...(bySource.get(source) ?? []), id]);
  const read = new Map<Source, Awaited<ReturnType<Source['read']>>>();
  await Promise.all([...bySource].map(async ([source, ids]) => read.set(source, await source.read(ids))));
  const position = new Map<Source, number>();
  return batch.map(({ id, source }) => {
    const i = position.get(source) ?? 0;
    position.set(source, i + 1);
    return { id, ...read.get(source)![i]! };
  });
}

/** A notice looked up by ID: from Redis while it holds it, else from its archive record. */
async function byId(deps: SearchDeps, filters: NoticeFilters, id: string): Promise<NoticePage> {
  const [summary] = await deps.index.summaries([id]);
  if (summary) return { notices: matches(filters, summary, deps) ? [liveRow(summary)] : [], next: null, examined: 1 };
  const view = await readRetired(deps, id);
  const found = view !== null && matches(filters, summaryOfView(view), deps);
  return { notices: found ? [retiredRow(view)] : [], next: null, examined: 1 };
}

async function readRetired(deps: SearchDeps, id: string): Promise<NoticeView | null> {
  return (await deps.archive().readRecord(id))?.view ?? null;
}

function matches(f: NoticeFilters, n: NoticeSummary, deps: SearchDeps): boolean {
  if (f.state !== undefined && n.state !== f.state) return false;
  if (f.reason !== undefined && n.fallbackReason !== f.reason) return false;
  if (f.category !== undefined && n.category !== f.category) return false;
  if (f.recipientId !== undefined && n.recipientId !== f.recipientId) return false;
  // A retired notice's addresses are not in its record: its pointers under their HMACs chose it.
  if (n.addresses !== 'by_pointer') {
    if (f.email !== undefined && n.addresses.email !== f.email) return false;
    if (f.phone !== undefined && n.addresses.phone !== f.phone) return false;
  }
  if (f.tenant !== undefined && n.tenant !== f.tenant) return false;
  if (f.from !== undefined && n.createdAt < f.from) return false;
  if (f.to !== undefined && n.createdAt >= f.to) return false;
  if (f.view === 'late' && !isLate(n, deps)) return false;
  if (f.view === 'in_doubt' && !isInDoubt(n, deps.now)) return false;
  return true;
}

/** See NOTICE_VIEWS. Only the decision at the deadline can be late: an early fallback (a bounce) comes before it. */
export function isLate(n: NoticeSummary, deps: Pick<SearchDeps, 'now' | 'lateAfterMs'>): boolean {
  if (n.fallbackDecidedAt !== undefined)
    return n.fallbackReason === 'email_deadline_elapsed' && n.fallbackDecidedAt - n.deadline > deps.lateAfterMs;
  return UNDECIDED_STATES.includes(n.state) && deps.now - n.deadline > deps.lateAfterMs;
}

/** See NOTICE_VIEWS. An attempt still inside its provider timeout is in flight, not in doubt. */
export function isInDoubt(n: NoticeSummary, now: number): boolean {
  const attempt = n.state === 'email_sending' ? n.email : n.state === 'sms_sending' ? n.sms : undefined;
  if (!attempt?.inDoubt) return false;
  return attempt.settled || now > (attempt.startedAt ?? 0) + n.providerTimeoutMs;
}

function liveRow(n: NoticeSummary): NoticeRow {
  return {
    id: n.id,
    state: n.state,
    category: n.category,
    recipientId: n.recipientId,
    tenant: n.tenant,
    createdAt: iso(n.createdAt),
    deadline: iso(n.deadline),
    fallbackReason: n.fallbackReason ?? null,
    retired: false,
  };
}

function retiredRow(view: NoticeView): NoticeRow {
  return {
    id: view.id,
    state: view.state,
    category: view.category,
    recipientId: view.recipientId,
    tenant: (view as { tenant?: string }).tenant ?? 'default',
    createdAt: view.createdAt,
    deadline: view.deadline,
    fallbackReason: view.fallback?.reason ?? null,
    retired: true,
  };
}

/** A retired notice as the filters see it: finished, so never in doubt. */
function summaryOfView(view: NoticeView): NoticeSummary {
  const decidedAt = view.fallback?.decidedAt;
  const idle = { inDoubt: false, settled: true, startedAt: undefined };
  return {
    id: view.id,
    state: view.state,
    category: view.category,
    recipientId: view.recipientId,
    tenant: (view as { tenant?: string }).tenant ?? 'default',
    createdAt: noticeCreatedAt(view.id) ?? Date.parse(view.createdAt),
    deadline: Date.parse(view.deadline),
    fallbackReason: view.fallback?.reason,
    fallbackDecidedAt: decidedAt ? Date.parse(decidedAt) : undefined,
    addresses: 'by_pointer',
    providerTimeoutMs: 0,
    email: idle,
    sms: idle,
  };
}
