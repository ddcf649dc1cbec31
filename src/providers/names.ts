/**
 * The providers Herald can use, by the names HERALD_EMAIL_PROVIDER and HERALD_SMS_PROVIDER take,
 * and their status-read limits. Nothing is imported here: the configuration reads these without
 * loading any provider's SDK (src/providers/registry.ts builds the adapters).
 */

export const EMAIL_PROVIDERS = ['postmark', 'sendgrid', 'mailgun', 'ses', 'infrai'] as const;
export const SMS_PROVIDERS = ['twilio', 'aws-sms', 'infrai'] as const;
export type EmailProviderName = (typeof EMAIL_PROVIDERS)[number];
export type SmsProviderName = (typeof SMS_PROVIDERS)[number];

/**
 * Default status reads per second, all workers together, per provider: from what each provider
 * publishes, and generous where it publishes no number (a 429 then pauses the status queue for
 * its Retry-After, for every worker). Overridden by HERALD_EMAIL_STATUS_PER_SECOND /
 * HERALD_SMS_STATUS_PER_SECOND. A feed provider's status read is a Redis read, not a call.
 */
export const STATUS_READS_PER_SECOND: Record<EmailProviderName | SmsProviderName, { perSecond: number; why: string }> = {
  postmark: { perSecond: 300, why: 'no published limit; 429 with a retry hint exists' },
  sendgrid: { perSecond: 100, why: 'Email Logs API: 429 exists, no published number' },
  mailgun: { perSecond: 100, why: 'no published number; 429 exists' },
  ses: { perSecond: 5000, why: 'feed provider: the check reads the stored event, no SES call' },
  twilio: { perSecond: 100, why: 'REST API concurrency of 100 requests per account by default; one read takes well under a second' },
  'aws-sms': { perSecond: 5000, why: 'feed provider: the check reads the stored event, no AWS call' },
  infrai: { perSecond: 100, why: 'no published number; 429 with Retry-After' },
};
