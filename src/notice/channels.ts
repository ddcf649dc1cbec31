/**
 * What differs between the two channels of a notice, in one place: its states, its transitions,
 * its fields in the notice hash, the address and the provider it uses. Steps written once for
 * both channels take a port instead of asking `channel === 'email'` at every turn.
 */
import type { Channel, EmailProvider, SmsProvider } from '../providers/types.js';
import { channelField, type ChannelField, type ChannelRecord } from '../store/notices.js';
import type { Notice } from './notice.js';
import type { SuppressionSource } from '../store/suppressions.js';
import type { NoticeState } from './states.js';
import type { TransitionName } from './transitions.js';

export interface ChannelPort {
  readonly channel: Channel;
  /** Ready to send, an attempt in flight (or in doubt), accepted by the provider. */
  readonly states: { readonly ready: NoticeState; readonly sending: NoticeState; readonly sent: NoticeState };
  readonly transitions: { readonly start: TransitionName; readonly accepted: TransitionName; readonly settle: TransitionName };
  /** The suppression a provider's refusal of the address itself records. */
  /** The suppression source of a refused address when the provider is none of the known ones. */
  readonly refusedAddress: SuppressionSource;
  /** The notice-hash field of this channel's record: `emailAttemptId`, `smsStatus`, ... */
  field(name: keyof ChannelRecord): ChannelField;
  record(notice: Notice): ChannelRecord;
  address(notice: Notice): string;
  providerName(providers: Providers): string;
}

export interface Providers {
  email: EmailProvider;
  sms: SmsProvider;
}

export const EMAIL: ChannelPort = {
  channel: 'email',
  states: { ready: 'accepted', sending: 'email_sending', sent: 'email_sent' },
  transitions: { start: 'startEmailAttempt', accepted: 'recordEmailAccepted', settle: 'settleEmailAttempt' },
  refusedAddress: 'postmark_inactive',
  field: (name) => channelField('email', name),
  record: (notice) => notice.emailChannel,
  address: (notice) => notice.email!,
  providerName: (providers) => providers.email.name,
};

export const SMS: ChannelPort = {
  channel: 'sms',
  states: { ready: 'sms_pending', sending: 'sms_sending', sent: 'sms_sent' },
  transitions: { start: 'startSmsAttempt', accepted: 'recordSmsAccepted', settle: 'settleSmsAttempt' },
  refusedAddress: 'twilio_opt_out',
  field: (name) => channelField('sms', name),
  record: (notice) => notice.smsChannel,
  address: (notice) => notice.phone!,
  providerName: (providers) => providers.sms.name,
};

export const CHANNELS: Record<Channel, ChannelPort> = { email: EMAIL, sms: SMS };

/** The suppression source of a send refused because the address is suppressed, by the provider that refused it. */
const REFUSED_ADDRESS_BY_PROVIDER: Record<string, SuppressionSource> = {
  postmark: 'postmark_inactive',
  twilio: 'twilio_opt_out',
  'aws-sms': 'aws_sms_opt_out',
  infrai: 'infrai_suppressed',
};

/** Where a refused address came from, named after the provider that refused it (its sandbox twin too). */
export function refusedAddressSource(port: ChannelPort, providers: Providers): SuppressionSource {
  return REFUSED_ADDRESS_BY_PROVIDER[port.providerName(providers).replace(/-sandbox$/, '')] ?? port.refusedAddress;
}
