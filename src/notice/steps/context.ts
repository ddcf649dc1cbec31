/**
 * What every step of the engine shares: its dependencies, the clock, and the few helpers more
 * than one step needs. Steps import this module, never each other's engine, so the step modules
 * form no import circle.
 */
import type { Logger } from 'pino';
import { iso, type Clock } from '../../clock.js';
import type { Prices } from '../../config.js';
import type { Rules } from '../../policy/rules.js';
import { ProviderError, type Channel } from '../../providers/types.js';
import type { NoticeContent, NoticeStore, StoredContentRead, StoredNotice } from '../../store/notices.js';
import type { PolicyStore } from '../../store/policies.js';
import type { SuppressionSource, SuppressionStore } from '../../store/suppressions.js';
import type { Providers } from '../channels.js';
import { costOf } from '../cost.js';
import type { NoticeCompleted, SmsUnconfirmed } from '../entries.js';
import { noticeOf, readNotice, type Notice } from '../notice.js';
import type { Scheduler } from '../outcome.js';
import type { StatusReadLimit } from '../../store/status-reads.js';
import type { PlanLimits } from '../planner.js';
import type { NoticeState } from '../states.js';

export interface EngineSettings {
  providerTimeoutMs: number;
  minPollIntervalMs: number;
  maxChecksPerNotice: number;
  prices: Prices;
  /** The regional rules file; undefined: SMS allowed everywhere, no quiet hours. */
  rules: Rules | undefined;
  /** HERALD_MAX_RETRY_AFTER: the longest a provider's Retry-After is followed (default 5 min). */
  maxRetryAfterMs?: number;
  /** Status calls per second per channel, all workers together (named in the late-check warning). */
  statusChecksPerSecond?: { email: number; sms: number };
}

/** A planned check that runs this much later than planned is late enough to warn about. */
export const LATE_CHECK_WARN_MS = 5_000;
/** At most one late-check warning per channel in this period; it counts the late checks it stood for. */
const LATE_CHECK_WARN_EVERY_MS = 30_000;

/** HERALD_MAX_RETRY_AFTER's default. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 5 * 60_000;

export interface EngineDeps extends Providers {
  store: NoticeStore;
  policies: PolicyStore;
  suppressions: SuppressionStore;
  clock: Clock;
  log: Logger;
  schedule: Scheduler;
  settings: EngineSettings;
  /**
   * The providers' status-read limits, shared by every worker, for the planned checks the
   * notice's job runs (src/store/status-reads.ts); none: checks are not limited here.
   */
  statusReads?: StatusReadLimit;
}

/** Optimistic steps re-read the notice this many times when another worker moved it meanwhile. */
export const MAX_RACES = 3;

type LateChecks = Record<Channel, { count: number; warnedAt: number }>;

export class StepContext {
  /** The notice a run read before its step: the step's own first read of it (`notice`) takes it instead of Redis. */
  private firstRead: Notice | undefined;
  /** The content the run read with the notice, for every read of it in the run (`content`). */
  private contentRead: StoredContentRead | undefined;
  private firstReadId: string | undefined;
  /** A run's context (`forRun`): it may keep the notice as a transition left it (`keepRead`). */
  private isRun = false;

  constructor(
    readonly deps: EngineDeps,
    private readonly lateChecks: LateChecks = { email: { count: 0, warnedAt: -Infinity }, sms: { count: 0, warnedAt: -Infinity } },
  ) {}

  /**
   * The context of one run of a notice's job: its steps schedule through `schedule`, and the
   * first read of the notice is `read`, which the run has just made.
   */
  forRun(schedule: Scheduler, read: Notice, content?: StoredContentRead): StepContext {
    const run = new StepContext({ ...this.deps, schedule }, this.lateChecks);
    run.firstRead = read;
    run.firstReadId = read.id;
    run.contentRead = content;
    run.isRun = true;
    return run;
  }

  /**
   * The notice as a transition of this run just left it (the script's own read, `{ read: true }`):
   * the run's next read of it takes it instead of Redis. A context shared by runs keeps none.
   */
  keepRead(stored: StoredNotice | undefined): void {
    if (!this.isRun || stored === undefined || stored.id !== this.firstReadId) return;
    this.firstRead = noticeOf(stored);
  }

  /**
   * The notice's content, opened (null once gone): the run's read of it when there is one (content
   * never changes while it is kept; a purge comes only after the last send), else from Redis.
   */
  content(id: string): Promise<NoticeContent | null> {
    return this.store.content(id, this.firstReadId === id ? this.contentRead : undefined);
  }

  /**
   * Notes how late a planned status check ran. Checks run late when the status limiter
   * (HERALD_EMAIL_STATUS_PER_SECOND / HERALD_SMS_STATUS_PER_SECOND) or too few workers hold them
   * back: the lateness goes into the log (`plannedAt`) and /metrics, and, past
   * LATE_CHECK_WARN_MS, into one warning per channel every half minute.
   */
  checkRan(channel: Channel, plannedAt: number | undefined): string | undefined {
    if (plannedAt === undefined) return undefined;
    const now = this.now();
    const lateMs = now - plannedAt;
    const late = this.lateChecks[channel];
    if (lateMs > LATE_CHECK_WARN_MS) {
      late.count += 1;
      if (now - late.warnedAt >= LATE_CHECK_WARN_EVERY_MS) {
        const limit = this.deps.settings.statusChecksPerSecond?.[channel];
        this.deps.log.warn(
          { channel, lateMs, lateChecks: late.count, statusChecksPerSecond: limit },
          `planned ${channel} status checks run late (this one ${Math.round(lateMs / 1000)} s): the status limiter${limit ? ` (${limit}/s, HERALD_${channel.toUpperCase()}_STATUS_PER_SECOND)` : ''} or too few workers hold them back`,
        );
        late.warnedAt = now;
        late.count = 0;
      }
    }
    return iso(plannedAt);
  }

  get store(): NoticeStore {
    return this.deps.store;
  }

  now(): number {
    return this.deps.clock.now();
  }

  /** The notice as it is now, its plans laid out; null when Redis does not hold it. */
  notice(id: string): Promise<Notice | null> {
    const first = this.firstRead;
    if (first?.id === id) {
      this.firstRead = undefined;
      return Promise.resolve(first);
    }
    return readNotice(this.store, id);
  }

  /** The SMS plan's limits: the poll floor and the poll budget. */
  limits(): PlanLimits {
    return { minPollIntervalMs: this.deps.settings.minPollIntervalMs, maxChecks: this.deps.settings.maxChecksPerNotice };
  }

  /** The error with its Retry-After clamped to HERALD_MAX_RETRY_AFTER. */
  bounded(error: ProviderError): ProviderError {
    return error.withRetryAfterAtMost(this.deps.settings.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS);
  }

  /**
   * Removes the deadline job of a notice decided before its deadline: it would only find the
   * notice done, and meanwhile it holds memory and a row in Bull Board. Failing here is
   * harmless, as the job then runs and does nothing.
   */
  async dropDeadline(id: string): Promise<void> {
    try {
      await this.deps.schedule.dropDeadline(id);
    } catch (error) {
      this.deps.log.debug({ err: error, noticeId: id }, 'deadline job not removed');
    }
  }

  /**
   * Removes a channel's status-check job once a webhook has settled the channel: the checks it
   * would run are saved. Failing here is harmless, as the job then runs and finds nothing to do.
   */
  async dropChecks(id: string, channel: Channel): Promise<void> {
    try {
      await this.deps.schedule.dropChecks(id, channel);
    } catch (error) {
      this.deps.log.debug({ err: error, noticeId: id, channel }, 'status-check job not removed');
    }
  }

  /** Adds an address to the suppression list because a provider said so, and logs it (without the address). */
  async suppress(notice: Notice, channel: Channel, address: string, source: SuppressionSource, reason: string): Promise<void> {
    const now = this.now();
    const added = await this.deps.suppressions.add({ channel, address, reason, source, noticeId: notice.id, createdAt: iso(now) });
    if (!added) return;
    await this.store.transition(notice.id, now, iso(now), {
      name: 'annotate',
      entries: [{ type: 'suppression.added', channel, source, reason }],
    });
  }

  /** The `notice.completed` entry, with what the notice cost at the configured prices. */
  completed(notice: Notice, state: NoticeState, extra: { emailChecks?: number; smsChecks?: number } = {}): NoticeCompleted {
    const checks = {
      email: notice.emailChannel.checksDone + (extra.emailChecks ?? 0),
      sms: notice.smsChannel.checksDone + (extra.smsChecks ?? 0),
    };
    const cost = costOf(
      {
        emailSends: notice.emailChannel.providerMessageId ? 1 : 0,
        emailChecks: checks.email,
        smsSegments: notice.smsSegments,
        smsChecks: checks.sms,
      },
      this.deps.settings.prices,
    );
    return { type: 'notice.completed', state, cost, checks };
  }

  /**
   * `sms.unconfirmed`: the SMS plan has run out without a final status from the provider (a
   * message that stays `sent`, status reads that never answer). Herald does nothing more for the
   * notice, which stays `sms_sent`; the entry says why, and lets the notice leave Redis.
   */
  smsUnconfirmed(notice: Notice, checks: number, lastStatus?: string): SmsUnconfirmed {
    return {
      type: 'sms.unconfirmed',
      attemptId: notice.smsChannel.attemptId,
      reason: 'sms_plan_ended',
      lastStatus: lastStatus ?? notice.smsChannel.status ?? null,
      checks,
    };
  }
}

/** The email checks the poll jobs run: the plan without its last check, which the deadline step makes. */
export function emailChecksBeforeDeadline(notice: Notice): number[] {
  return notice.pollPlan.filter((at) => at < notice.deadline);
}
