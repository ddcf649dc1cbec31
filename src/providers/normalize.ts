/**
 * Pure mapping of what the providers report to Herald's normalized statuses (PROVIDERS.md,
 * "Status mapping"). Engagement (opens, clicks) is recorded but never counts as delivery.
 */
import type { SuppressionSource } from '../store/suppressions.js';
import type { NormalizedStatus, StatusObservation } from './types.js';

/** The parts of Postmark's `GET /messages/outbound/{id}/details` answer the mapping reads. */
export interface PostmarkDetails {
  Status?: string;
  MessageEvents?: PostmarkEvent[];
}

export interface PostmarkEvent {
  Type: string;
  ReceivedAt?: string;
  Details?: Record<string, unknown> | null;
}

/** The parts of Postmark's `GET /bounces/{id}` answer the mapping reads. */
export interface PostmarkBounce {
  Type: string;
  /** True when Postmark deactivated the address because of this bounce. */
  Inactive?: boolean;
}

/** Bounce types that mean the address itself cannot receive mail: the message is lost for good. */
const PERMANENT_BOUNCE_TYPES = new Set(['HardBounce', 'BadEmailAddress', 'ManuallyDeactivated', 'SpamComplaint']);

/** What a details answer of 422 / ErrorCode 701 means: accepted, not indexed yet. */
export function postmarkNotIndexedObservation(): StatusObservation {
  return { providerStatus: 'NotFound(701)', status: 'pending', engagement: [] };
}

/** The BounceIDs of the details' `Bounced` events, whose types must be looked up before mapping. */
export function postmarkBounceIds(details: PostmarkDetails): string[] {
  const ids = new Set<string>();
  for (const event of details.MessageEvents ?? []) {
    const id = event.Type === 'Bounced' ? event.Details?.['BounceID'] : undefined;
    if (typeof id === 'string' || typeof id === 'number') ids.add(String(id));
  }
  return [...ids];
}

/**
 * Maps Postmark message details, plus the bounces looked up by BounceID, to an observation.
 *
 * Events are read in time order and the latest decisive one wins: `Delivered` → delivered; a
 * permanent bounce → bounced (and suppressed when Postmark deactivated the address); a soft
 * bounce or `Transient` → deferred unless delivery was already seen; `SubscriptionChanged`
 * with `SuppressSending` → failed and suppressed unless already delivered or bounced.
 * `Opened` / `LinkClicked` only add engagement. A bounce whose type is unknown counts as soft.
 *
 * `providerStatus` is the raw story: the message `Status` followed by the event types in the
 * order first seen, a bounce carrying its type, e.g. `Sent+Opened+LinkClicked` or
 * `Sent+Bounced(HardBounce)`.
 */
export function postmarkObservation(details: PostmarkDetails, bounces: ReadonlyMap<string, PostmarkBounce> = new Map()): StatusObservation {
  const events = [...(details.MessageEvents ?? [])].sort(byReceivedAt);
  let status: NormalizedStatus = 'pending';
  let suppressed = false;
  let bounceType: string | undefined;
  const engagement = new Set<string>();
  const seen: string[] = [];

  for (const event of events) {
    let label = event.Type;
    switch (event.Type) {
      case 'Delivered':
        status = 'delivered';
        break;
      case 'Bounced': {
        const id = event.Details?.['BounceID'];
        const bounce = id === undefined || id === null ? undefined : bounces.get(String(id));
        bounceType = bounce?.Type ?? 'Unknown';
        label = `Bounced(${bounceType})`;
        if (PERMANENT_BOUNCE_TYPES.has(bounceType)) {
          status = 'bounced';
          suppressed ||= bounce?.Inactive ?? bounceType === 'HardBounce';
        } else if (status === 'pending') {
          status = 'deferred';
        }
        break;
      }
      case 'Transient':
        if (status === 'pending') status = 'deferred';
        break;
      case 'SubscriptionChanged':
        if (event.Details?.['SuppressSending'] === true || event.Details?.['SuppressSending'] === 'true') {
          suppressed = true;
          if (status !== 'delivered' && status !== 'bounced') status = 'failed';
        }
        break;
      case 'Opened':
        engagement.add('opened');
        break;
      case 'LinkClicked':
        engagement.add('clicked');
        break;
      default:
        break;
    }
    if (!seen.includes(label)) seen.push(label);
  }

  const observation: StatusObservation = {
    providerStatus: [details.Status ?? 'Unknown', ...seen].join('+'),
    status,
    engagement: [...engagement],
  };
  if (bounceType !== undefined) observation.bounceType = bounceType;
  if (suppressed) observation.suppressed = true;
  return observation;
}

function byReceivedAt(a: PostmarkEvent, b: PostmarkEvent): number {
  // Events without a parseable time keep their place (sort is stable).
  const ta = Date.parse(a.ReceivedAt ?? '');
  const tb = Date.parse(b.ReceivedAt ?? '');
  return Number.isNaN(ta) || Number.isNaN(tb) ? 0 : ta - tb;
}

/** Twilio error codes that mean the number refuses messages from this sender (STOP). */
const TWILIO_OPT_OUT_CODES = new Set([21610]);

/** Maps a Twilio message `status` to a normalized status. */
export function twilioStatus(status: string): NormalizedStatus {
  switch (status) {
    case 'accepted':
    case 'queued':
    case 'scheduled':
    case 'sending':
    case 'sent':
      return 'pending';
    case 'delivered':
    case 'read':
      return 'delivered';
    case 'undelivered':
    case 'failed':
    // A canceled message will never be sent: for the notice it failed.
    case 'canceled':
      return 'failed';
    default:
      return 'unknown';
  }
}

/** Maps a fetched Twilio message to an observation; `providerStatus` is Twilio's `status` as is. */
export function twilioObservation(message: { status: string; errorCode?: number | null }): StatusObservation {
  const observation: StatusObservation = {
    providerStatus: message.status,
    status: twilioStatus(message.status),
    engagement: [],
  };
  if (typeof message.errorCode === 'number') {
    observation.errorCode = message.errorCode;
    if (TWILIO_OPT_OUT_CODES.has(message.errorCode)) observation.suppressed = true;
  }
  return observation;
}

/** The parts of SendGrid's Email Logs `GET /v3/logs/{sg_message_id}` answer the mapping reads. */
export interface SendgridLogMessage {
  /** The summary status; it counts an open or a click as `delivered`, so the mapping never reads it for delivery. */
  status?: string;
  events?: SendgridLogEvent[];
}

export interface SendgridLogEvent {
  event: string;
  /** Bounces: `bounce` (hard) or `blocked` (soft). */
  type?: string;
  reason?: string;
}

const SENDGRID_SUPPRESSION_DROP = /address|unsubscrib|suppress/i;

/** What an Email Logs read means when the logs do not show the message yet: accepted, not indexed. */
export function sendgridNotIndexedObservation(): StatusObservation {
  return { providerStatus: 'not_found', status: 'pending', engagement: [] };
}

/**
 * Maps an Email Logs message to an observation, from its events in the order given (oldest
 * first): a `delivered` event → delivered (the only proof: the summary `status` says
 * `delivered` for an open alone); a hard bounce (`bounce`, type `bounce`) → bounced and
 * suppressed; a soft one (type `blocked`) or `deferred` → deferred unless delivery was seen;
 * `dropped` → failed unless already delivered or bounced, and suppressed when its reason names
 * the address (a suppression list); `spamreport`, `unsubscribe`, `group_unsubscribe` → suppressed
 * for later notices; `open` / `click` only add engagement.
 *
 * `providerStatus` is the summary status followed by the event names in the order first seen,
 * a bounce carrying its type, e.g. `delivered+processed+open` or `bounced+processed+bounce(bounce)`.
 */
export function sendgridObservation(message: SendgridLogMessage): StatusObservation {
  return sendgridEventsObservation(message.events ?? [], message.status ?? 'unknown');
}

/**
 * Maps one Event Webhook event as the Email Logs read maps the same event (the webhook's events
 * have the Logs' names and fields); `providerStatus` is the event's name, a bounce with its type
 * (`delivered`, `bounce(blocked)`).
 */
export function sendgridEventObservation(event: SendgridLogEvent): StatusObservation {
  return sendgridEventsObservation([event], undefined);
}

/** The mapping of `sendgridObservation`; `summary` (the Logs' status) opens `providerStatus` when given. */
function sendgridEventsObservation(events: readonly SendgridLogEvent[], summary: string | undefined): StatusObservation {
  let status: NormalizedStatus = 'pending';
  let suppressed: SuppressionSource | undefined;
  let bounceType: string | undefined;
  const engagement = new Set<string>();
  const seen: string[] = [];

  for (const event of events) {
    let label = event.event;
    switch (event.event) {
      case 'delivered':
        status = 'delivered';
        break;
      case 'bounce': {
        const hard = event.type !== 'blocked';
        bounceType = hard ? 'HardBounce' : 'SoftBounce';
        label = `bounce(${event.type ?? 'bounce'})`;
        if (hard) {
          status = 'bounced';
          suppressed = 'sendgrid_hard_bounce';
        } else if (status === 'pending') {
          status = 'deferred';
        }
        break;
      }
      case 'deferred':
        if (status === 'pending') status = 'deferred';
        break;
      case 'dropped':
        // "Bounced Address", "Unsubscribed Address", "Spam Reporting Address": the address is on a
        // suppression list. A drop for the message's own sake ("Invalid SMTPAPI header") is not.
        if (event.reason === undefined || SENDGRID_SUPPRESSION_DROP.test(event.reason)) suppressed ??= 'sendgrid_dropped';
        if (status !== 'delivered' && status !== 'bounced') status = 'failed';
        break;
      case 'spamreport':
      case 'unsubscribe':
      case 'group_unsubscribe':
        suppressed ??= 'sendgrid_unsubscribe';
        break;
      case 'open':
        engagement.add('opened');
        break;
      case 'click':
        engagement.add('clicked');
        break;
      default:
        break;
    }
    if (!seen.includes(label)) seen.push(label);
  }

  const observation: StatusObservation = {
    providerStatus: (summary === undefined ? seen : [summary, ...seen]).join('+'),
    status,
    engagement: [...engagement],
  };
  if (bounceType !== undefined) observation.bounceType = bounceType;
  if (suppressed !== undefined) {
    observation.suppressed = true;
    observation.suppressionSource = suppressed;
  }
  return observation;
}

/** The parts of a Mailgun event (Events API item) the mapping reads. */
export interface MailgunEvent {
  event: string;
  /** Epoch seconds, with a fraction. */
  timestamp?: number;
  severity?: string;
  reason?: string;
  'delivery-status'?: { code?: number | string; description?: string; message?: string } | null;
}

/** Mailgun's `reason` prefix for a message it did not send because the address is on a suppression list. */
const MAILGUN_SUPPRESSION_REASON = 'suppress-';

/**
 * Maps a message's Mailgun events to an observation. Mailgun does not promise their order, so
 * they are sorted by `timestamp`, and the latest decisive one wins, as for Postmark:
 * `delivered` → delivered; `failed` with `severity: permanent` → bounced (suppressed: Mailgun
 * lists the address), or failed and suppressed when the reason is `suppress-*` (the address was
 * already on a list: Mailgun accepted the send and never tried it); `failed` temporary →
 * deferred unless delivery was seen; `rejected` → failed. `opened` / `clicked` only add
 * engagement; `accepted`, `unsubscribed`, `complained` and `stored` change nothing.
 *
 * `providerStatus` is the events in the order first seen, a failure with its severity and
 * reason, e.g. `accepted+delivered+opened` or `accepted+failed(permanent:bounce)`; `none`
 * before Mailgun lists any event.
 */
export function mailgunObservation(events: readonly MailgunEvent[]): StatusObservation {
  const sorted = [...events].sort((a, b) => (a.timestamp ?? 0) - (b.timestamp ?? 0));
  let status: NormalizedStatus = 'pending';
  let suppressed = false;
  let bounceType: string | undefined;
  let errorCode: number | undefined;
  const engagement = new Set<string>();
  const seen: string[] = [];

  for (const event of sorted) {
    let label = event.event;
    switch (event.event) {
      case 'delivered':
        status = 'delivered';
        break;
      case 'failed': {
        const severity = event.severity === 'permanent' ? 'permanent' : 'temporary';
        const reason = event.reason ?? 'unknown';
        label = `failed(${severity}:${reason})`;
        const code = Number(event['delivery-status']?.code);
        if (Number.isInteger(code) && code > 0) errorCode = code;
        if (severity === 'permanent') {
          bounceType = `${severity}:${reason}`;
          suppressed = true;
          status = reason.startsWith(MAILGUN_SUPPRESSION_REASON) ? 'failed' : 'bounced';
        } else if (status === 'pending') {
          status = 'deferred';
        }
        break;
      }
      case 'rejected':
        if (status !== 'delivered' && status !== 'bounced') status = 'failed';
        break;
      case 'opened':
        engagement.add('opened');
        break;
      case 'clicked':
        engagement.add('clicked');
        break;
      default:
        break;
    }
    if (!seen.includes(label)) seen.push(label);
  }

  const observation: StatusObservation = {
    providerStatus: seen.length > 0 ? seen.join('+') : 'none',
    status,
    engagement: [...engagement],
  };
  if (bounceType !== undefined) observation.bounceType = bounceType;
  if (errorCode !== undefined && status !== 'delivered' && status !== 'pending') observation.errorCode = errorCode;
  if (suppressed && status !== 'delivered') {
    observation.suppressed = true;
    observation.suppressionSource = status === 'bounced' ? 'mailgun_bounce' : 'mailgun_suppressed';
  }
  return observation;
}
