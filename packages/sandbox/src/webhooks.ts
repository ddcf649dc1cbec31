/**
 * The sandbox's webhook outbox: the emulators push their messages' events to Herald as the real
 * providers do, signed as each provider signs, at the times the address's behaviour
 * fixes. Like the providers, the outbox retries a delivery that got no 2xx, a few times.
 *
 * Faults, as real webhooks have them, are chosen like the other behaviours: by an address tag
 * (`delivered+wh-drop@…`, `wh-dup`, `wh-delay`, `wh-reorder`) for one message, or for every
 * message by `setWebhookFaults` (the chaos run drops half of them and duplicates some).
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** The providers whose webhooks the emulators push, each to Herald's `POST /webhooks/<provider>`. */
export const WEBHOOK_PROVIDERS = ['postmark', 'twilio', 'sendgrid', 'mailgun'] as const;
export type WebhookProvider = (typeof WEBHOOK_PROVIDERS)[number];

/** Where Herald listens, and the secrets each provider's webhooks are signed or sent with. */
export interface WebhookTarget {
  /** Herald's base URL as the outbox reaches it (`http://127.0.0.1:3000`). */
  url: string;
  /** The URL Herald believes it is reached at (HERALD_PUBLIC_URL): Twilio signs it. Default: `url`. */
  publicUrl?: string;
  /** Postmark: `user:password` put in the webhook URL (HERALD_POSTMARK_WEBHOOK_AUTH). */
  postmarkAuth?: string;
  /** Twilio: the account's auth token (TWILIO_AUTH_TOKEN). */
  twilioAuthToken?: string;
  /** SendGrid: the ECDSA P-256 private key (PEM) whose public key Herald holds (SENDGRID_WEBHOOK_PUBLIC_KEY). */
  sendgridPrivateKey?: string;
  /** Mailgun: the webhook signing key (MAILGUN_WEBHOOK_SIGNING_KEY). */
  mailgunSigningKey?: string;
}

/** One request as a provider would send it. */
export interface RenderedWebhook {
  /** Path and query under Herald's URL (`/webhooks/postmark`). */
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** One event of a message, to be pushed when it happens. */
export interface PlannedWebhook {
  provider: WebhookProvider;
  messageId: string;
  /** The recipient address: its `wh-*` tags choose faults for this message. */
  address: string;
  /** When the event happens (epoch ms). */
  at: number;
  /** The request for this target; undefined when the target lacks this provider's secret. */
  render(target: WebhookTarget): RenderedWebhook | undefined;
}

export type WebhookFault = 'drop' | 'duplicate' | 'delay' | 'reorder';
export const WEBHOOK_FAULTS: readonly WebhookFault[] = ['drop', 'duplicate', 'delay', 'reorder'];

/** Faults for every message, each a probability from 0 to 1. */
export interface WebhookFaultRates {
  drop?: number;
  duplicate?: number;
  delay?: number;
  reorder?: number;
  /** How long `delay` holds a delivery (default 5000 ms). */
  delayMs?: number;
}

/** What became of one pushed event. */
export interface WebhookDeliveryRecord {
  provider: WebhookProvider;
  messageId: string;
  path: string;
  /** Herald's answer status of the last try; undefined when it was dropped or never answered. */
  status: number | undefined;
  tries: number;
  faults: WebhookFault[];
  at: number;
}

const DEFAULT_DELAY_MS = 5000;
const MAX_TRIES = 3;
const RETRY_AFTER_MS = 1000;
const DELIVERY_TIMEOUT_MS = 5000;
const KEPT_RECORDS = 10_000;

/** The faults an address asks for with `wh-<fault>` tags. */
export function addressWebhookFaults(address: string): WebhookFault[] {
  const local = address.toLowerCase().split('@')[0] ?? '';
  return local
    .split('+')
    .filter((tag) => tag.startsWith('wh-'))
    .map(
      (tag) =>
        ({ 'wh-drop': 'drop', 'wh-dup': 'duplicate', 'wh-delay': 'delay', 'wh-reorder': 'reorder' })[tag] as WebhookFault | undefined,
    )
    .filter((fault): fault is WebhookFault => fault !== undefined);
}

export class WebhookOutbox {
  private target: WebhookTarget | undefined;
  private rates: WebhookFaultRates = {};
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly records: WebhookDeliveryRecord[] = [];

  constructor(
    private readonly closing: AbortSignal,
    private readonly random: () => number = Math.random,
  ) {
    closing.addEventListener('abort', () => this.clear());
  }

  /** Starts pushing to `target` (undefined: stops; events planned meanwhile are not pushed). */
  configure(target: WebhookTarget | undefined): void {
    this.target = target;
  }

  get configured(): WebhookTarget | undefined {
    return this.target;
  }

  setFaults(rates: WebhookFaultRates): void {
    this.rates = { ...rates };
  }

  faults(): WebhookFaultRates {
    return { ...this.rates };
  }

  /** Every event pushed or dropped so far (the last 10,000), oldest first. */
  deliveries(): WebhookDeliveryRecord[] {
    return [...this.records];
  }

  /**
   * Plans the events of one message. `reorder` holds every event of the message until its last
   * one is due and sends them newest first; `delay` holds one; `duplicate` sends one twice;
   * `drop` never sends it.
   */
  plan(events: readonly PlannedWebhook[]): void {
    if (!this.target || events.length === 0) return;
    const last = Math.max(...events.map((e) => e.at));
    for (const event of [...events].sort((a, b) => a.at - b.at)) {
      const faults = this.faultsFor(event);
      let at = event.at;
      if (faults.includes('reorder')) {
        // Newest first: the earlier an event happened, the later it is sent.
        at = last + (last - event.at) + 50;
      }
      if (faults.includes('delay')) at += this.rates.delayMs ?? DEFAULT_DELAY_MS;
      this.at(at, () => this.deliver(event, faults));
    }
  }

  private faultsFor(event: PlannedWebhook): WebhookFault[] {
    const faults = new Set(addressWebhookFaults(event.address));
    for (const fault of WEBHOOK_FAULTS) {
      const rate = this.rates[fault];
      if (rate !== undefined && rate > 0 && this.random() < rate) faults.add(fault);
    }
    return [...faults];
  }

  private at(when: number, run: () => Promise<void>): void {
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        void run();
      },
      Math.max(0, when - Date.now()),
    );
    timer.unref();
    this.timers.add(timer);
  }

  private async deliver(event: PlannedWebhook, faults: WebhookFault[]): Promise<void> {
    const target = this.target;
    const rendered = target && event.render(target);
    const record: WebhookDeliveryRecord = {
      provider: event.provider,
      messageId: event.messageId,
      path: rendered?.path ?? '',
      status: undefined,
      tries: 0,
      faults,
      at: Date.now(),
    };
    this.keep(record);
    if (!target || !rendered || faults.includes('drop')) return;
    await this.send(target, rendered, record);
    if (faults.includes('duplicate')) {
      const again: WebhookDeliveryRecord = { ...record, status: undefined, tries: 0, at: Date.now() };
      this.keep(again);
      // Rendered again, as a provider's second post of an event is: Mailgun signs each post anew.
      await this.send(target, event.render(target) ?? rendered, again);
    }
  }

  private async send(target: WebhookTarget, rendered: RenderedWebhook, record: WebhookDeliveryRecord): Promise<void> {
    for (let attempt = 1; attempt <= MAX_TRIES && !this.closing.aborted; attempt += 1) {
      record.tries = attempt;
      try {
        const response = await fetch(`${target.url}${rendered.path}`, {
          method: 'POST',
          headers: rendered.headers,
          body: rendered.body,
          signal: AbortSignal.any([this.closing, AbortSignal.timeout(DELIVERY_TIMEOUT_MS)]),
        });
        await response.arrayBuffer();
        record.status = response.status;
        // Providers retry what did not succeed, but not a refusal of the request itself.
        if (response.ok || (response.status >= 400 && response.status < 500 && response.status !== 429)) return;
      } catch {
        record.status = undefined;
      }
      if (attempt < MAX_TRIES) await sleep(RETRY_AFTER_MS * attempt, undefined, { signal: this.closing }).catch(() => undefined);
    }
  }

  private keep(record: WebhookDeliveryRecord): void {
    this.records.push(record);
    if (this.records.length > KEPT_RECORDS) this.records.splice(0, this.records.length - KEPT_RECORDS);
  }

  /** Forgets planned events and the delivery record. */
  clear(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.records.length = 0;
  }
}
