import type { Prices } from '../config.js';

const GSM_7 = /^[@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&'()*+,\-./0-9:;<=>?¡A-ZÄÖÑÜ§¿a-zäöñüà^{}\\[~\]|€]*$/;

/** SMS segments a body takes: GSM-7 160 (153 when split), else UCS-2 70 (67 when split). */
export function smsSegments(body: string): number {
  const gsm = GSM_7.test(body);
  const length = gsm ? [...body].reduce((n, c) => n + ('^{}\\[~]|€'.includes(c) ? 2 : 1), 0) : [...body].length;
  const [single, part] = gsm ? [160, 153] : [70, 67];
  return length <= single ? 1 : Math.ceil(length / part);
}

const round = (n: number) => Math.round(n * 1e6) / 1e6;

export interface CostCounts {
  emailSends: number;
  emailChecks: number;
  smsSegments: number;
  smsChecks: number;
}

/** What a notice costs (or is expected to cost) at the configured unit prices. */
export function costOf(counts: CostCounts, prices: Prices): { currency: string; total: number; byChannel: { email: number; sms: number } } {
  const email = round(counts.emailSends * prices.email.send + counts.emailChecks * prices.email.status);
  const sms = round(counts.smsSegments * prices.sms.segment + counts.smsChecks * prices.sms.status);
  return { currency: prices.currency, total: round(email + sms), byChannel: { email, sms } };
}
