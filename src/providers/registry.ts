/**
 * Which provider adapter serves each channel (HERALD_EMAIL_PROVIDER, HERALD_SMS_PROVIDER), built
 * from the configuration. Each adapter module owns its own construction; this is the one switch
 * over provider names, used by the worker and by `herald doctor`.
 */
import type { Config } from '../config.js';
import { lastSmsCheckBy, MAX_HORIZON_MS } from '../notice/planner.js';
import type { ProviderFeedStore } from '../store/provider-feed.js';
import { AWS_SMS_PROVIDER, createAwsSmsProvider } from './aws-sms.js';
import type { FeedSource } from './feed.js';
import type { AwsClientOptions } from './feed-aws.js';
import { readSesMessage, readSmsMessage } from './feed-events.js';
import { createMailgunProvider } from './mailgun.js';
import { createInfraiEmailProvider, createInfraiSmsProvider } from './infrai.js';
import { createPostmarkProvider } from './postmark.js';
import { SANDBOX_ACCOUNT_ID, SANDBOX_QUEUE_NAMES, SANDBOX_TOPIC_ARNS } from './sandbox-conventions.js';
import { createSendgridProvider, SENDGRID_LOGS_LAG_MS } from './sendgrid.js';
import { createSesProvider, SES_PROVIDER } from './ses.js';
import { createTwilioProvider } from './twilio.js';
import type { EmailProvider, SmsProvider } from './types.js';
import type { EmailProviderName, SmsProviderName } from './names.js';

export { EMAIL_PROVIDERS, SMS_PROVIDERS, STATUS_READS_PER_SECOND, type EmailProviderName, type SmsProviderName } from './names.js';

/** How long the sandbox's Email Logs may lag behind a send (its index lag, 300 ms, with room to spare). */
const SANDBOX_LOGS_LAG_MS = 1_000;

/** What building an adapter may need besides the configuration. */
export interface ProviderDeps {
  /** The sandbox's base URL, standing in for every provider URL the configuration leaves unset. */
  sandboxUrl: string | undefined;
  /** What the feed sweep stored, for the feed providers (SES, AWS SMS); absent where nothing reads status (`herald doctor`). */
  feed?: ProviderFeedStore;
  /** HERALD_PUBLIC_URL, where the sends ask the providers to push their status callbacks; absent: no callbacks. */
  publicUrl?: string;
}

/** The base URL an adapter talks to: the configured one, or the sandbox's. */
function baseUrl(configured: string | undefined, deps: ProviderDeps, variable: string): string {
  const url = configured ?? deps.sandboxUrl;
  if (url === undefined) throw new Error(`${variable} is unset and no sandbox runs`);
  return url;
}

/** True in sandbox mode when the chosen providers leave a URL unset, so that the sandbox must stand in for them. */
export function needsSandbox(config: Config): boolean {
  return config.providers === 'sandbox' && (emailUrl(config) === undefined || smsUrl(config) === undefined);
}

/** The configured base URL of the chosen email provider (undefined in sandbox mode). */
export function emailUrl(config: Config): string | undefined {
  switch (config.emailProvider) {
    case 'postmark':
      return config.postmark.apiUrl;
    case 'sendgrid':
      return config.sendgrid.apiUrl;
    case 'ses':
      return config.ses.apiUrl;
    case 'mailgun':
      return config.mailgun.apiUrl;
    case 'infrai':
      return config.infrai.apiUrl;
  }
}

/** The configured base URL of the chosen SMS provider (undefined in sandbox mode). */
export function smsUrl(config: Config): string | undefined {
  switch (config.smsProvider) {
    case 'twilio':
      return config.twilio.apiUrl;
    case 'aws-sms':
      return config.awsSms.apiUrl;
    case 'infrai':
      return config.infrai.apiUrl;
  }
}

/** The email adapter HERALD_EMAIL_PROVIDER names. */
export function createEmailProvider(config: Config, deps: ProviderDeps): EmailProvider {
  const timeoutMs = config.providerTimeoutMs;
  switch (config.emailProvider) {
    case 'postmark':
      return createPostmarkProvider({ ...config.postmark, apiUrl: baseUrl(config.postmark.apiUrl, deps, 'POSTMARK_API_URL'), timeoutMs });
    case 'sendgrid':
      return createSendgridProvider({
        ...config.sendgrid,
        apiUrl: baseUrl(config.sendgrid.apiUrl, deps, 'SENDGRID_API_URL'),
        timeoutMs,
        // The emulator lists a message within its index lag (300 ms); SendGrid publishes no bound.
        logsLagMs: config.providers === 'sandbox' ? SANDBOX_LOGS_LAG_MS : SENDGRID_LOGS_LAG_MS,
      });
    case 'ses':
      return createSesProvider({
        ...awsOptions(config, baseUrl(config.ses.apiUrl, deps, 'AWS_ENDPOINT_URL_SESV2')),
        from: config.ses.from,
        configurationSet: config.ses.configurationSet,
        feed: deps.feed,
        feedAbsenceMs: config.ses.feedAbsenceMs,
      });
    case 'mailgun':
      return createMailgunProvider({ ...config.mailgun, apiUrl: baseUrl(config.mailgun.apiUrl, deps, 'MAILGUN_API_URL'), timeoutMs });
    case 'infrai':
      return createInfraiEmailProvider({ ...config.infrai, apiUrl: baseUrl(config.infrai.apiUrl, deps, 'INFRAI_API_URL'), timeoutMs });
  }
}

/** The SMS adapter HERALD_SMS_PROVIDER names. */
export function createSmsProvider(config: Config, deps: ProviderDeps): SmsProvider {
  const timeoutMs = config.providerTimeoutMs;
  switch (config.smsProvider) {
    case 'twilio':
      return createTwilioProvider({
        accountSid: config.twilio.accountSid,
        authToken: config.twilio.authToken,
        from: config.twilio.from,
        messagingServiceSid: config.twilio.messagingServiceSid,
        apiUrl: baseUrl(config.twilio.apiUrl, deps, 'TWILIO_API_URL'),
        timeoutMs,
        // Twilio's status callbacks come to the web's route when it is on.
        publicUrl: deps.publicUrl,
      });
    case 'aws-sms':
      return createAwsSmsProvider({
        ...awsOptions(config, baseUrl(config.awsSms.apiUrl, deps, 'AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2')),
        originationIdentity: config.awsSms.originationIdentity,
        configurationSet: config.awsSms.configurationSet,
        feed: deps.feed,
      });
    case 'infrai':
      return createInfraiSmsProvider({ ...config.infrai, apiUrl: baseUrl(config.infrai.apiUrl, deps, 'INFRAI_API_URL'), timeoutMs });
  }
}

function awsOptions(config: Config, endpoint: string): AwsClientOptions {
  return { region: config.aws.region, credentials: config.aws.credentials, endpoint, timeoutMs: config.providerTimeoutMs };
}

/**
 * The events queues the feed sweep reads for the chosen providers (none when neither SES nor
 * AWS SMS is chosen), each pinned to its SNS topic, and the SQS client settings to read them with.
 */
export function feedSources(config: Config, deps: ProviderDeps): { sources: FeedSource[]; sqs: AwsClientOptions } | undefined {
  const sources: FeedSource[] = [];
  const sqsUrl = (variable: string) => baseUrl(config.ses.sqsUrl, deps, variable);
  // Sandbox mode: the emulator's queue, on the SQS endpoint (the sandbox, or AWS_ENDPOINT_URL's emulator).
  const queue = (configured: string | undefined, name: string, variable: string) =>
    configured ?? `${sqsUrl(variable).replace(/\/+$/, '')}/${SANDBOX_ACCOUNT_ID}/${name}`;
  // Live mode requires the topic (src/config.ts); in sandbox mode the emulator's topic stands in.
  if (config.emailProvider === 'ses') {
    sources.push({
      provider: SES_PROVIDER,
      queueUrl: queue(config.ses.eventsQueueUrl, SANDBOX_QUEUE_NAMES.ses, 'SES_EVENTS_QUEUE_URL'),
      topicArn: config.ses.eventsTopicArn ?? SANDBOX_TOPIC_ARNS.ses,
      read: readSesMessage,
    });
  }
  if (config.smsProvider === 'aws-sms') {
    sources.push({
      provider: AWS_SMS_PROVIDER,
      queueUrl: queue(config.awsSms.eventsQueueUrl, SANDBOX_QUEUE_NAMES.awsSms, 'AWS_SMS_EVENTS_QUEUE_URL'),
      topicArn: config.awsSms.eventsTopicArn ?? SANDBOX_TOPIC_ARNS.awsSms,
      read: readSmsMessage,
    });
  }
  if (sources.length === 0) return undefined;
  return { sources, sqs: awsOptions(config, sqsUrl('AWS_ENDPOINT_URL_SQS')) };
}

/**
 * How long the feed keeps a message's observation: the longest a notice may still read it,
 * from its send to its last planned SMS check (the longest deadline, quiet hours, the SMS plan).
 */
export function feedObservationTtlMs(config: Config): number {
  const limits = { minPollIntervalMs: config.minPollIntervalMs, maxChecks: config.maxChecksPerNotice };
  return lastSmsCheckBy(MAX_HORIZON_MS, undefined, limits, { quietHours: true });
}

/** The credentials variables to check when a provider refuses them (`herald doctor`). */
export function credentialVariables(config: Config): { email: string; sms: string } {
  const email: Record<EmailProviderName, string> = {
    postmark: 'POSTMARK_SERVER_TOKEN',
    sendgrid: 'SENDGRID_API_KEY',
    mailgun: 'MAILGUN_API_KEY and MAILGUN_DOMAIN',
    ses: 'AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION',
    infrai: 'INFRAI_API_KEY',
  };
  const sms: Record<SmsProviderName, string> = {
    twilio: 'TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN',
    'aws-sms': 'AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION',
    infrai: 'INFRAI_API_KEY',
  };
  return { email: email[config.emailProvider], sms: sms[config.smsProvider] };
}
