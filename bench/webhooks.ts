/**
 * Provider calls per notice with the providers' webhooks on and off: the same notices, through
 * web and worker processes, once read by the planned checks alone and once with the emulators
 * pushing their events (Postmark's, Twilio's status callbacks) to the web. Calls are counted in
 * the emulators' request log; a webhook is a request to Herald, not a provider call, and is
 * counted apart.
 */
import { createNotices, HeraldDeployment, noticeBody, type BenchContext } from './herald.js';
import { until } from './processes.js';

export interface WebhookCallsRun {
  path: 'delivered' | 'fallback';
  webhooks: boolean;
  items: number;
  /** Provider calls per notice, by operation, and `total`. */
  providerCallsPerItem: Record<string, number>;
  /** Webhook requests Herald answered, per notice. */
  webhookRequestsPerItem: number;
  /** Planned status checks a webhook made unnecessary, per notice (herald_status_checks_saved_total). */
  checksSavedPerItem: number;
  seconds: number;
}

/** The secrets both sides share; the public URL is only what Twilio signs, the outbox posts to the web's own. */
const WEBHOOK = {
  publicUrl: 'https://herald.bench.test',
  postmarkAuth: 'bench:webhook-secret-0123456789',
  twilioAuthToken: 'bench-twilio-auth-token',
};

/** An 8 s deadline, as in the cost runs: checks at 2, 3.5, 5 and 6.5 s, then the deadline's read. */
const DEADLINE_SECONDS = 8;

export async function webhookCalls(
  ctx: BenchContext,
  path: 'delivered' | 'fallback',
  webhooks: boolean,
  notices: number,
): Promise<WebhookCallsRun> {
  const env: Record<string, string> = { ...ctx.env, HERALD_METRICS_CACHE_MS: '0' };
  if (webhooks) {
    Object.assign(env, {
      HERALD_PUBLIC_URL: WEBHOOK.publicUrl,
      HERALD_POSTMARK_WEBHOOK_AUTH: WEBHOOK.postmarkAuth,
      TWILIO_AUTH_TOKEN: WEBHOOK.twilioAuthToken,
    });
  }
  const herald = new HeraldDeployment({ ...ctx, env }, `${ctx.runPrefix}-wh-${path}-${webhooks ? 'on' : 'off'}`);
  try {
    await herald.startWeb();
    await herald.startWorkers(1);
    ctx.sandbox.reset();
    if (webhooks) ctx.sandbox.configureWebhooks({ url: herald.url, ...WEBHOOK });
    // Delivered half a second after the send: before the first planned check, as a webhook usually is.
    const email = path === 'delivered' ? 'delivered+500ms@example.com' : 'never@example.com';
    const started = Date.now();
    await createNotices(herald.url, notices, () => noticeBody({ email, phone: '+12025550100', deadlineInSeconds: DEADLINE_SECONDS }));
    await until(
      async () => (await herald.live()) === 0 && (await herald.drained()),
      180_000,
      `every ${path} notice (webhooks ${webhooks ? 'on' : 'off'}) and its jobs to finish`,
      250,
    );
    const seconds = (Date.now() - started) / 1000;
    const calls: Record<string, number> = {};
    for (const request of ctx.sandbox.requests()) if (request.at >= started) calls[request.operation] = (calls[request.operation] ?? 0) + 1;
    calls.total = Object.values(calls).reduce((a, b) => a + b, 0);
    const answered = ctx.sandbox.webhookDeliveries().filter((d) => d.status !== undefined).length;
    const metrics = await (await fetch(`${herald.url}/metrics`)).text();
    const saved = [...metrics.matchAll(/^herald_status_checks_saved_total\{[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    const per = (n: number) => Math.round((n / notices) * 100) / 100;
    return {
      path,
      webhooks,
      items: notices,
      providerCallsPerItem: Object.fromEntries(Object.entries(calls).map(([op, n]) => [op, per(n)])),
      webhookRequestsPerItem: per(answered),
      checksSavedPerItem: per(saved),
      seconds,
    };
  } finally {
    ctx.sandbox.configureWebhooks(undefined);
    await herald.close();
  }
}
