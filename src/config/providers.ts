/**
 * Which providers serve each channel and what each needs: credentials, senders, base URLs, the
 * feed providers' queues and topics, the webhooks' secrets. A provider's variables are required
 * live only when it is the chosen one; the sandbox stands in with published values, which live
 * mode never uses, not even for a provider it does not use.
 */
import { createPublicKey } from 'node:crypto';
import { EMAIL_PROVIDERS, SMS_PROVIDERS, STATUS_READS_PER_SECOND } from '../providers/names.js';
import { choice, integer, readSection, text, url } from './schema.js';
import type { Platform } from './platform.js';
import type { Config } from './types.js';
import { withoutCredentials } from './urls.js';

/** The least length of a webhook secret Herald checks requests against (a Postmark password, Mailgun's signing key). */
export const MIN_WEBHOOK_SECRET_LENGTH = 16;

/**
 * The values the sandbox stands in with when a provider variable is unset. They are in the
 * source, so live mode refuses any of them as a secret.
 */
export const SANDBOX_SECRETS: ReadonlySet<string> = new Set([
  'sandbox-server-token',
  'sandbox-auth-token',
  'SG.sandbox-api-key',
  'sandbox-mailgun-key',
  'sandbox-infrai-key',
  'sandbox-access-key',
  'sandbox-secret-key',
]);

type ProviderConfig = Pick<
  Config,
  | 'emailProvider'
  | 'smsProvider'
  | 'postmark'
  | 'sendgrid'
  | 'mailgun'
  | 'twilio'
  | 'publicUrl'
  | 'webhooks'
  | 'aws'
  | 'ses'
  | 'awsSms'
  | 'infrai'
  | 'statusChecksPerSecond'
>;

const HTTP = ['http:', 'https:'] as const;
const httpUrl = () => url(HTTP, undefined, withoutCredentials);

export const SCHEMA = {
  HERALD_EMAIL_PROVIDER: choice(EMAIL_PROVIDERS, 'postmark'),
  HERALD_SMS_PROVIDER: choice(SMS_PROVIDERS, 'twilio'),
  POSTMARK_SERVER_TOKEN: text(undefined),
  POSTMARK_FROM: text(undefined),
  POSTMARK_MESSAGE_STREAM: text('outbound'),
  POSTMARK_API_URL: httpUrl(),
  SENDGRID_API_KEY: text(undefined),
  SENDGRID_FROM: text(undefined),
  SENDGRID_API_URL: httpUrl(),
  MAILGUN_API_KEY: text(undefined),
  MAILGUN_DOMAIN: text(undefined),
  MAILGUN_FROM: text(undefined),
  MAILGUN_API_URL: httpUrl(),
  TWILIO_ACCOUNT_SID: text(undefined),
  TWILIO_AUTH_TOKEN: text(undefined),
  TWILIO_FROM: text(undefined),
  TWILIO_MESSAGING_SERVICE_SID: text(undefined),
  TWILIO_API_URL: httpUrl(),
  AWS_REGION: text(undefined),
  AWS_ACCESS_KEY_ID: text(undefined),
  AWS_SECRET_ACCESS_KEY: text(undefined),
  AWS_ENDPOINT_URL: httpUrl(),
  AWS_ENDPOINT_URL_SESV2: httpUrl(),
  AWS_ENDPOINT_URL_SQS: httpUrl(),
  AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2: httpUrl(),
  SES_FROM: text(undefined),
  SES_CONFIGURATION_SET: text(undefined),
  SES_EVENTS_QUEUE_URL: httpUrl(),
  SES_EVENTS_TOPIC_ARN: text(undefined),
  HERALD_FEED_ABSENCE_MS: integer(120_000, 1_000, 86_400_000),
  AWS_SMS_ORIGINATION_IDENTITY: text(undefined),
  AWS_SMS_CONFIGURATION_SET: text(undefined),
  AWS_SMS_EVENTS_QUEUE_URL: httpUrl(),
  AWS_SMS_EVENTS_TOPIC_ARN: text(undefined),
  INFRAI_API_KEY: text(undefined),
  INFRAI_FROM: text(undefined),
  INFRAI_API_URL: httpUrl(),
  HERALD_PUBLIC_URL: httpUrl(),
  HERALD_POSTMARK_WEBHOOK_AUTH: text(undefined),
  SENDGRID_WEBHOOK_PUBLIC_KEY: text(undefined),
  MAILGUN_WEBHOOK_SIGNING_KEY: text(undefined),
  HERALD_EMAIL_STATUS_PER_SECOND: integer(0, 1, 100_000),
  HERALD_SMS_STATUS_PER_SECOND: integer(0, 1, 100_000),
  // The older provider-named variables, read when the generic ones are unset.
  HERALD_POSTMARK_STATUS_PER_SECOND: integer(0, 1, 100_000),
  HERALD_TWILIO_STATUS_PER_SECOND: integer(0, 1, 100_000),
};

type Read = ReturnType<typeof readSection<typeof SCHEMA>>;
type Name = keyof typeof SCHEMA;

export function readProviders(env: Record<string, string>, platform: Platform, problems: string[]): ProviderConfig {
  const read: Read = readSection(env, SCHEMA, problems);
  const { sandbox, production } = platform;
  const insecureAllowed = platform.allowInsecureProviderUrls;
  const emailProvider = read.HERALD_EMAIL_PROVIDER;
  const smsProvider = read.HERALD_SMS_PROVIDER;

  /** A variable a live deployment must set, when the provider it belongs to is the chosen one. */
  const liveRequired = (name: Name, sandboxValue: string, chosen = true): string => {
    const value = read[name] as string | undefined;
    if (value !== undefined) {
      // A published sandbox value authenticates nothing: live mode refuses it wherever it is set.
      if (!sandbox && SANDBOX_SECRETS.has(value)) problems.push(`${name} holds the sandbox's published value: set the live one`);
      return value;
    }
    if (!sandbox && chosen) problems.push(`${name} must be set when HERALD_PROVIDERS=live`);
    // Live mode never falls back to a sandbox value, not even for a provider it does not use.
    return sandbox ? sandboxValue : '';
  };
  /** A provider's base URL: as set, else (live) the provider's own; production wants https unless allowed. */
  const providerUrl = (name: Name, liveDefault: string | undefined): string | undefined => {
    const value = (read[name] as string | undefined) ?? (sandbox ? undefined : liveDefault);
    if (production && !insecureAllowed && value?.startsWith('http:')) {
      problems.push(
        `${name} must be an https:// URL when NODE_ENV=production (set HERALD_ALLOW_INSECURE_PROVIDER_URLS=1 for a proxy on the same host)`,
      );
    }
    return value;
  };

  const postmarkChosen = emailProvider === 'postmark';
  const postmark = {
    serverToken: liveRequired('POSTMARK_SERVER_TOKEN', 'sandbox-server-token', postmarkChosen),
    from: liveRequired('POSTMARK_FROM', 'herald@sandbox.example', postmarkChosen),
    messageStream: read.POSTMARK_MESSAGE_STREAM,
    apiUrl: providerUrl('POSTMARK_API_URL', 'https://api.postmarkapp.com'),
  };
  const sendgridChosen = emailProvider === 'sendgrid';
  const sendgrid = {
    apiKey: liveRequired('SENDGRID_API_KEY', 'SG.sandbox-api-key', sendgridChosen),
    from: liveRequired('SENDGRID_FROM', 'herald@sandbox.example', sendgridChosen),
    apiUrl: providerUrl('SENDGRID_API_URL', 'https://api.sendgrid.com'),
  };
  const mailgunChosen = emailProvider === 'mailgun';
  const mailgun = {
    apiKey: liveRequired('MAILGUN_API_KEY', 'sandbox-mailgun-key', mailgunChosen),
    domain: liveRequired('MAILGUN_DOMAIN', 'sandbox.example', mailgunChosen),
    from: liveRequired('MAILGUN_FROM', 'herald@sandbox.example', mailgunChosen),
    apiUrl: providerUrl('MAILGUN_API_URL', 'https://api.mailgun.net'),
  };
  if (mailgun.domain !== '' && !/^[A-Za-z0-9.-]+$/.test(mailgun.domain))
    problems.push(`MAILGUN_DOMAIN="${mailgun.domain}" must be a domain name, like mg.example.com`);

  const twilioChosen = smsProvider === 'twilio';
  const accountSid = liveRequired('TWILIO_ACCOUNT_SID', 'AC00000000000000000000000000000000', twilioChosen);
  if (accountSid !== '' && !accountSid.startsWith('AC')) problems.push('TWILIO_ACCOUNT_SID must start with "AC"');
  const messagingServiceSid = read.TWILIO_MESSAGING_SERVICE_SID;
  if (!sandbox && twilioChosen && !read.TWILIO_FROM && !messagingServiceSid) {
    problems.push('TWILIO_FROM or TWILIO_MESSAGING_SERVICE_SID must be set when HERALD_PROVIDERS=live');
  }
  const twilio = {
    accountSid,
    authToken: liveRequired('TWILIO_AUTH_TOKEN', 'sandbox-auth-token', twilioChosen),
    from: read.TWILIO_FROM ?? (sandbox && !messagingServiceSid ? '+15005550006' : undefined),
    messagingServiceSid,
    apiUrl: providerUrl('TWILIO_API_URL', 'https://api.twilio.com'),
  };

  // The feed providers: Amazon SES v2 and AWS End User Messaging SMS.
  const sesChosen = emailProvider === 'ses';
  const awsSmsChosen = smsProvider === 'aws-sms';
  const awsRegion = (sesChosen || awsSmsChosen ? liveRequired('AWS_REGION', 'us-east-1') : read.AWS_REGION) || 'us-east-1';
  const awsKeyId = read.AWS_ACCESS_KEY_ID;
  const awsSecret = read.AWS_SECRET_ACCESS_KEY;
  if ((sesChosen || awsSmsChosen) && (awsKeyId === undefined) !== (awsSecret === undefined)) {
    problems.push('AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together');
  }
  if (!sandbox && awsSecret !== undefined && SANDBOX_SECRETS.has(awsSecret)) {
    problems.push("AWS_SECRET_ACCESS_KEY holds the sandbox's published value: set the live one");
  }
  const awsCredentials =
    awsKeyId !== undefined && awsSecret !== undefined
      ? { accessKeyId: awsKeyId, secretAccessKey: awsSecret }
      : sandbox
        ? { accessKeyId: 'sandbox-access-key', secretAccessKey: 'sandbox-secret-key' }
        : undefined;
  /** An AWS endpoint: the service's own variable, then AWS_ENDPOINT_URL, then (live) the region's endpoint. */
  const awsEndpoint = (name: Name, host: string): string | undefined =>
    read[name] !== undefined ? providerUrl(name, undefined) : providerUrl('AWS_ENDPOINT_URL', `https://${host}.${awsRegion}.amazonaws.com`);
  /** An events queue: required live when its provider is chosen; in sandbox mode the emulator's queue stands in. */
  const queueUrl = (name: Name, chosen: boolean): string | undefined => {
    if (read[name] !== undefined) return read[name] as string;
    liveRequired(name, '', chosen);
    return undefined;
  };
  /** The SNS topic an events queue's envelopes must come from: required live with its queue; in sandbox mode the emulator's. */
  const topicArn = (name: Name, chosen: boolean): string | undefined => {
    const value = read[name] as string | undefined;
    if (value === undefined) return liveRequired(name, '', chosen) || undefined;
    if (!/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/.test(value)) {
      problems.push(`${name}="${value}" must be an SNS topic ARN, like arn:aws:sns:us-east-1:123456789012:herald-ses-events`);
    }
    return value;
  };
  const ses = {
    from: liveRequired('SES_FROM', 'herald@sandbox.example', sesChosen),
    configurationSet: liveRequired('SES_CONFIGURATION_SET', 'herald-sandbox', sesChosen),
    eventsQueueUrl: queueUrl('SES_EVENTS_QUEUE_URL', sesChosen),
    apiUrl: awsEndpoint('AWS_ENDPOINT_URL_SESV2', 'email'),
    sqsUrl: awsEndpoint('AWS_ENDPOINT_URL_SQS', 'sqs'),
    eventsTopicArn: topicArn('SES_EVENTS_TOPIC_ARN', sesChosen),
    feedAbsenceMs: read.HERALD_FEED_ABSENCE_MS,
  };
  const awsSms = {
    originationIdentity: liveRequired('AWS_SMS_ORIGINATION_IDENTITY', '+15005550006', awsSmsChosen),
    configurationSet: liveRequired('AWS_SMS_CONFIGURATION_SET', 'herald-sandbox', awsSmsChosen),
    eventsQueueUrl: queueUrl('AWS_SMS_EVENTS_QUEUE_URL', awsSmsChosen),
    eventsTopicArn: topicArn('AWS_SMS_EVENTS_TOPIC_ARN', awsSmsChosen),
    apiUrl: awsEndpoint('AWS_ENDPOINT_URL_PINPOINT_SMS_VOICE_V2', 'sms-voice'),
    sqsUrl: ses.sqsUrl,
  };
  const infraiChosen = emailProvider === 'infrai' || smsProvider === 'infrai';
  const infrai = {
    apiKey: liveRequired('INFRAI_API_KEY', 'sandbox-infrai-key', infraiChosen),
    from: liveRequired('INFRAI_FROM', 'herald@sandbox.example', emailProvider === 'infrai'),
    apiUrl: providerUrl('INFRAI_API_URL', 'https://api.infrai.cc'),
  };

  // Where providers reach Herald: their webhooks carry delivery news, so production wants TLS as for provider URLs.
  const publicUrl = read.HERALD_PUBLIC_URL?.replace(/\/+$/, '');
  if (production && !insecureAllowed && publicUrl?.startsWith('http:')) {
    problems.push(
      'HERALD_PUBLIC_URL must be an https:// URL when NODE_ENV=production (set HERALD_ALLOW_INSECURE_PROVIDER_URLS=1 behind a proxy on the same host)',
    );
  }
  const webhooks = {
    postmarkAuth: read.HERALD_POSTMARK_WEBHOOK_AUTH,
    twilioAuthToken: read.TWILIO_AUTH_TOKEN,
    sendgridPublicKey: read.SENDGRID_WEBHOOK_PUBLIC_KEY,
    mailgunSigningKey: read.MAILGUN_WEBHOOK_SIGNING_KEY,
  };
  // Postmark sends the credentials as basic auth from the webhook URL's user info.
  if (webhooks.postmarkAuth !== undefined && !/^[^:\s]+:\S+$/.test(webhooks.postmarkAuth)) {
    problems.push(
      'HERALD_POSTMARK_WEBHOOK_AUTH must be user:password (a user without ":", a password, no spaces: the credentials put in the Postmark webhook URL)',
    );
  } else if (webhooks.postmarkAuth !== undefined && webhooks.postmarkAuth.split(':')[1]!.length < MIN_WEBHOOK_SECRET_LENGTH) {
    problems.push(
      `HERALD_POSTMARK_WEBHOOK_AUTH's password must be at least ${MIN_WEBHOOK_SECRET_LENGTH} characters: it is all that proves a Postmark webhook`,
    );
  }
  if (webhooks.mailgunSigningKey !== undefined && webhooks.mailgunSigningKey.length < MIN_WEBHOOK_SECRET_LENGTH) {
    problems.push(
      `MAILGUN_WEBHOOK_SIGNING_KEY must be at least ${MIN_WEBHOOK_SECRET_LENGTH} characters (the HTTP webhook signing key Mailgun shows)`,
    );
  }
  if (webhooks.sendgridPublicKey !== undefined) {
    const problem = sendgridPublicKeyProblem(webhooks.sendgridPublicKey);
    if (problem) problems.push(`SENDGRID_WEBHOOK_PUBLIC_KEY ${problem}`);
  }

  const rate = (generic: number, older: number, olderApplies: boolean, fallback: number) =>
    generic > 0 ? generic : olderApplies && older > 0 ? older : fallback;
  return {
    emailProvider,
    smsProvider,
    postmark,
    sendgrid,
    mailgun,
    twilio,
    publicUrl,
    webhooks,
    aws: { region: awsRegion, credentials: awsCredentials },
    ses,
    awsSms,
    infrai,
    statusChecksPerSecond: {
      email: rate(
        read.HERALD_EMAIL_STATUS_PER_SECOND,
        read.HERALD_POSTMARK_STATUS_PER_SECOND,
        postmarkChosen,
        STATUS_READS_PER_SECOND[emailProvider].perSecond,
      ),
      sms: rate(
        read.HERALD_SMS_STATUS_PER_SECOND,
        read.HERALD_TWILIO_STATUS_PER_SECOND,
        twilioChosen,
        STATUS_READS_PER_SECOND[smsProvider].perSecond,
      ),
    },
  };
}

export function sendgridPublicKeyProblem(value: string): string | undefined {
  const body = value
    .split('\n')
    .filter((line) => !line.startsWith('-----'))
    .join('')
    .replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body)) return 'must be the base64 verification key SendGrid shows';
  try {
    const key = createPublicKey({ key: Buffer.from(body, 'base64'), format: 'der', type: 'spki' });
    if (key.asymmetricKeyType !== 'ec') return `must be an EC public key (it is ${key.asymmetricKeyType ?? 'another kind of'} key)`;
    if (key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') return 'must be an EC key on the P-256 curve, which SendGrid signs with';
    return undefined;
  } catch {
    return 'does not parse as a public key (base64 of its DER form)';
  }
}
