/**
 * Email through Amazon SES v2, with the official `@aws-sdk/client-sesv2`.
 *
 * SES has no per-message status read Herald can rely on: what happens to a message reaches
 * Herald as events (configuration set → SNS → SQS), which the feed sweep (feed.ts) stores as
 * each message's latest observation. `status` reads that observation, so the poll plan, the
 * log entries and the deadline rule are the same as for a provider with a status API.
 *
 * A send in doubt is found by Herald's key, sent as the `herald_key` message tag and carried
 * by the events. While the feed has not shown it, the search cannot tell "never sent" from "not
 * seen yet", so it throws instead of answering "none": the attempt stays in doubt. SES publishes
 * a `Send` event for every message it takes, so absence is established by the feed: once
 * `feedAbsenceMs` (HERALD_FEED_ABSENCE_MS) have passed since the attempt started, and the sweep
 * has read the queue to its end since then, no event with the key means SES never took the
 * message, and the search answers null (the engine sends once more). A second email is then
 * possible only if the feed lost the `Send` event, or delivered it later than that.
 */
import { GetAccountCommand, SESv2Client, SendEmailCommand, type MessageTag } from '@aws-sdk/client-sesv2';
import { systemClock, type Clock } from '../clock.js';
import type { ProviderFeedStore } from '../store/provider-feed.js';
import { awsCall, awsClientConfig, type AwsClientOptions } from './feed-aws.js';
import { IDEMPOTENCY_TAG, idempotencyTagValue } from './feed-events.js';
import {
  ProviderError,
  type EmailMessage,
  type EmailProvider,
  type SearchWindow,
  type SendResult,
  type StatusObservation,
} from './types.js';

export const SES_PROVIDER = 'ses';

export interface SesProviderOptions extends AwsClientOptions {
  from: string;
  /** The configuration set whose event destination feeds SES_EVENTS_QUEUE_URL: without it SES publishes no events. */
  configurationSet: string;
  /** Where the feed sweep keeps what the events said; absent in processes that only verify (`herald doctor`). */
  feed: ProviderFeedStore | undefined;
  /** HERALD_FEED_ABSENCE_MS: no event of an attempt's key this long after it started means SES never took it. */
  feedAbsenceMs: number;
  /** The clock the feed sweep marks its reads by (the system's). */
  clock?: Clock;
}

/** SES tags: at most 50 per message; names and values of letters, digits, `_` and `-`, at most 256 characters. */
const TAG_LIMITS = { tags: 50, length: 256 } as const;

/** What the adapter reports before the feed has shown any event of an accepted message. */
export const NO_EVENT_YET = 'NoEventYet';

/** Creates the SES email provider. */
export function createSesProvider(opts: SesProviderOptions): EmailProvider {
  if (!(opts.timeoutMs > 0)) throw new Error('ses: timeoutMs must be a positive number of milliseconds');
  if (!(opts.feedAbsenceMs > 0)) throw new Error('ses: feedAbsenceMs must be a positive number of milliseconds');
  const clock = opts.clock ?? systemClock;
  const client = new SESv2Client(awsClientConfig(opts));
  const call = <T>(request: (abortSignal: AbortSignal) => Promise<T>) => awsCall(SES_PROVIDER, opts.timeoutMs, request);
  const feed = (): ProviderFeedStore => {
    if (!opts.feed) throw new Error('ses: no feed store: status reads need the worker');
    return opts.feed;
  };

  return {
    name: SES_PROVIDER,
    feedAbsenceMs: opts.feedAbsenceMs,

    close: () => client.destroy(),

    async verify(): Promise<string> {
      const account = await call((abortSignal) => client.send(new GetAccountCommand({}), { abortSignal }));
      const quota = account.SendQuota;
      return `account ${account.SendingEnabled ? 'sending enabled' : 'sending DISABLED'}, ${
        account.ProductionAccessEnabled ? 'production access' : 'sandbox (verified recipients only)'
      }${quota ? `, ${quota.SentLast24Hours ?? 0}/${quota.Max24HourSend ?? '?'} sent in 24 h at most ${quota.MaxSendRate ?? '?'}/s` : ''}`;
    },

    async send(message: EmailMessage): Promise<SendResult> {
      const answer = await call((abortSignal) =>
        client.send(
          new SendEmailCommand({
            FromEmailAddress: opts.from,
            // One recipient per message: SES reports Delivery and Bounce per message only then.
            Destination: { ToAddresses: [message.to] },
            Content: {
              Simple: {
                Subject: { Data: message.subject, Charset: 'UTF-8' },
                Body: {
                  ...(message.text !== undefined ? { Text: { Data: message.text, Charset: 'UTF-8' } } : {}),
                  ...(message.html !== undefined ? { Html: { Data: message.html, Charset: 'UTF-8' } } : {}),
                },
              },
            },
            EmailTags: sesTags(message.idempotencyKey, message.metadata),
            ConfigurationSetName: opts.configurationSet,
          }),
          { abortSignal },
        ),
      );
      if (typeof answer.MessageId !== 'string' || answer.MessageId === '') {
        // Accepted (2xx) but unusable: the send is in doubt.
        throw new ProviderError('ses: SendEmail answered without a MessageId', { kind: 'server_error' });
      }
      return { providerMessageId: answer.MessageId };
    },

    async status(providerMessageId: string): Promise<StatusObservation> {
      const observed = await feed().observation(SES_PROVIDER, providerMessageId);
      if (!observed) return { providerStatus: NO_EVENT_YET, status: 'pending', engagement: [] };
      const { events: _events, ...observation } = observed;
      // The notice's check suppresses its own address under SES's name for why.
      if (observation.suppressed)
        observation.suppressionSource = observation.engagement.includes('complained') ? 'ses_complaint' : 'ses_hard_bounce';
      return observation;
    },

    async findByIdempotencyKey(idempotencyKey: string, _to: string, window?: SearchWindow): Promise<SendResult | null> {
      const [found] = await feed().tagged(SES_PROVIDER, idempotencyTagValue(idempotencyKey));
      if (found !== undefined) return { providerMessageId: found, providerStatus: 'Send' };
      if (window !== undefined && window.lastAttemptAgeMs >= opts.feedAbsenceMs) {
        // The feed must have been read to its end since the event would have been there.
        const absentFrom = clock.now() - window.lastAttemptAgeMs + opts.feedAbsenceMs;
        const readThrough = await feed().readThrough(SES_PROVIDER);
        if (readThrough !== undefined && readThrough >= absentFrom) return null;
        throw new ProviderError(
          'ses: no event with this key in the event feed, which has not been read to its end since the absence time: the attempt stays in doubt',
          { kind: 'server_error' },
        );
      }
      throw new ProviderError(
        'ses: no Send event with this key in the event feed (yet); SES has no message search, so the attempt stays in doubt until the feed shows it or establishes its absence',
        { kind: 'server_error' },
      );
    },
  };
}

/** The message tags of one send: Herald's key first, then the extra metadata that fits SES's rules. */
export function sesTags(idempotencyKey: string, extra: Record<string, string> = {}): MessageTag[] {
  const tags: MessageTag[] = [{ Name: IDEMPOTENCY_TAG, Value: idempotencyTagValue(idempotencyKey) }];
  const allowed = /^[A-Za-z0-9_-]+$/;
  for (const [name, value] of Object.entries(extra)) {
    if (tags.length >= TAG_LIMITS.tags) break;
    const cut = String(value).slice(0, TAG_LIMITS.length);
    if (name === IDEMPOTENCY_TAG || !allowed.test(name) || name.length > TAG_LIMITS.length || !allowed.test(cut)) continue;
    tags.push({ Name: name, Value: cut });
  }
  return tags;
}
