/**
 * Secrets for the sandbox's webhooks: what `npm start` and the tests give both Herald (its
 * webhook variables) and the sandbox's outbox (which signs or sends with them), so that the
 * emulators' webhooks verify as the real providers' do. Fresh on every call, never published.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';

/** An ECDSA P-256 key pair as SendGrid's Event Webhook uses one. */
export interface SendgridKeyPair {
  /** The signing key (PKCS#8 PEM): the sandbox's outbox signs with it. */
  privateKeyPem: string;
  /** The verification key as SendGrid shows it: base64 of the DER public key (SENDGRID_WEBHOOK_PUBLIC_KEY). */
  publicKeyBase64: string;
}

/** A fresh ECDSA P-256 key pair for the SendGrid Event Webhook. */
export function sendgridKeyPair(): SendgridKeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKeyBase64: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
  };
}

/** The webhook secrets of one sandbox run, in the shape of Herald's variables and the outbox's target. */
export interface SandboxWebhookSecrets {
  /** HERALD_POSTMARK_WEBHOOK_AUTH: `user:password`. */
  postmarkAuth: string;
  sendgrid: SendgridKeyPair;
  /** MAILGUN_WEBHOOK_SIGNING_KEY. */
  mailgunSigningKey: string;
}

/** Fresh secrets for every provider's webhook (Twilio signs with the account's auth token instead). */
export function sandboxWebhookSecrets(): SandboxWebhookSecrets {
  return {
    postmarkAuth: `postmark:${randomBytes(18).toString('base64url')}`,
    sendgrid: sendgridKeyPair(),
    mailgunSigningKey: `key-${randomBytes(16).toString('hex')}`,
  };
}
