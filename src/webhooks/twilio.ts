import type { WebhookReceiver } from './types.js';

/** Twilio's status callbacks, checked by `X-Twilio-Signature` over HERALD_PUBLIC_URL + the path. */
export function twilioReceiver(authToken: string, publicUrl: string): WebhookReceiver {
  void authToken;
  void publicUrl;
  throw new Error('the Twilio webhook receiver is being built');
}
