import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { deleteKeys, plainRedis, REDIS_URL, testArchiveUrl, testPrefix, waitFor } from '../helpers/env.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A compiled entry point run with only the given environment; its stdout and stderr together. */
function start(script: string, env: Record<string, string>): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

const running: ChildProcess[] = [];
afterEach(() => {
  for (const child of running.splice(0)) child.kill('SIGKILL');
});

describe('with NODE_ENV=production', () => {
  const decided = {
    NODE_ENV: 'production',
    REDIS_URL: 'redis://127.0.0.1:1',
    HERALD_API_KEYS: 'prod-key-0123456789abcdef',
    HERALD_CONTENT_TTL: '3d',
    HERALD_AUDIT_RETENTION: '400d',
    HERALD_ARCHIVE_URL: 's3://audit/herald',
    POSTMARK_SERVER_TOKEN: 'pm-token',
    POSTMARK_FROM: 'notices@example.com',
    TWILIO_ACCOUNT_SID: 'AC00000000000000000000000000000000',
    TWILIO_AUTH_TOKEN: 'tw-token',
    TWILIO_FROM: '+15005550006',
  };

  it.each(['dist/src/worker.js', 'dist/src/server.js'])('%s refuses the sandbox emulators, naming HERALD_PROVIDERS', async (script) => {
    const run = start(script, decided);
    expect(await run.exited).toBe(1);
    expect(run.output()).toMatch(/HERALD_PROVIDERS must be "live" when NODE_ENV=production/);
  });

  it.each(['dist/src/worker.js', 'dist/src/server.js'])('%s refuses plain http:// provider URLs unless allowed', async (script) => {
    const env = { ...decided, HERALD_PROVIDERS: 'live', POSTMARK_API_URL: 'http://127.0.0.1:9', TWILIO_API_URL: 'https://api.twilio.com' };
    const run = start(script, env);
    expect(await run.exited).toBe(1);
    expect(run.output()).toMatch(
      /POSTMARK_API_URL must be an https:\/\/ URL when NODE_ENV=production \(set HERALD_ALLOW_INSECURE_PROVIDER_URLS=1/,
    );
    expect(run.output()).not.toMatch(/TWILIO_API_URL/);
  });
});

describe('the web process', () => {
  it('refuses to start without an API key instead of inventing one', async () => {
    const run = start('dist/src/server.js', { REDIS_URL, HERALD_PREFIX: testPrefix('nokey'), PORT: '0', HOST: '127.0.0.1' });
    expect(await run.exited).toBe(1);
    expect(run.output()).toMatch(/HERALD_API_KEYS must list at least one API key/);
  });
});

// Each test starts the whole of `npm start`: on a loaded machine that alone can take most of a minute.
describe('npm start', { timeout: 150_000 }, () => {
  it('listens on 127.0.0.1, prints the real address and a dev key that is in no log line, and names the sandbox in the trail', async () => {
    const prefix = testPrefix('start');
    const redis = plainRedis();
    const run = start('dist/src/dev.js', {
      REDIS_URL,
      HERALD_PREFIX: prefix,
      HERALD_ARCHIVE_URL: testArchiveUrl(),
      HERALD_MIN_POLL_INTERVAL_MS: '200',
      PORT: '0',
      HERALD_SANDBOX_PORT: '0',
    });
    running.push(run.child);
    try {
      const banner = await waitFor(async () => /Dev API key: (dev_\S+)/.test(run.output()) && run.output(), 60_000, 'the start-up banner');
      const url = /Herald is running \(sandbox providers\) at (http:\/\/\S+)/.exec(banner)?.[1];
      const key = /Dev API key: (dev_\S+)/.exec(banner)![1]!;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(url).not.toMatch(/:0$/);

      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const created = await fetch(`${url}/v1/notices`, {
        method: 'POST',
        headers,
        body: JSON.stringify(noticeBody({ deadlineInSeconds: 30 })),
      });
      expect(created.status).toBe(202);
      const { id } = (await created.json()) as { id: string };
      const events = await waitFor(
        async () => {
          const answer = (await (await fetch(`${url}/v1/notices/${id}/events`, { headers })).json()) as {
            events: { type: string; provider?: string }[];
          };
          return answer.events.some((e) => e.type === 'email.accepted') && answer.events;
        },
        20_000,
        'the email to be accepted',
      );
      expect(events.find((e) => e.type === 'email.requested')?.provider).toBe('postmark-sandbox');

      const logLines = run
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'));
      expect(logLines.length).toBeGreaterThan(0);
      expect(logLines.filter((line) => line.includes(key))).toEqual([]);
      expect(logLines.some((line) => line.includes('HERALD_PROVIDERS=sandbox') && line.includes('never to a real inbox'))).toBe(true);
    } finally {
      run.child.kill('SIGTERM');
      await run.exited;
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
  });

  it("prints how to hear back, and the sandbox's receiver shows the notice's verified notice.completed", async () => {
    const prefix = testPrefix('start-events');
    const redis = plainRedis();
    const run = start('dist/src/dev.js', {
      REDIS_URL,
      HERALD_PREFIX: prefix,
      HERALD_ARCHIVE_URL: testArchiveUrl(),
      PORT: '0',
      HERALD_SANDBOX_PORT: '0',
    });
    running.push(run.child);
    try {
      const banner = await waitFor(
        async () => /watch (http:\/\/\S+\/__sandbox\/events)/.test(run.output()) && run.output(),
        60_000,
        'the start-up banner',
      );
      const url = /Herald is running \(sandbox providers\) at (http:\/\/\S+)/.exec(banner)![1]!;
      const key = /Dev API key: (dev_\S+)/.exec(banner)![1]!;
      const receiver = /watch (http:\/\/\S+\/__sandbox\/events)/.exec(banner)![1]!;
      // The command the banner prints, as an operator would paste it.
      const printed = /-d '(\{"url":[^']+\})'/.exec(banner)![1]!;
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const endpoint = (await (await fetch(`${url}/v1/event-endpoints`, { method: 'POST', headers, body: printed })).json()) as {
        secret: string;
      };
      const created = await fetch(`${url}/v1/notices`, {
        method: 'POST',
        headers,
        body: JSON.stringify(noticeBody({ recipient: { id: 'p1', email: 'delivered+1s@example.com' }, deadlineInSeconds: 60 })),
      });
      const { id } = (await created.json()) as { id: string };
      const seen = await waitFor(
        async () => {
          const page = (await (await fetch(`${receiver}?secret=${encodeURIComponent(endpoint.secret)}`)).json()) as {
            events: { type: string; noticeId: string; verified: boolean }[];
          };
          return page.events.find((e) => e.noticeId === id && e.type === 'notice.completed');
        },
        20_000,
        'the event at the receiver',
      );
      expect(seen.verified).toBe(true);
      const html = await (await fetch(receiver, { headers: { accept: 'text/html' } })).text();
      expect(html).toContain(id);
    } finally {
      run.child.kill('SIGTERM');
      await run.exited;
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
  });

  describe('with the sandbox webhooks (on by default)', () => {
    const startHerald = (extra: Record<string, string> = {}) => {
      const prefix = testPrefix('start-wh');
      const run = start('dist/src/dev.js', {
        REDIS_URL,
        HERALD_PREFIX: prefix,
        HERALD_ARCHIVE_URL: testArchiveUrl(),
        // Checks far enough apart that the pushed events come first.
        HERALD_MIN_POLL_INTERVAL_MS: '5000',
        PORT: '0',
        HERALD_SANDBOX_PORT: '0',
        ...extra,
      });
      running.push(run.child);
      return { prefix, run };
    };
    const banner = async (run: ReturnType<typeof start>) => {
      const text = await waitFor(async () => /Dev API key: (dev_\S+)/.test(run.output()) && run.output(), 60_000, 'the start-up banner');
      const url = /Herald is running \(sandbox providers\) at (http:\/\/\S+)/.exec(text)![1]!;
      const key = /Dev API key: (dev_\S+)/.exec(text)![1]!;
      return { text, url, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } };
    };

    it("records the email delivery and the SMS statuses from the emulators' webhooks, the checks they saved, no status read", async () => {
      const { prefix, run } = startHerald();
      const redis = plainRedis();
      try {
        const { text, url, headers } = await banner(run);
        expect(text).toMatch(/Webhooks on: the emulators push postmark, twilio events to http:\/\/127\.0\.0\.1:\d+\/webhooks\//);
        const events = async (id: string) =>
          ((await (await fetch(`${url}/v1/notices/${id}/events`, { headers })).json()) as { events: Record<string, any>[] }).events;
        const create = async (body: Record<string, unknown>) =>
          ((await (await fetch(`${url}/v1/notices`, { method: 'POST', headers, body: JSON.stringify(body) })).json()) as { id: string }).id;
        const delivered = await create(
          noticeBody({ recipient: { id: 'p1', email: 'delivered+300ms@example.com', phone: '+12025550100' }, deadlineInSeconds: 60 }),
        );
        const fallback = await create(
          noticeBody({ recipient: { id: 'p2', email: 'never@example.com', phone: '+12025550100' }, deadlineInSeconds: 10 }),
        );

        const emailLog = await waitFor(
          async () => {
            const log = await events(delivered);
            return log.some((e) => e.type === 'notice.completed') && log;
          },
          30_000,
          'the email delivery',
        );
        const observed = emailLog.filter((e) => e.type === 'email.observed');
        expect(observed).toEqual([expect.objectContaining({ status: 'delivered', source: 'webhook', checksSaved: expect.any(Number) })]);
        expect(observed[0]!.checksSaved).toBeGreaterThan(0);
        expect(emailLog.at(-1)).toMatchObject({ type: 'notice.completed', state: 'email_delivered' });

        const smsLog = await waitFor(
          async () => {
            const log = await events(fallback);
            return log.some((e) => e.type === 'notice.completed') && log;
          },
          40_000,
          'the SMS delivery',
        );
        expect(smsLog.find((e) => e.type === 'fallback.decided')).toMatchObject({ reason: 'email_deadline_elapsed' });
        const smsObserved = smsLog.filter((e) => e.type === 'sms.observed');
        expect(smsObserved.at(-1)).toMatchObject({ status: 'delivered', source: 'webhook' });
        expect(
          smsObserved.every((e) => e.source === 'webhook'),
          'no SMS status read was needed',
        ).toBe(true);
        expect(smsLog.at(-1)).toMatchObject({ type: 'notice.completed', state: 'sms_delivered' });
      } finally {
        run.child.kill('SIGTERM');
        await run.exited;
        await deleteKeys(redis, prefix);
        await redis.quit();
      }
    });

    it.each(['sendgrid', 'mailgun'])(
      "signs %s's webhooks with the secrets it made, and records the delivery from them",
      async (provider) => {
        const { prefix, run } = startHerald({ HERALD_EMAIL_PROVIDER: provider });
        const redis = plainRedis();
        try {
          const { text, url, headers } = await banner(run);
          expect(text).toMatch(new RegExp(`Webhooks on: the emulators push ${provider}, twilio events`));
          const created = await fetch(`${url}/v1/notices`, {
            method: 'POST',
            headers,
            body: JSON.stringify(noticeBody({ recipient: { id: 'p3', email: 'delivered+300ms@example.com' }, deadlineInSeconds: 60 })),
          });
          const { id } = (await created.json()) as { id: string };
          const log = await waitFor(
            async () => {
              const answer = (await (await fetch(`${url}/v1/notices/${id}/events`, { headers })).json()) as {
                events: Record<string, any>[];
              };
              return answer.events.some((e) => e.type === 'notice.completed') && answer.events;
            },
            30_000,
            `the ${provider} delivery`,
          );
          expect(log.find((e) => e.type === 'email.requested')?.provider).toBe(`${provider}-sandbox`);
          expect(log.filter((e) => e.type === 'email.observed' && e.status === 'delivered')).toEqual([
            expect.objectContaining({ source: 'webhook', checksSaved: expect.any(Number) }),
          ]);
          expect(log.at(-1)).toMatchObject({ type: 'notice.completed', state: 'email_delivered' });
        } finally {
          run.child.kill('SIGTERM');
          await run.exited;
          await deleteKeys(redis, prefix);
          await redis.quit();
        }
      },
    );

    it('leaves them off with HERALD_SANDBOX_WEBHOOKS=0: no webhook route answers', async () => {
      const { prefix, run } = startHerald({ HERALD_SANDBOX_WEBHOOKS: '0' });
      const redis = plainRedis();
      try {
        const { text, url } = await banner(run);
        expect(text).not.toMatch(/Webhooks on/);
        for (const provider of ['postmark', 'twilio', 'sendgrid', 'mailgun']) {
          const answer = await fetch(`${url}/webhooks/${provider}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: '{}',
          });
          expect(answer.status, provider).toBe(404);
        }
      } finally {
        run.child.kill('SIGTERM');
        await run.exited;
        await deleteKeys(redis, prefix);
        await redis.quit();
      }
    });
  });
});
