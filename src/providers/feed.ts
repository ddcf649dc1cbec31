/**
 * The feed sweep: for the providers that report only through an event feed (SES,
 * AWS SMS: configuration set → SNS → SQS), pull each configured queue, keep each message's
 * latest observation in Redis, and only then delete what was stored. The adapters' `status`
 * and in-doubt searches read those observations.
 *
 * SQS delivers at least once and in no particular order: the store ranks events so that
 * duplicates and late `Send`s change nothing (src/store/lua/recordFeedEvent-1.lua). A message
 * whose body cannot be read is counted and left in the queue, to be read again; once SQS has
 * handed it out POISON_RECEIVES times it is left to the queue's redrive policy (its dead-letter
 * queue), or, on a queue without one, deleted with a warning that says what it was (never its
 * body). Each source is pinned to one SNS topic: a message from any other topic, or
 * with no SNS envelope, is deleted and counted, never recorded. A bounce or complaint
 * suppresses only the address Herald recorded for the message's notice, and only when it is the
 * address the event names: an event naming another address records nothing.
 */
import { DeleteMessageBatchCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import type { Logger } from 'pino';
import { iso, type Clock } from '../clock.js';
import { sha256Hex } from '../digest.js';
import { normalizeEmail } from '../notice/accept.js';
import type { ProviderFeedStore } from '../store/provider-feed.js';
import type { SuppressionStore } from '../store/suppressions.js';
import { awsCall, awsClientConfig, type AwsClientOptions } from './feed-aws.js';
import type { FeedMessage, FeedOutcome } from './feed-events.js';

/** One events queue and how to read its messages. */
export interface FeedSource {
  /** The provider whose messages the events are about (`ses`, `aws-sms`): the store's namespace. */
  provider: string;
  queueUrl: string;
  /** The SNS topic whose envelopes the queue may hold (SES_EVENTS_TOPIC_ARN, AWS_SMS_EVENTS_TOPIC_ARN). */
  topicArn: string;
  read(body: string, now: number, topicArn: string): FeedMessage;
}

export interface FeedSweepSettings {
  /** Long poll of the first receive of a sweep, in seconds (0–20): short, so a shutdown waits little. */
  waitSeconds: number;
  /** Longest one sweep keeps draining a busy queue. */
  budgetMs: number;
}

/** What one sweep did, per run. */
export interface FeedSweepReport {
  received: number;
  recorded: number;
  ignored: number;
  /** From another topic, or no SNS envelope at all: deleted unrecorded. */
  foreign: number;
  /** Past a bound, or naming an address other than the notice's own: deleted unrecorded. */
  refused: number;
  unreadable: number;
  deleted: number;
  failed: number;
}

/** SQS hands out at most 10 messages per receive. */
const RECEIVE_MAX = 10;

/**
 * How many times SQS may hand out a message Herald cannot read before Herald gives up on it.
 * Reading is deterministic, so later receives only help a worker of a newer version; a redrive
 * policy then moves it to its dead-letter queue, and a queue without one would hand it out until
 * its retention period ends (four days by default), every visibility timeout, each time a
 * request and a warning: Herald deletes it instead, once, with a warning naming it.
 */
export const POISON_RECEIVES = 5;

/** How long a queue's redrive policy, once read, is taken as it was. */
const REDRIVE_CHECK_EVERY_MS = 5 * 60_000;

export class FeedSweep {
  private readonly sqs: SQSClient;

  constructor(
    private readonly deps: {
      sources: FeedSource[];
      sqs: AwsClientOptions;
      store: ProviderFeedStore;
      suppressions: SuppressionStore;
      clock: Clock;
      log: Logger;
      settings: FeedSweepSettings;
    },
  ) {
    // The long poll is part of the request: the bound of one call must leave room for it.
    const sqs = { ...deps.sqs, timeoutMs: deps.sqs.timeoutMs + deps.settings.waitSeconds * 1000 };
    this.sqs = new SQSClient({ ...awsClientConfig(sqs), useQueueUrlAsEndpoint: false });
    this.timeoutMs = sqs.timeoutMs;
  }

  private readonly timeoutMs: number;
  /** Per queue URL: whether it has a redrive policy, and when that was read. */
  private readonly redrive = new Map<string, { has: boolean; readAt: number }>();

  get sources(): readonly FeedSource[] {
    return this.deps.sources;
  }

  /** One sweep over every queue: drains each within the budget. */
  async sweepOnce(): Promise<FeedSweepReport> {
    const report: FeedSweepReport = { received: 0, recorded: 0, ignored: 0, foreign: 0, refused: 0, unreadable: 0, deleted: 0, failed: 0 };
    const until = this.deps.clock.now() + this.deps.settings.budgetMs;
    for (const source of this.deps.sources) {
      try {
        await this.drain(source, until, report);
      } catch (error) {
        report.failed += 1;
        this.deps.log.warn(
          { err: error, provider: source.provider },
          'feed sweep: the events queue could not be read; the next sweep tries again',
        );
      }
    }
    return report;
  }

  private async drain(source: FeedSource, until: number, report: FeedSweepReport): Promise<void> {
    const startedAt = this.deps.clock.now();
    let waitSeconds = this.deps.settings.waitSeconds;
    while (this.deps.clock.now() < until) {
      const answer = await awsCall('sqs', this.timeoutMs, (abortSignal) =>
        this.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: source.queueUrl,
            MaxNumberOfMessages: RECEIVE_MAX,
            WaitTimeSeconds: waitSeconds,
            MessageSystemAttributeNames: ['ApproximateReceiveCount'],
          }),
          { abortSignal },
        ),
      );
      const messages = answer.Messages ?? [];
      report.received += messages.length;
      const done: Message[] = [];
      const outcomes = new Map<FeedOutcome, number>();
      for (const message of messages) {
        let outcome = await this.store(source, message, report);
        if (outcome === 'unreadable' && (await this.givesUp(source, message))) outcome = 'poison_deleted';
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        if (outcome !== 'unreadable') done.push(message);
      }
      await this.deps.store.countMessages(source.provider, outcomes);
      await this.delete(source, done, report);
      if (messages.length < RECEIVE_MAX) {
        // Read to its end: every event visible when this drain began is stored (ses.ts's absence rests on it).
        await this.deps.store.markRead(source.provider, startedAt);
        return;
      }
      // A full answer: more may be waiting; read on without waiting.
      waitSeconds = 0;
    }
  }

  /** Stores what one SQS message says; says what became of it (all but `unreadable` may be deleted). */
  private async store(source: FeedSource, message: Message, report: FeedSweepReport): Promise<FeedOutcome> {
    const now = this.deps.clock.now();
    const { log } = this.deps;
    const read = source.read(message.Body ?? '', now, source.topicArn);
    const about = { provider: source.provider, sqsMessageId: message.MessageId };
    switch (read.kind) {
      case 'unreadable':
        report.unreadable += 1;
        log.warn({ ...about, reason: read.reason, receives: receivesOf(message) }, 'feed sweep: a message cannot be read');
        return 'unreadable';
      case 'foreign':
        report.foreign += 1;
        log.warn(
          { ...about, reason: read.reason, topicArn: read.topicArn, pinnedTopicArn: source.topicArn },
          "feed sweep: a message not from the feed's topic is deleted unrecorded",
        );
        return read.outcome;
      case 'refused':
        report.refused += 1;
        log.warn({ ...about, reason: read.reason }, 'feed sweep: a message past a bound is deleted unrecorded');
        return 'refused';
      case 'ignored':
        report.ignored += 1;
        return 'ignored';
    }
    const { event, tag, suppress } = read;
    if (suppress && !(await this.suppressOwn(suppress, now))) {
      report.refused += 1;
      log.warn(
        { ...about, noticeId: suppress.noticeId, source: suppress.source },
        "feed sweep: a bounce or complaint naming an address other than its notice's is deleted unrecorded",
      );
      return 'address_mismatch';
    }
    if (tag) await this.deps.store.recordTag(source.provider, tag.value, event.messageId, tag.sentAt);
    await this.deps.store.record(source.provider, event);
    report.recorded += 1;
    return 'recorded';
  }

  /**
   * Puts the address Herald recorded for the message's notice on the suppression list, when the
   * event names that address: the provider refuses it from now on, and Herald's own list says so
   * before any notice asks. An address the event names and the notice does not hold is never
   * stored (false). With no notice to check against (a key that names none, a notice Redis no
   * longer holds), nothing is suppressed here; the notice's own check, if it still reads the
   * message, suppresses its own address (src/notice/steps/observe.ts).
   */
  private async suppressOwn(suppress: NonNullable<Extract<FeedMessage, { kind: 'event' }>['suppress']>, now: number): Promise<boolean> {
    if (suppress.noticeId === undefined) return true;
    const own = await this.deps.store.noticeEmail(suppress.noticeId);
    if (own === undefined) return true;
    if (normalizeEmail(suppress.address) !== normalizeEmail(own)) return false;
    await this.deps.suppressions.add({
      channel: 'email',
      address: normalizeEmail(own),
      reason: suppress.reason,
      source: suppress.source,
      noticeId: suppress.noticeId,
      createdAt: iso(now),
    });
    return true;
  }

  /**
   * Whether to delete a message that cannot be read: not before SQS has handed it out
   * POISON_RECEIVES times, and never from a queue with a redrive policy (its dead-letter queue
   * takes it), nor while that cannot be told. The warning names the message (ID, receives, size,
   * digest), never its body.
   */
  private async givesUp(source: FeedSource, message: Message): Promise<boolean> {
    const receives = receivesOf(message);
    if (receives < POISON_RECEIVES) return false;
    const about = { provider: source.provider, sqsMessageId: message.MessageId, receives };
    const redrive = await this.hasRedrivePolicy(source);
    if (redrive !== false) {
      this.deps.log.warn(
        { ...about, redrivePolicy: redrive },
        redrive
          ? "feed sweep: an unreadable message is left to the queue's redrive policy"
          : 'feed sweep: an unreadable message is left in the queue',
      );
      return false;
    }
    const body = message.Body ?? '';
    this.deps.log.warn(
      { ...about, bytes: Buffer.byteLength(body), sha256: sha256Hex(body) },
      `feed sweep: a message no receive could read is deleted: its queue has no redrive policy (received ${receives} times)`,
    );
    return true;
  }

  /** Whether the queue has a redrive policy, read at most every few minutes; undefined when it cannot be read. */
  private async hasRedrivePolicy(source: FeedSource): Promise<boolean | undefined> {
    const now = this.deps.clock.now();
    const known = this.redrive.get(source.queueUrl);
    if (known && now - known.readAt < REDRIVE_CHECK_EVERY_MS) return known.has;
    try {
      const has = await queueHasRedrivePolicy(this.sqs, source.queueUrl, this.timeoutMs);
      this.redrive.set(source.queueUrl, { has, readAt: now });
      return has;
    } catch (error) {
      this.deps.log.warn({ err: error, provider: source.provider }, "feed sweep: the events queue's redrive policy could not be read");
      return undefined;
    }
  }

  private async delete(source: FeedSource, messages: Message[], report: FeedSweepReport): Promise<void> {
    const entries = messages.flatMap((m, i) => (m.ReceiptHandle ? [{ Id: String(i), ReceiptHandle: m.ReceiptHandle }] : []));
    if (entries.length === 0) return;
    const answer = await awsCall('sqs', this.timeoutMs, (abortSignal) =>
      this.sqs.send(new DeleteMessageBatchCommand({ QueueUrl: source.queueUrl, Entries: entries }), { abortSignal }),
    );
    report.deleted += answer.Successful?.length ?? 0;
    // Not deleted: read again later, which the store's ranking makes harmless.
    if ((answer.Failed ?? []).length > 0) {
      this.deps.log.warn(
        { provider: source.provider, failed: answer.Failed?.length },
        'feed sweep: some stored messages were not deleted; they will be read again',
      );
    }
  }

  close(): void {
    this.sqs.destroy();
  }
}

/** How many times SQS has handed out this message (1 when it does not say). */
function receivesOf(message: Message): number {
  const count = Number(message.Attributes?.ApproximateReceiveCount);
  return Number.isInteger(count) && count >= 1 ? count : 1;
}

/** Whether the queue sends what is received too often to a dead-letter queue (its `RedrivePolicy`). Throws ProviderError. */
async function queueHasRedrivePolicy(sqs: SQSClient, queueUrl: string, timeoutMs: number): Promise<boolean> {
  const answer = await awsCall('sqs', timeoutMs, (abortSignal) =>
    sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['RedrivePolicy'] }), { abortSignal }),
  );
  return Boolean(answer.Attributes?.RedrivePolicy);
}

/**
 * Reads each events queue's attributes, receiving nothing (`herald doctor`): whether the queue
 * exists and the credentials may read it, how many events wait in it, and whether it has a
 * redrive policy. Throws ProviderError.
 */
export async function checkFeedQueues(
  sources: readonly FeedSource[],
  sqsOptions: AwsClientOptions,
): Promise<{ provider: string; queueUrl: string; waiting: number; redrivePolicy: boolean }[]> {
  const sqs = new SQSClient({ ...awsClientConfig(sqsOptions), useQueueUrlAsEndpoint: false });
  try {
    const results = [];
    for (const source of sources) {
      const answer = await awsCall('sqs', sqsOptions.timeoutMs, (abortSignal) =>
        sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: source.queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'RedrivePolicy'] }),
          { abortSignal },
        ),
      );
      results.push({
        provider: source.provider,
        queueUrl: source.queueUrl,
        waiting: Number(answer.Attributes?.ApproximateNumberOfMessages ?? 0),
        redrivePolicy: Boolean(answer.Attributes?.RedrivePolicy),
      });
    }
    return results;
  } finally {
    sqs.destroy();
  }
}
