/**
 * Development secrets for the sandbox's webhooks, and the signatures made with them, as SendGrid
 * and Mailgun make theirs. Herald is configured with the verifying half (SENDGRID_WEBHOOK_PUBLIC_KEY,
 * MAILGUN_WEBHOOK_SIGNING_KEY); the sandbox's outbox signs with the other (`WebhookTarget`).
 */
import { createHmac, generateKeyPairSync, randomBytes, sign } from 'node:crypto';

/** An ECDSA P-256 key pair like the one SendGrid makes for the Signed Event Webhook. */
export interface SendgridWebhookKeys {
  /** PEM (PKCS#8): what the sandbox signs with (`WebhookTarget.sendgridPrivateKey`). */
  privateKey: string;
  /** Base64 of the DER public key, the form SendGrid shows and SENDGRID_WEBHOOK_PUBLIC_KEY takes. */
  publicKey: string;
}

/** A fresh key pair for the SendGrid Event Webhook. */
export function sendgridWebhookKeys(): SendgridWebhookKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return {
    privateKey: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKey: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
  };
}

/** SendGrid's signature of one request: ECDSA/SHA-256 over the timestamp header followed by the body, DER in base64. */
export function signSendgridWebhook(privateKey: string, timestamp: string, body: string): string {
  return sign('sha256', Buffer.from(timestamp + body, 'utf8'), { key: privateKey, dsaEncoding: 'der' }).toString('base64');
}

/** A fresh Mailgun HTTP webhook signing key (hex, as Mailgun shows one). */
export function mailgunWebhookSigningKey(): string {
  return randomBytes(16).toString('hex');
}

/** Mailgun's `signature` object of one request: a 50-character token and the hex HMAC-SHA256 of timestamp + token. */
export function signMailgunWebhook(signingKey: string, timestamp: string, token: string = randomBytes(25).toString('hex')) {
  return {
    timestamp,
    token,
    signature: createHmac('sha256', signingKey)
      .update(timestamp + token)
      .digest('hex'),
  };
}
