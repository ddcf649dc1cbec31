import type { WebhookReceiver } from './types.js';

/** Mailgun's webhooks, checked by the HMAC in each event's `signature`. */
export function mailgunReceiver(signingKey: string): WebhookReceiver {
  void signingKey;
  throw new Error('the Mailgun webhook receiver is being built');
}
