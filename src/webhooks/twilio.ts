/**
 * Twilio's status callbacks: a form-encoded POST to the `StatusCallback` URL a send
 * carried, at each status change of the message. Twilio signs the URL it called and the form's
 * parameters with the account's auth token (`X-Twilio-Signature`); the SDK's own
 * `validateRequest` checks it over HERALD_PUBLIC_URL + the path and query received.
 *
 * The worker's Twilio adapter puts the notice in the URL (`/webhooks/twilio?notice=<id>`), and
 * the status is mapped as the adapter's status read maps it (`twilioObservation`).
 */
import twilio from 'twilio';
import { shardOfNoticeId } from '../notice/ids.js';
import { twilioObservation } from '../providers/normalize.js';
import { WebhookPayloadError, type WebhookEvent, type WebhookReceiver, type WebhookRequest } from './types.js';

/** The route's path, which the adapter's StatusCallback URLs name. */
export const TWILIO_WEBHOOK_PATH = '/webhooks/twilio';

/** The query parameter of a StatusCallback URL that names the notice. */
export const NOTICE_PARAM = 'notice';

/** The StatusCallback URL of one notice's SMS, under HERALD_PUBLIC_URL. */
export function twilioStatusCallbackUrl(publicUrl: string, noticeId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}${TWILIO_WEBHOOK_PATH}?${NOTICE_PARAM}=${encodeURIComponent(noticeId)}`;
}

/** The signature algorithms Twilio signs with (X-Twilio-Webhooks-Signature-Settings names one; none: HMAC-SHA1). */
const KNOWN_ALGORITHMS = new Set([twilio.HMAC_SHA1, twilio.HMAC_SHA256]);

export interface TwilioReceiverOptions {
  /** Where a refusal that says more than "it does not verify" is told (the web's pino logger). */
  warn?: (details: Record<string, unknown>, message: string) => void;
}

/** Twilio's status callbacks, checked by `X-Twilio-Signature` over HERALD_PUBLIC_URL + the path. */
export function twilioReceiver(authToken: string, publicUrl: string, opts: TwilioReceiverOptions = {}): WebhookReceiver {
  const base = publicUrl.replace(/\/+$/, '');
  return {
    provider: 'twilio',
    readsForm: true,
    verify(request: WebhookRequest): boolean {
      const signature = header(request, 'x-twilio-signature');
      if (signature === undefined || signature === '') return false;
      const algorithm = twilio.getSignatureAlgorithm(header(request, 'x-twilio-webhooks-signature-settings'));
      // The SDK would console.warn the caller's text for an algorithm it does not know: refuse it here.
      if (!KNOWN_ALGORITHMS.has(algorithm.toUpperCase())) {
        opts.warn?.({ provider: 'twilio', algorithm: algorithm.slice(0, 40) }, 'webhook refused: an unknown signature algorithm');
        return false;
      }
      try {
        return twilio.validateRequest(authToken, signature, base + request.url, formParams(request.rawBody), algorithm);
      } catch {
        // A URL the validator cannot parse is one Twilio did not sign.
        return false;
      }
    },
    events(request: WebhookRequest): WebhookEvent[] {
      const form = new URLSearchParams(request.rawBody.toString('utf8'));
      const sid = form.get('MessageSid') ?? form.get('SmsSid');
      const status = form.get('MessageStatus') ?? form.get('SmsStatus');
      if (!sid) throw new WebhookPayloadError('MessageSid is missing');
      if (!status) throw new WebhookPayloadError('MessageStatus is missing');
      const code = Number(form.get('ErrorCode') ?? '');
      const observation = twilioObservation({ status, errorCode: form.get('ErrorCode') && Number.isInteger(code) ? code : null });
      return [{ channel: 'sms', providerMessageId: sid, noticeId: noticeIdOf(request.url), eventId: `${sid}\n${status}`, observation }];
    },
  };
}

/** The notice a StatusCallback URL names, when it is one of Herald's IDs. */
function noticeIdOf(url: string): string | undefined {
  const query = url.indexOf('?');
  const id = query >= 0 ? new URLSearchParams(url.slice(query + 1)).get(NOTICE_PARAM) : null;
  return id !== null && shardOfNoticeId(id) !== undefined ? id : undefined;
}

/** The form's parameters as the validator takes them: a repeated name as a list of its values. */
function formParams(rawBody: Buffer): Record<string, string | string[]> {
  const params: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(rawBody.toString('utf8'))) {
    const seen = params[name];
    params[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return params;
}

function header(request: WebhookRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
