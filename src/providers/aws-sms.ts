/**
 * SMS through AWS End User Messaging SMS (`pinpoint-sms-voice-v2`), with the official
 * `@aws-sdk/client-pinpoint-sms-voice-v2`.
 *
 * Like SES it has no per-message status read: its configuration set's events reach an SQS
 * queue through SNS, the feed sweep stores each message's latest observation, and `status`
 * reads it. Herald's SMS key travels in `Context` and comes back in every event's `context`:
 * that is how an SMS in doubt is found. When the feed has not shown it, the search throws
 * rather than answering "none", so a second SMS is never sent blindly; the engine searches again
 * until the SMS plan's span has passed since the attempt (`smsSearchEndsAt`), then records the SMS
 * unconfirmed.
 */
import { DescribeAccountAttributesCommand, PinpointSMSVoiceV2Client, SendTextMessageCommand } from '@aws-sdk/client-pinpoint-sms-voice-v2';
import type { ProviderFeedStore } from '../store/provider-feed.js';
import { awsCall, awsClientConfig, type AwsClientOptions } from './feed-aws.js';
import { IDEMPOTENCY_TAG } from './feed-events.js';
import { NO_EVENT_YET } from './ses.js';
import { ProviderError, type SendResult, type SmsMessage, type SmsProvider, type StatusObservation } from './types.js';

export const AWS_SMS_PROVIDER = 'aws-sms';

export interface AwsSmsProviderOptions extends AwsClientOptions {
  /** A phone number, sender ID, pool or their ARN (AWS_SMS_ORIGINATION_IDENTITY). */
  originationIdentity: string;
  /** The configuration set whose event destination feeds AWS_SMS_EVENTS_QUEUE_URL. */
  configurationSet: string;
  feed: ProviderFeedStore | undefined;
}

/** Creates the AWS End User Messaging SMS provider. */
export function createAwsSmsProvider(opts: AwsSmsProviderOptions): SmsProvider {
  if (!(opts.timeoutMs > 0)) throw new Error('aws-sms: timeoutMs must be a positive number of milliseconds');
  const client = new PinpointSMSVoiceV2Client(awsClientConfig(opts));
  const call = <T>(request: (abortSignal: AbortSignal) => Promise<T>) => awsCall(AWS_SMS_PROVIDER, opts.timeoutMs, request);
  const feed = (): ProviderFeedStore => {
    if (!opts.feed) throw new Error('aws-sms: no feed store: status reads need the worker');
    return opts.feed;
  };

  return {
    name: AWS_SMS_PROVIDER,

    close: () => client.destroy(),

    async verify(): Promise<string> {
      const answer = await call((abortSignal) => client.send(new DescribeAccountAttributesCommand({}), { abortSignal }));
      const attributes = (answer.AccountAttributes ?? []).map((a) => `${a.Name}=${a.Value}`).join(', ');
      return `account ${attributes || 'reachable'}`;
    },

    async send(message: SmsMessage): Promise<SendResult> {
      const answer = await call((abortSignal) =>
        client.send(
          new SendTextMessageCommand({
            DestinationPhoneNumber: message.to,
            OriginationIdentity: message.from ?? opts.originationIdentity,
            MessageBody: message.body,
            MessageType: 'TRANSACTIONAL',
            ConfigurationSetName: opts.configurationSet,
            ...(message.idempotencyKey ? { Context: { [IDEMPOTENCY_TAG]: message.idempotencyKey } } : {}),
          }),
          { abortSignal },
        ),
      );
      if (typeof answer.MessageId !== 'string' || answer.MessageId === '') {
        throw new ProviderError('aws-sms: SendTextMessage answered without a MessageId', { kind: 'server_error' });
      }
      return { providerMessageId: answer.MessageId };
    },

    async status(providerMessageId: string): Promise<StatusObservation> {
      const observed = await feed().observation(AWS_SMS_PROVIDER, providerMessageId);
      if (!observed) return { providerStatus: NO_EVENT_YET, status: 'pending', engagement: [] };
      const { events: _events, ...observation } = observed;
      return observation;
    },

    async findSince(_to: string, since: number, _body: string, message?: SmsMessage): Promise<SendResult[]> {
      const idempotencyKey = message?.idempotencyKey;
      if (idempotencyKey === undefined) {
        throw new ProviderError('aws-sms: an SMS in doubt is found by its key only, and none was given: the attempt stays in doubt', {
          kind: 'server_error',
        });
      }
      const found = await feed().tagged(AWS_SMS_PROVIDER, idempotencyKey, since);
      if (found.length > 0) return found.map((providerMessageId) => ({ providerMessageId }));
      throw new ProviderError(
        'aws-sms: no event with this key in the event feed (yet); the service has no message search, so the attempt stays in doubt',
        { kind: 'server_error' },
      );
    },

    async cancel(): Promise<void> {
      throw new ProviderError('aws-sms: End User Messaging SMS cannot cancel or schedule a message', { kind: 'rejected' });
    },
  };
}
