import type { Config } from '../config.js';
import { mailgunReceiver } from './mailgun.js';
import { postmarkReceiver } from './postmark.js';
import { sendgridReceiver } from './sendgrid.js';
import { twilioReceiver } from './twilio.js';
import type { WebhookReceiver } from './types.js';

/**
 * The webhook receivers the configuration turns on (SPEC §6): each provider's route exists only
 * when its secret is set, so an unconfigured route answers 404.
 */
export function webhookReceivers(config: Config): WebhookReceiver[] {
  const receivers: WebhookReceiver[] = [];
  const { postmarkAuth, sendgridPublicKey, mailgunSigningKey } = config.webhooks;
  if (postmarkAuth) receivers.push(postmarkReceiver(postmarkAuth));
  if (config.publicUrl && config.twilio.authToken) receivers.push(twilioReceiver(config.twilio.authToken, config.publicUrl));
  if (sendgridPublicKey) receivers.push(sendgridReceiver(sendgridPublicKey));
  if (mailgunSigningKey) receivers.push(mailgunReceiver(mailgunSigningKey));
  return receivers;
}
