/**
 * The AWS End User Messaging SMS targets Herald uses (awsJson1_0 on `POST /`):
 * `PinpointSMSVoiceV2.SendTextMessage` and `PinpointSMSVoiceV2.DescribeAccountAttributes`;
 * errors as `{"__type": <Name>, "Message": …}` with their extra fields (`Reason`, …).
 *
 * The number chooses the behaviour as for Twilio (sms-behaviour.ts: the last two digits of
 * +1 NPA 555-01XX): `03` is opted out (`ConflictException` `DESTINATION_PHONE_NUMBER_OPTED_OUT`),
 * `04` flaky (a 500, then a throttling error), `06` slow; the others' timelines become events
 * (`TEXT_QUEUED`, `TEXT_PENDING`, `TEXT_SUCCESSFUL`, `TEXT_DELIVERED`, `TEXT_UNREACHABLE`,
 * `TEXT_INVALID`) published through its SNS topic (`SANDBOX_TOPIC_ARNS.awsSms`) into the
 * sandbox's SMS events queue, when the send names a configuration set. Feed faults, SMS only:
 * `08` delivered with every event published twice, `09` delivered with its events arriving in
 * reverse order, `10` delivered with no event ever published (events lost on their way to the
 * queue: the feed never shows the message).
 */
import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { exchange, type Answer, type SandboxContext } from './exchange.js';
import { publish } from './ses-api.js';
import { plannedSteps, smsBehaviour, type StatusStep } from './sms-behaviour.js';
import type { SmsRecord } from './state.js';
import {
  awsCredentialProblem,
  awsJsonError,
  SANDBOX_QUEUE_NAMES,
  SANDBOX_TOPIC_ARNS,
  type AwsJsonTargets,
  type SandboxQueues,
} from './sqs-api.js';

const BODY_LIMIT = 1600;
/** The account ID the emulated messages belong to (a Twilio account SID in Twilio's records). */
const ACCOUNT = 'aws-sandbox';

/** The SMS-only feed faults, by the number's last two digits. */
const FEED_FAULTS: Record<string, 'duplicate' | 'reorder' | 'lost'> = { '08': 'duplicate', '09': 'reorder', '10': 'lost' };

const EVENT_OF_STATUS: Record<string, { type: string; final: boolean; description: string } | undefined> = {
  queued: { type: 'TEXT_QUEUED', final: false, description: 'Message is queued for sending' },
  sending: { type: 'TEXT_PENDING', final: false, description: 'Message is pending at the carrier' },
  sent: { type: 'TEXT_SUCCESSFUL', final: false, description: 'Message has been accepted by phone carrier' },
  delivered: { type: 'TEXT_DELIVERED', final: true, description: 'Message has been delivered to the handset' },
  undelivered: { type: 'TEXT_UNREACHABLE', final: true, description: 'The destination handset is unreachable' },
  failed: { type: 'TEXT_INVALID', final: true, description: 'The destination phone number is invalid or a landline' },
};

function faultAnswer(status: 429 | 500 | 503): Answer {
  if (status === 429) return awsJsonError(400, 'ThrottlingException', 'Rate exceeded');
  return status === 500
    ? awsJsonError(500, 'InternalServerException', 'Internal server error', { RequestId: randomUUID() })
    : awsJsonError(503, 'ServiceUnavailableException', 'Service unavailable');
}

/** Registers the End User Messaging SMS targets. */
export function registerAwsSms(targets: AwsJsonTargets, ctx: SandboxContext, queues: SandboxQueues): void {
  const { state } = ctx;
  const authorize = (request: FastifyRequest) => (): Answer | undefined => {
    const problem = awsCredentialProblem(request.headers.authorization);
    return problem ? awsJsonError(400, 'UnrecognizedClientException', problem) : undefined;
  };

  targets.add('PinpointSMSVoiceV2.SendTextMessage', async (request, reply, body) => {
    const to = typeof body['DestinationPhoneNumber'] === 'string' ? body['DestinationPhoneNumber'].trim() : '';
    await exchange(ctx, request, reply, {
      provider: 'aws-sms',
      operation: 'aws-sms.send',
      recipient: to,
      authorize: authorize(request),
      faultAnswer,
      run: () => send(body, to),
    });
  });

  function send(body: Record<string, unknown>, to: string): Answer {
    const text = typeof body['MessageBody'] === 'string' ? body['MessageBody'] : '';
    const from = typeof body['OriginationIdentity'] === 'string' ? body['OriginationIdentity'] : null;
    if (!/^\+[1-9]\d{6,14}$/.test(to)) {
      return awsJsonError(400, 'ValidationException', 'Invalid destination phone number', {
        Reason: 'INVALID_PARAMETER',
        Fields: [{ Name: 'DestinationPhoneNumber', Message: 'must be E.164' }],
      });
    }
    if (text === '' || text.length > BODY_LIMIT) {
      return awsJsonError(400, 'ValidationException', 'Invalid message body', {
        Reason: 'INVALID_PARAMETER',
        Fields: [{ Name: 'MessageBody', Message: `1 to ${BODY_LIMIT} characters` }],
      });
    }
    const context = typeof body['Context'] === 'object' && body['Context'] !== null ? (body['Context'] as Record<string, string>) : {};
    const configurationSet = typeof body['ConfigurationSetName'] === 'string' ? body['ConfigurationSetName'] : undefined;
    const behaviour = smsBehaviour(to);
    if (behaviour === 'opted_out') {
      return awsJsonError(400, 'ConflictException', 'The destination phone number is opted out.', {
        Message: 'The destination phone number is opted out.',
        Reason: 'DESTINATION_PHONE_NUMBER_OPTED_OUT',
        ResourceType: 'opt-out-list',
        ResourceId: 'Default',
      });
    }
    if (behaviour === 'flaky') {
      const attempt = state.nextAttempt(`aws-sms:${to}`);
      if (attempt === 1) return faultAnswer(500);
      if (attempt === 2) return faultAnswer(429);
    }
    const now = Date.now();
    const record = state.addSms({
      sid: randomUUID(),
      accountSid: ACCOUNT,
      to,
      from,
      messagingServiceSid: null,
      body: text,
      behaviour,
      createdAt: now,
      sendAt: null,
      steps: plannedSteps(behaviour, { createdAt: now, viaService: false }),
    });
    const feedFault = FEED_FAULTS[to.slice(-2)];
    if (configurationSet !== undefined && feedFault !== 'lost') publishEvents(queues, record, context, feedFault);
    return {
      status: 200,
      headers: { 'content-type': 'application/x-amz-json-1.0' },
      body: { MessageId: record.sid },
      delayMs: behaviour === 'slow' ? ctx.slowMs : 0,
    };
  }

  // The account (`herald doctor`'s authenticated call that sends nothing).
  targets.add('PinpointSMSVoiceV2.DescribeAccountAttributes', async (request, reply) => {
    await exchange(ctx, request, reply, {
      provider: 'aws-sms',
      operation: 'aws-sms.account',
      recipient: undefined,
      authorize: authorize(request),
      faultAnswer,
      run: () => ({
        status: 200,
        headers: { 'content-type': 'application/x-amz-json-1.0' },
        body: {
          AccountAttributes: [
            { Name: 'ACCOUNT_TIER', Value: 'SANDBOX' },
            { Name: 'DEFAULT_PROTECT_CONFIGURATION_ID', Value: '' },
          ],
        },
      }),
    });
  });
}

/** The message's timeline as End User Messaging events, published at their times. */
function publishEvents(
  queues: SandboxQueues,
  record: SmsRecord,
  context: Record<string, string>,
  fault: 'duplicate' | 'reorder' | undefined,
): void {
  const steps: StatusStep[] = record.steps;
  const events = steps.flatMap((step) => {
    const known = EVENT_OF_STATUS[step.status];
    if (!known) return [];
    return [
      {
        at: step.at,
        record: {
          eventType: known.type,
          eventVersion: '1.0',
          eventTimestamp: step.at,
          isFinal: known.final,
          originationPhoneNumber: record.from,
          destinationPhoneNumber: record.to,
          isoCountryCode: 'US',
          isInternationalSend: false,
          mcc: '310',
          mnc: '800',
          carrierName: 'Sandbox Wireless',
          messageId: record.sid,
          messageRequestTimestamp: record.createdAt,
          messageEncoding: 'GSM',
          messageType: 'TRANSACTIONAL',
          messageStatus: known.type.slice('TEXT_'.length),
          messageStatusDescription: known.description,
          context,
          totalMessageParts: 1,
          totalMessagePrice: 0.00581,
          totalCarrierFee: 0.00266,
        } as Record<string, unknown>,
      },
    ];
  });
  if (fault === 'reorder') {
    // The last event first: each becomes visible in reverse order, after the final one.
    const times = events.map((e) => e.at);
    events.forEach((event, i) => (event.at = times[times.length - 1 - i]!));
  }
  for (const { at, record: event } of events)
    publish(queues, SANDBOX_QUEUE_NAMES.awsSms, SANDBOX_TOPIC_ARNS.awsSms, event, at, fault === 'duplicate');
}
