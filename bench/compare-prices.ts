/**
 * List prices the comparison's cost column uses, per provider, with where each comes from.
 * Estimates only: plans, volume tiers, regions and carrier fees change what is really paid.
 * `perMessage` is null where no public price was found; the column then says so.
 */
export interface ProviderPrice {
  /** USD per message accepted (per email; per SMS segment). */
  perMessage: number | null;
  /** USD per other API call (status reads, searches, queue reads). */
  perCall: number;
  source: string;
}

export const PRICES: Record<string, ProviderPrice> = {
  postmark: {
    perMessage: 0.0015,
    perCall: 0,
    source: 'postmarkapp.com/pricing: Basic, $15 for 10,000 emails a month; API reads are not billed',
  },
  sendgrid: {
    perMessage: 0.000399,
    perCall: 0,
    source: 'sendgrid.com/pricing: Essentials, $19.95 for 50,000 emails a month; API reads are not billed',
  },
  mailgun: {
    perMessage: 0.0007,
    perCall: 0,
    source: 'mailgun.com/pricing: Foundation, $35 for 50,000 emails a month; API reads are not billed',
  },
  ses: {
    perMessage: 0.0001,
    perCall: 0.0000004,
    source:
      'aws.amazon.com/ses/pricing: $0.10 per 1,000 emails; event reads through SQS at $0.40 per million requests (aws.amazon.com/sqs/pricing)',
  },
  infrai: {
    perMessage: null,
    perCall: 0,
    source: 'no public price list: Infrai reports each call’s price in the answer (`metadata.cost_usd`); the sandbox reports 0',
  },
  twilio: {
    perMessage: 0.0083,
    perCall: 0,
    source: 'twilio.com/en-us/sms/pricing/us: $0.0083 per US SMS segment, carrier fees extra; API reads are not billed',
  },
  'aws-sms': {
    perMessage: null,
    perCall: 0.0000004,
    source:
      'aws.amazon.com/end-user-messaging/pricing: per-country, not confirmed for this table; event reads through SQS at $0.40 per million requests',
  },
};
