import { createHash } from 'node:crypto';
import type { EmailProvider, SmsProvider } from '../../providers/types.js';
import type { WebhookEvent, WebhookProvider } from '../../webhooks/types.js';
import type { Providers } from '../channels.js';
import type { StepContext } from './context.js';
import { recordEmailObservation, recordSmsObservation, type Stored } from './observe.js';

/**
 * What became of one verified webhook event. Only `recorded` wrote to the notice; the others are
 * counted in /metrics, and the provider gets the same 200 for all, so that it learns nothing.
 * `other_provider`: the event's provider did not make the channel's attempt; `over_limit`: the
 * notice had completed and recorded all the late webhook observations it takes.
 */
export type WebhookOutcome = 'recorded' | 'duplicate' | 'unknown_message' | 'not_applicable' | 'other_provider' | 'over_limit';

/**
 * Records a provider's webhook event on its notice as an observation (`source: webhook`), through
 * the transition a status check uses, at most once per event. The web process runs this: it
 * makes no provider call (its StepContext has none to make), and what the observation decides —
 * the notice ends, or a bounce decides the fallback early — it decides as a check would.
 */
export async function recordWebhookEvent(ctx: StepContext, provider: WebhookProvider, event: WebhookEvent): Promise<WebhookOutcome> {
  const outcome = await record(ctx, provider, event);
  if (outcome !== 'recorded') await ctx.store.countWebhookEvent(provider, outcome, event.providerMessageId);
  return outcome;
}

async function record(ctx: StepContext, provider: WebhookProvider, event: WebhookEvent): Promise<WebhookOutcome> {
  if (event.noticeId === undefined) return 'unknown_message';
  const notice = await ctx.notice(event.noticeId);
  if (!notice) return 'unknown_message';
  const channel = event.channel === 'email' ? notice.emailChannel : notice.smsChannel;
  // The notice has not recorded the send's answer yet: its checks will read the status.
  if (channel.providerMessageId === undefined) return channel.attemptId === undefined ? 'unknown_message' : 'not_applicable';
  const recorded = channel.providerMessageId;
  if (recorded !== event.providerMessageId && recorded !== event.providerMessageAlias) return 'unknown_message';
  // Only the provider that made the attempt speaks of it (an attempt of a version that did not
  // record its provider was made by the one chosen then, whose route this is).
  if (channel.provider !== undefined && channel.provider.replace(/-sandbox$/, '') !== provider) return 'other_provider';
  const webhookEvent = eventDigest(provider, event.eventId);
  const { stored } =
    event.channel === 'email'
      ? await recordEmailObservation(ctx, notice, event.observation, { webhookEvent })
      : notice.state === 'sms_sent'
        ? await recordSmsObservation(ctx, notice, event.observation, { webhookEvent })
        : { stored: 'not_stored' as Stored };
  return stored === 'not_stored' ? 'not_applicable' : stored;
}

/** A short, fixed-size name for a provider's event identity (it names a field of the notice hash). */
export function eventDigest(provider: WebhookProvider, eventId: string): string {
  return createHash('sha256').update(`${provider}\n${eventId}`).digest('base64url').slice(0, 16);
}

/**
 * The providers of a process that makes no provider call: the web. A webhook's step that
 * reached for a provider would be a bug, and fails loudly rather than call out.
 */
export function noProviderCalls(): Providers {
  const refuse = (): never => {
    throw new Error('the web process makes no provider calls');
  };
  const email: EmailProvider = { name: 'none', verify: refuse, send: refuse, status: refuse, findByIdempotencyKey: refuse };
  const sms: SmsProvider = { name: 'none', verify: refuse, send: refuse, status: refuse, findSince: refuse, cancel: refuse };
  return { email, sms };
}
