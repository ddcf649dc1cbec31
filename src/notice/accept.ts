/**
 * Accepting a notice, the first step of its life: read the recipient's policy and the address's
 * suppression, validate what a schema cannot, plan the status checks from the deadline
 * backwards, store the notice with its first log entries in one script, and queue its email and
 * deadline jobs. No provider call is made here.
 */
import { AddressLookup, addressMembers } from './address-lookup.js';
import canonicalize from 'canonicalize';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import type { CreateNoticeInput, NoticeStore, NoticeContent, NoticeFields, LogEntry } from '../store/notices.js';
import type { PolicyStore, RecipientPolicy } from '../store/policies.js';
import type { SuppressionStore } from '../store/suppressions.js';
import type { Scheduler } from './outcome.js';
import { STATS_HOUR_MS, statsHourOf } from '../store/stats.js';

/** The tenant of every notice made before tenants, and of the keys of HERALD_API_KEYS. */
export const DEFAULT_TENANT = 'default';
import { newNoticeId, shardOfKey } from './ids.js';
import { lastSmsCheckBy, MAX_HORIZON_MS, planChecks, type PollPolicy } from './planner.js';
import type { PolicyOutcome } from './states.js';
import type { Config, Prices } from '../config.js';
import { keyringOf, type EncryptionKey } from '../crypto.js';
import { sealContent } from '../store/content.js';
import { sha256Hex } from '../digest.js';
import { costOf, smsSegments } from './cost.js';

export interface AcceptRequest {
  recipient: { id: string; email: string; phone?: string; region?: string };
  category: string;
  content: NoticeContent;
  deadline?: string;
  deadlineInSeconds?: number;
  complianceDeadline?: string;
  policy?: PollPolicy;
  metadata?: Record<string, string>;
}

export interface AcceptSettings {
  providerTimeoutMs: number;
  minPollIntervalMs: number;
  maxChecksPerNotice: number;
  contentTtlMs: number;
  prices: Prices;
  /** Version of the regional rules file in force, recorded with every policy check. */
  rulesVersion: string | null;
  /** The regional rules have quiet hours: a fallback SMS may wait up to a day for them, and its content with it. */
  quietHours: boolean;
  /** HERALD_ENCRYPTION_KEY: content is sealed with the first key before it is stored; none: stored as is. */
  encryptionKeys: readonly EncryptionKey[];
  /** The address lookup's HMAC: the notice's addresses are indexed under it, never in a form a dictionary reverses. */
  addressLookup: AddressLookup;
}

/** The settings of acceptNotice in force under `config`. */
export function acceptSettings(config: Config): AcceptSettings {
  return {
    providerTimeoutMs: config.providerTimeoutMs,
    minPollIntervalMs: config.minPollIntervalMs,
    maxChecksPerNotice: config.maxChecksPerNotice,
    contentTtlMs: config.contentTtlMs,
    prices: config.prices,
    rulesVersion: config.rules?.version ?? null,
    // Whether a fallback SMS may wait for quiet hours, which keeps its content longer.
    quietHours: Object.values(config.rules?.regions ?? {}).some((rule) => rule.quietHours !== undefined),
    encryptionKeys: config.encryptionKeys,
    addressLookup: new AddressLookup(config.addressKeys),
  };
}

/** `metadata` names (the API's request limits); anchored at both ends, and JS `$` never matches before a line terminator. */
export const METADATA_NAME = /^[A-Za-z0-9_.:-]{1,64}$/;
export const METADATA_LIMITS = { fields: 20, valueLength: 256 } as const;

/** A request Herald refuses, with the field at fault. */
export class RejectedRequest extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'RejectedRequest';
  }
}

export type AcceptResult =
  | { kind: 'created'; id: string; deadline: number; plannedChecks: number[] }
  | { kind: 'replayed'; id: string }
  | { kind: 'conflict'; id: string };

// With the `u` flag a surrogate pair is one code point: only a lone surrogate is in class Cs.
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Refuses a request with a string (or a name) that is not well-formed Unicode, a lone surrogate
 * in it: RFC 8785 canonical JSON, which bodies are compared and content hashed as, has no form
 * for one (canonicalize throws), and no provider could carry it as UTF-8 anyway.
 */
function refuseLoneSurrogates(value: unknown, path: string): void {
  if (typeof value === 'string') {
    if (LONE_SURROGATE.test(value)) throw new RejectedRequest(path, `${path} is not well-formed Unicode (a lone surrogate)`);
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => refuseLoneSurrogates(item, `${path}.${i}`));
  } else if (value !== null && typeof value === 'object') {
    for (const [name, item] of Object.entries(value)) {
      const at = path === '' ? name : `${path}.${name}`;
      refuseLoneSurrogates(name, at);
      refuseLoneSurrogates(item, at);
    }
  }
}

/** An email address as Herald keeps it (the suppression list, the notice): lower-case. */
export function normalizeEmail(address: string): string {
  return address.toLowerCase();
}

/** Normalizes a phone number to E.164, accepting any *possible* number (fictional ranges too). */
export function normalizePhone(raw: string): string {
  if (!/^\+[1-9]\d{5,15}$/.test(raw)) throw new RejectedRequest('recipient.phone', 'phone must be in E.164 form, like +819012345678');
  const parsed = parsePhoneNumberFromString(raw);
  if (!parsed || !parsed.isPossible()) throw new RejectedRequest('recipient.phone', `phone is not a possible number for its country`);
  return parsed.number;
}

/**
 * The metadata rules again, in the domain: the HTTP schema enforces them first, but a name
 * that carried a line terminator into the log must be impossible whatever the entry point.
 */
function checkMetadata(metadata: Record<string, string> | undefined): void {
  if (metadata === undefined) return;
  const fields = Object.entries(metadata);
  if (fields.length > METADATA_LIMITS.fields)
    throw new RejectedRequest('metadata', `metadata holds at most ${METADATA_LIMITS.fields} fields`);
  for (const [name, value] of fields) {
    if (!METADATA_NAME.test(name)) {
      throw new RejectedRequest('metadata', 'metadata names are 1 to 64 characters from A-Z, a-z, 0-9, "_", ".", ":" and "-"');
    }
    if (typeof value !== 'string' || value.length > METADATA_LIMITS.valueLength) {
      throw new RejectedRequest(`metadata.${name}`, `metadata values are strings of at most ${METADATA_LIMITS.valueLength} characters`);
    }
  }
}

/** What accepting a notice reads, writes and queues with. */
export interface AcceptDeps {
  store: NoticeStore;
  policies: PolicyStore;
  suppressions: SuppressionStore;
  scheduler: Scheduler;
  clock: Clock;
  settings: AcceptSettings;
}

/**
 * Who asks: the API key's ID, its tenant (the notice is the tenant's, and so are idempotency
 * keys), and the request's Idempotency-Key, if any.
 */
export interface AcceptCaller {
  apiKeyId: string;
  tenant: string;
  idempotencyKey?: string;
}

/**
 * What a request must pass before anything of it is stored, sent with the reads of its
 * acceptance so that both travel in one round trip: the caller's rate limit. It throws to refuse.
 */
export type Admission = () => Promise<unknown>;

/**
 * The accept use case, whole: the request's admission (`admit`, its rate limit), the recipient's
 * policy and the address's suppression (one round trip), the notice stored (or the earlier one
 * an idempotency key names), and, for a new notice, its job (`<id>-deadline`), due now for the
 * email's send. A job that could not be queued is left to the reconciler: the notice is stored
 * and due now. Throws RejectedRequest for a request the schema let through and Herald refuses.
 */
export async function accept(
  deps: AcceptDeps,
  request: AcceptRequest,
  caller: AcceptCaller,
  log: Pick<Logger, 'info' | 'warn'>,
  admit?: Admission,
): Promise<AcceptResult> {
  const [, policy, emailSuppressed] = await Promise.all([
    admit?.(),
    deps.policies.get(request.recipient.id, caller.tenant),
    deps.suppressions.has('email', normalizeEmail(request.recipient.email)),
  ]);
  const now = deps.clock.now();
  const result = await acceptNotice(deps.store, request, policy, { now, ...caller, emailSuppressed, settings: deps.settings });
  if (result.kind !== 'created') return result;
  try {
    await deps.scheduler.accepted([{ noticeId: result.id, emailAt: now, deadline: result.deadline }]);
  } catch (error) {
    log.warn({ err: error, noticeId: result.id }, 'jobs not enqueued; the reconciler will pick the notice up');
  }
  log.info({ noticeId: result.id }, 'notice accepted');
  return result;
}

/**
 * What became of one notice of a batch: its result, why it was refused (RejectedRequest), or the
 * error that kept it from being stored (Redis unreachable, say: the caller may send it again).
 */
export type BatchItemResult =
  { ok: true; result: AcceptResult } | { ok: false; rejected: RejectedRequest } | { ok: false; failed: unknown };

/**
 * How many notices of a batch are in flight at once. Each group's reads, creations and job adds
 * travel together before the next group starts: a whole batch at once keeps thousands of
 * notices' objects alive across collections, and costs the web process more per notice than
 * groups of this size (docs/BENCHMARKS.md, batch accept).
 */
export const BATCH_GROUP = 50;

/**
 * Many notices accepted together, each exactly as `accept` would accept it alone (its reads,
 * checks, idempotency key and plan), their Redis work issued together so that it travels in a
 * few pipelines rather than one round trip per notice, and the new notices' jobs added in bulk,
 * BATCH_GROUP notices at a time. Results are in the order of `requests`.
 */
export async function acceptBatch(
  deps: AcceptDeps,
  requests: readonly { request: AcceptRequest; idempotencyKey?: string }[],
  caller: Omit<AcceptCaller, 'idempotencyKey'>,
  log: Pick<Logger, 'info' | 'warn'>,
  admit?: Admission,
): Promise<BatchItemResult[]> {
  // The batch's admission goes with its first notices' reads; a refusal stores none of them.
  const admitted = admit?.();
  admitted?.catch(() => undefined);
  const now = deps.clock.now();
  const acceptOne = async ({ request, idempotencyKey }: (typeof requests)[number]): Promise<BatchItemResult> => {
    const reads = Promise.all([
      deps.policies.get(request.recipient.id, caller.tenant),
      deps.suppressions.has('email', normalizeEmail(request.recipient.email)),
    ]);
    reads.catch(() => undefined);
    // A refused admission refuses the whole request: it throws here, past the notice's own errors.
    await admitted;
    try {
      const [policy, emailSuppressed] = await reads;
      const who = idempotencyKey === undefined ? caller : { ...caller, idempotencyKey };
      return {
        ok: true,
        result: await acceptNotice(deps.store, request, policy, { now, ...who, emailSuppressed, settings: deps.settings }),
      };
    } catch (error) {
      if (error instanceof RejectedRequest) return { ok: false, rejected: error };
      return { ok: false, failed: error };
    }
  };
  const results: BatchItemResult[] = [];
  let accepted = 0;
  for (let from = 0; from < requests.length; from += BATCH_GROUP) {
    const group = await Promise.all(requests.slice(from, from + BATCH_GROUP).map(acceptOne));
    results.push(...group);
    const created = group.flatMap((r) => (r.ok && r.result.kind === 'created' ? [r.result] : []));
    accepted += created.length;
    try {
      await deps.scheduler.accepted(created.map((r) => ({ noticeId: r.id, emailAt: now, deadline: r.deadline })));
    } catch (error) {
      // The notices are stored and due now: the reconciler drives those whose jobs are missing.
      log.warn({ err: error, notices: created.length }, 'jobs of a batch not enqueued; the reconciler will pick the notices up');
    }
  }
  if (accepted > 0) log.info({ accepted, of: requests.length }, 'notices accepted in a batch');
  return results;
}

/**
 * Validates the parts a schema cannot (phone, deadline, poll plan), then stores the notice and
 * its first log entries in one script (accept, above, is the whole use case).
 */
export async function acceptNotice(
  store: NoticeStore,
  request: AcceptRequest,
  policy: RecipientPolicy,
  ctx: { now: number; apiKeyId: string; tenant: string; idempotencyKey?: string; emailSuppressed: boolean; settings: AcceptSettings },
): Promise<AcceptResult> {
  refuseLoneSurrogates(request, '');
  // Only a request with an Idempotency-Key is compared with another, so only then is its body hashed.
  const bodyHash = ctx.idempotencyKey === undefined ? '' : sha256Hex(canonicalize(request) ?? '');
  // Idempotency keys are the tenant's: any of its API keys replays the notice another made.
  const idemHash = ctx.idempotencyKey === undefined ? undefined : sha256Hex(`tenant:${ctx.tenant}:${ctx.idempotencyKey}`);
  if (idemHash !== undefined) {
    // A replay answers with the original notice even when its body would no longer be accepted
    // (a deadline now past); the script checks again atomically when creating. Before tenants a
    // key was the API key's own: a default-tenant request finds a record of then too (they expire
    // with the content TTL).
    const legacy = ctx.tenant === DEFAULT_TENANT ? sha256Hex(`${ctx.apiKeyId}:${ctx.idempotencyKey}`) : undefined;
    const [earlier, before] = await Promise.all([
      store.findIdempotent(shardOfKey(idemHash), idemHash),
      legacy === undefined ? null : store.findIdempotent(shardOfKey(legacy), legacy),
    ]);
    const found = earlier ?? before;
    if (found) return found.bodyHash === bodyHash ? { kind: 'replayed', id: found.noticeId } : { kind: 'conflict', id: found.noticeId };
  }
  // A replayable notice lives in its idempotency record's shard; any other where the store places it.
  const shard = idemHash === undefined ? store.newShard() : shardOfKey(idemHash);
  const prepared = prepareNotice(request, policy, { ...ctx, shard });
  const { input } = prepared;
  if (idemHash !== undefined) {
    // A replay must find its notice for as long as the notice may still act on the content.
    input.idempotency = { shard, keyHash: idemHash, bodyHash, ttlMs: input.contentTtlMs };
  }
  const result = await store.create(input);
  if (result.created) return { kind: 'created', id: input.id, deadline: prepared.deadline, plannedChecks: prepared.plannedChecks };
  return result.bodyHash === bodyHash ? { kind: 'replayed', id: result.existingId } : { kind: 'conflict', id: result.existingId };
}

/** A notice ready to be stored: what the creation script writes, and what the answer tells. */
export interface PreparedNotice {
  input: CreateNoticeInput;
  deadline: number;
  plannedChecks: number[];
}

/**
 * The notice `request` makes in `shard` (its ID, stored fields, content and first log entries),
 * or RejectedRequest naming the field at fault. Reads and writes nothing.
 */
export function prepareNotice(
  request: AcceptRequest,
  policy: RecipientPolicy,
  ctx: { now: number; shard: number; tenant?: string; idempotencyKey?: string; emailSuppressed: boolean; settings: AcceptSettings },
): PreparedNotice {
  const { now, settings } = ctx;
  const phone = request.recipient.phone === undefined ? undefined : normalizePhone(request.recipient.phone);
  const email = normalizeEmail(request.recipient.email);
  if (request.content.text === undefined && request.content.html === undefined) {
    throw new RejectedRequest('content', 'content needs text or html');
  }

  if ((request.deadline === undefined) === (request.deadlineInSeconds === undefined)) {
    throw new RejectedRequest('deadline', 'give exactly one of deadline and deadlineInSeconds');
  }
  const deadline = request.deadline !== undefined ? Date.parse(request.deadline) : now + request.deadlineInSeconds! * 1000;
  if (!Number.isFinite(deadline)) throw new RejectedRequest('deadline', 'deadline is not a valid time');
  if (deadline <= now) throw new RejectedRequest('deadline', 'deadline must be in the future');
  if (deadline - now > MAX_HORIZON_MS) throw new RejectedRequest('deadline', 'deadline must be at most 366 days ahead');
  const complianceDeadline = request.complianceDeadline === undefined ? undefined : Date.parse(request.complianceDeadline);
  if (complianceDeadline !== undefined) {
    if (!Number.isFinite(complianceDeadline)) throw new RejectedRequest('complianceDeadline', 'complianceDeadline is not a valid time');
    if (complianceDeadline < deadline)
      throw new RejectedRequest('complianceDeadline', 'complianceDeadline must not be before the deadline');
    if (complianceDeadline - now > MAX_HORIZON_MS) {
      throw new RejectedRequest('complianceDeadline', 'complianceDeadline must be at most 366 days ahead');
    }
  }
  checkMetadata(request.metadata);

  const limits = { minPollIntervalMs: settings.minPollIntervalMs, maxChecks: settings.maxChecksPerNotice };
  const plan = planChecks(now, deadline, request.policy, limits);
  if (!plan.ok) throw new RejectedRequest(plan.field, plan.message);
  // The content must outlive every step that may still send it, whatever the TTL says.
  const contentKeepMs = Math.max(
    settings.contentTtlMs,
    lastSmsCheckBy(deadline, complianceDeadline, limits, { quietHours: settings.quietHours }) - now,
  );

  const id = newNoticeId(ctx.shard, now);
  const contentSha256 = sha256Hex(canonicalize(request.content) ?? '');
  const emailPolicy: PolicyOutcome = !policy.consent.email ? 'no_consent' : ctx.emailSuppressed ? 'suppressed' : 'allowed';
  // Only the notice's own region is kept: the policy's region is read when the fallback is decided.
  const region = request.recipient.region;
  const expectedCost = {
    email: costOf({ emailSends: 1, emailChecks: plan.checks.length, smsSegments: 0, smsChecks: 0 }, settings.prices),
    smsIfFallback:
      phone === undefined
        ? null
        : costOf(
            { emailSends: 0, emailChecks: 0, smsSegments: smsSegments(request.content.sms ?? request.content.subject), smsChecks: 0 },
            settings.prices,
          ),
  };

  const fields: NoticeFields = {
    state: 'accepted',
    category: request.category,
    recipientId: request.recipient.id,
    email,
    createdAt: now,
    deadline,
    policyVersion: policy.version,
    emailPolicy,
    providerTimeoutMs: settings.providerTimeoutMs,
    pollFirstMs: plan.firstCheckAfterMs,
    pollIntervalMs: plan.minCheckIntervalMs,
  };
  if (phone !== undefined) fields.phone = phone;
  if (region !== undefined) fields.region = region;
  if (complianceDeadline !== undefined) fields.complianceDeadline = complianceDeadline;
  if (ctx.idempotencyKey !== undefined) fields.idempotencyKey = ctx.idempotencyKey;
  const tenant = ctx.tenant ?? DEFAULT_TENANT;
  if (tenant !== DEFAULT_TENANT) {
    // The default tenant's notices keep the layout of before tenants: no field, stats as they were.
    fields.tenant = tenant;
    fields.statsHour = statsHourOf(Math.floor(now / STATS_HOUR_MS), tenant);
  }

  const entries: LogEntry[] = [
    {
      type: 'notice.accepted',
      tenant,
      category: request.category,
      recipientId: request.recipient.id,
      policyVersion: policy.version,
      contentSha256,
      deadline: iso(deadline),
      complianceDeadline: complianceDeadline === undefined ? undefined : iso(complianceDeadline),
      contentExpiresAt: iso(now + contentKeepMs),
      providerTimeoutMs: settings.providerTimeoutMs,
      pollPlan: plan.checks.map(iso),
      firstCheckAfterMs: plan.firstCheckAfterMs,
      minCheckIntervalMs: plan.minCheckIntervalMs,
      pollFloorMs: settings.minPollIntervalMs,
      expectedProviderCalls: { email: 1 + plan.checks.length },
      expectedCost,
      idempotencyKey: ctx.idempotencyKey,
      hasPhone: phone !== undefined,
      metadata: request.metadata,
    },
    { type: 'policy.checked', channel: 'email', outcome: emailPolicy, policyVersion: policy.version, rulesVersion: settings.rulesVersion },
  ];

  const input: CreateNoticeInput = {
    id,
    createdAt: now,
    fields,
    content: sealContent(keyringOf(settings.encryptionKeys), id, request.content),
    entries,
    at: iso(now),
    due: now,
    contentTtlMs: contentKeepMs,
    addressMembers: addressMembers(settings.addressLookup, id, { email, phone }),
  };
  return { input, deadline, plannedChecks: plan.checks };
}
