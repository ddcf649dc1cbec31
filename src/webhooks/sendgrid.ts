import type { WebhookReceiver } from './types.js';

/** SendGrid's Event Webhook, checked by its ECDSA signature. */
export function sendgridReceiver(publicKey: string): WebhookReceiver {
  void publicKey;
  throw new Error('the SendGrid webhook receiver is being built');
}
