import type { WebhookReceiver } from './types.js';

/** Postmark's webhooks (Delivery, Bounce, Open, Click, SubscriptionChange), checked by the basic-auth credentials in the URL. */
export function postmarkReceiver(auth: string): WebhookReceiver {
  void auth;
  throw new Error('the Postmark webhook receiver is being built');
}
