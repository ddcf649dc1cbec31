import type { Config } from '../config.js';
import { mailgunReceiver } from './mailgun.js';
import { postmarkReceiver } from './postmark.js';
import { sendgridReceiver } from './sendgrid.js';
import { twilioReceiver, type TwilioReceiverOptions } from './twilio.js';
import type { WebhookProvider, WebhookReceiver } from './types.js';

/**
 * The webhook receivers the configuration turns on. A route exists only when its provider is the
 * chosen provider of its channel and its secret was set explicitly: a secret left over from
 * another provider, or a sandbox default, opens nothing, and an unconfigured route answers 404.
 */
export function webhookReceivers(config: Config, opts: TwilioReceiverOptions = {}): WebhookReceiver[] {
  const receivers: WebhookReceiver[] = [];
  const { postmarkAuth, twilioAuthToken, sendgridPublicKey, mailgunSigningKey } = config.webhooks;
  if (config.emailProvider === 'postmark' && postmarkAuth) receivers.push(postmarkReceiver(postmarkAuth));
  if (config.smsProvider === 'twilio' && config.publicUrl && twilioAuthToken)
    receivers.push(twilioReceiver(twilioAuthToken, config.publicUrl, opts));
  if (config.emailProvider === 'sendgrid' && sendgridPublicKey) receivers.push(sendgridReceiver(sendgridPublicKey));
  if (config.emailProvider === 'mailgun' && mailgunSigningKey) receivers.push(mailgunReceiver(mailgunSigningKey));
  return receivers;
}

/**
 * The webhook secrets that are set but open no route, each with why: the operator meant a route
 * that is off (`herald doctor` says so).
 */
export function idleWebhookSecrets(config: Config): { variable: string; why: string }[] {
  const on = new Set<WebhookProvider>(webhookReceivers(config).map((r) => r.provider));
  const idle: { variable: string; why: string }[] = [];
  const { postmarkAuth, sendgridPublicKey, mailgunSigningKey } = config.webhooks;
  const email = (variable: string, provider: WebhookProvider, set: unknown) => {
    if (set && !on.has(provider)) idle.push({ variable, why: `HERALD_EMAIL_PROVIDER is ${config.emailProvider}, not ${provider}` });
  };
  email('HERALD_POSTMARK_WEBHOOK_AUTH', 'postmark', postmarkAuth);
  email('SENDGRID_WEBHOOK_PUBLIC_KEY', 'sendgrid', sendgridPublicKey);
  email('MAILGUN_WEBHOOK_SIGNING_KEY', 'mailgun', mailgunSigningKey);
  if (config.publicUrl && config.webhooks.twilioAuthToken && !on.has('twilio')) {
    idle.push({ variable: 'TWILIO_AUTH_TOKEN', why: `HERALD_SMS_PROVIDER is ${config.smsProvider}, not twilio: /webhooks/twilio is off` });
  }
  return idle;
}
