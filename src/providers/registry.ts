/**
 * Which provider adapter serves each channel (HERALD_EMAIL_PROVIDER, HERALD_SMS_PROVIDER), built
 * from the configuration. Each adapter module owns its own construction; this is the one switch
 * over provider names, used by the worker and by `herald doctor`.
 */
import type { Config } from '../config.js';
import { createInfraiEmailProvider, createInfraiSmsProvider } from './infrai.js';
import { createPostmarkProvider } from './postmark.js';
import { createTwilioProvider } from './twilio.js';
import type { EmailProvider, SmsProvider } from './types.js';

export const EMAIL_PROVIDERS = ['postmark', 'sendgrid', 'mailgun', 'ses', 'infrai'] as const;
export const SMS_PROVIDERS = ['twilio', 'aws-sms', 'infrai'] as const;
export type EmailProviderName = (typeof EMAIL_PROVIDERS)[number];
export type SmsProviderName = (typeof SMS_PROVIDERS)[number];

/** What building an adapter may need besides the configuration. */
export interface ProviderDeps {
  /** The sandbox's base URL, standing in for every provider URL the configuration leaves unset. */
  sandboxUrl: string | undefined;
}

/** The base URL an adapter talks to: the configured one, or the sandbox's. */
function baseUrl(configured: string | undefined, deps: ProviderDeps, variable: string): string {
  const url = configured ?? deps.sandboxUrl;
  if (url === undefined) throw new Error(`${variable} is unset and no sandbox runs`);
  return url;
}

/** True when the chosen providers leave a URL unset, so that the sandbox must stand in for them. */
export function needsSandbox(config: Config): boolean {
  return emailUrl(config) === undefined || smsUrl(config) === undefined;
}

/** The configured base URL of the chosen email provider (undefined in sandbox mode). */
export function emailUrl(config: Config): string | undefined {
  switch (config.emailProvider) {
    case 'postmark':
      return config.postmark.apiUrl;
    case 'infrai':
      return config.infrai.apiUrl;
    default:
      throw new Error(`HERALD_EMAIL_PROVIDER=${config.emailProvider} is not built in`);
  }
}

/** The configured base URL of the chosen SMS provider (undefined in sandbox mode). */
export function smsUrl(config: Config): string | undefined {
  switch (config.smsProvider) {
    case 'twilio':
      return config.twilio.apiUrl;
    case 'infrai':
      return config.infrai.apiUrl;
    default:
      throw new Error(`HERALD_SMS_PROVIDER=${config.smsProvider} is not built in`);
  }
}

/** The email adapter HERALD_EMAIL_PROVIDER names. */
export function createEmailProvider(config: Config, deps: ProviderDeps): EmailProvider {
  const timeoutMs = config.providerTimeoutMs;
  switch (config.emailProvider) {
    case 'postmark':
      return createPostmarkProvider({ ...config.postmark, apiUrl: baseUrl(config.postmark.apiUrl, deps, 'POSTMARK_API_URL'), timeoutMs });
    case 'infrai':
      return createInfraiEmailProvider({ ...config.infrai, apiUrl: baseUrl(config.infrai.apiUrl, deps, 'INFRAI_API_URL'), timeoutMs });
    default:
      throw new Error(`HERALD_EMAIL_PROVIDER=${config.emailProvider} is not built in`);
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
      });
    case 'infrai':
      return createInfraiSmsProvider({ ...config.infrai, apiUrl: baseUrl(config.infrai.apiUrl, deps, 'INFRAI_API_URL'), timeoutMs });
    default:
      throw new Error(`HERALD_SMS_PROVIDER=${config.smsProvider} is not built in`);
  }
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
