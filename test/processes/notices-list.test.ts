import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { iso } from '../../src/clock.js';
import { createLogger } from '../../src/logger.js';
import { newAttemptId, shardOfNoticeId } from '../../src/notice/ids.js';
import { searchNotices } from '../../src/notice/search.js';
import { indexExistingNoticesOnce, NoticeIndex } from '../../src/store/notice-index.js';
import { openArchive } from '../../src/archive/open.js';
import { deletePointersOlderThan } from '../../src/archive/recipient-index.js';
import { startWorker, type WorkerHandle } from '../../src/worker.js';
import { sleep, testAddressLookup, testPrefix, waitFor } from '../helpers/env.js';
import { noticeBody } from '../helpers/herald.js';
import { startStack, type Stack } from '../helpers/stack.js';

const ADMIN = 'admin-token-notices-0123456789';
const admin = { authorization: `Bearer ${ADMIN}` };
// The first check comes after the worker starts (below), so that it sees the emulator's outcome, not "not indexed yet".
const checks = { firstCheckAfterSeconds: 6, minCheckIntervalSeconds: 60 };

/** The notice IDs of a list page, in the order shown. */
const idsOf = (html: string) => [...html.matchAll(/<td data-label="ID"><a href="\/admin\/notices\/(ntc_[0-9a-z]+)"/g)].map((m) => m[1]!);
const nextOf = (html: string) => /<a href="([^"]+)" rel="next"/.exec(html)?.[1]?.replaceAll('&amp;', '&');

describe('the notices list, on real Redis with a real worker', () => {
  let stack: Stack;
  let worker: WorkerHandle | undefined;
  const id: Record<'late' | 'doubt' | 'delivered' | 'bounced' | 'blocked', string> = {} as never;
  const list = async (query = '') => stack.web.call('GET', `/admin/notices${query}`, undefined, admin);

  beforeAll(async () => {
    // No worker at first: a notice can pass its deadline undecided, and an attempt can be left in doubt.
    stack = await startStack({ prefix: testPrefix('notices'), inProcessWorker: false, env: { HERALD_ADMIN_TOKEN: ADMIN } });
    // A few ms apart: notices of the same millisecond are ordered by their random part.
    const create = async (recipient: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
      await sleep(5);
      return stack.createNotice(noticeBody({ recipient, policy: checks, ...extra }));
    };
    id.late = await create(
      { id: 'r-late', email: 'never@example.com', phone: '+12025550100' },
      { deadlineInSeconds: 1, policy: undefined },
    );
    id.doubt = await create({ id: 'r-doubt', email: 'delivered+0ms@example.com' }, { category: 'welcome' });
    id.delivered = await create({ id: 'r-del', email: 'delivered+0ms+2@example.com' }, { category: 'welcome' });
    id.bounced = await create({ id: 'r-fb', email: 'bounce+0ms@example.com', phone: '+13035550100' });
    id.blocked = await create({ id: 'r-blk', email: 'bounce+0ms+2@example.com' });
    // A worker died after the email request left and before the answer was stored.
    const now = Date.now();
    const started = await stack.web.store.transition(id.doubt, now, iso(now), {
      name: 'startEmailAttempt',
      set: {
        emailAttemptId: newAttemptId(),
        emailAttemptStartedAt: now - 60_000,
        emailAttempts: 1,
        emailAttemptSettled: 0,
        emailAttemptInDoubt: 1,
      },
      entries: [
        { type: 'email.requested', attemptId: 'att_crashed', idempotencyKey: `${id.doubt}-email`, provider: 'postmark', attempt: 1 },
      ],
      due: now,
    });
    expect(started.ok).toBe(true);
  });
  afterAll(async () => {
    await worker?.close();
    await stack?.close();
  });

  it('lists a notice undecided past its deadline as late, and a send attempt left in flight as in doubt, before any worker runs', async () => {
    // The late notice's deadline (1 s) plus the reconcile grace (1.5 s in tests) pass.
    await sleep(3000);
    expect(idsOf((await list('?view=late')).body)).toEqual([id.late]);
    expect(idsOf((await list('?view=in_doubt')).body)).toEqual([id.doubt]);
  });

  describe('once the worker has taken every notice to its end', () => {
    beforeAll(async () => {
      worker = await startWorker(stack.config, { logger: createLogger('herald-test-worker', 'silent') });
      await stack.waitForState(id.late, ['sms_delivered']);
      await stack.waitForState(id.doubt, ['email_delivered']);
      await stack.waitForState(id.delivered, ['email_delivered']);
      await stack.waitForState(id.bounced, ['sms_delivered']);
      await stack.waitForState(id.blocked, ['blocked']);
    });

    it('lists every notice newest first, each row linking to its timeline', async () => {
      const res = await list();
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-security-policy']).toMatch(/default-src 'none'; style-src 'sha256-/);
      const shown = idsOf(res.body);
      expect([...shown].sort()).toEqual(Object.values(id).sort());
      const created = shown.map((n) => n.slice(6, 16));
      expect(created).toEqual([...created].sort().reverse());
      const timeline = await stack.web.call('GET', `/admin/notices/${shown[0]}`, undefined, admin);
      expect(timeline.statusCode).toBe(200);
      expect(timeline.body).toContain(`Notice <code>${shown[0]}</code>`);
    });

    it('filters by state, fallback reason, category, recipient and creation time', async () => {
      expect(idsOf((await list('?state=blocked')).body)).toEqual([id.blocked]);
      expect(idsOf((await list('?reason=email_bounced')).body).sort()).toEqual([id.bounced, id.blocked].sort());
      expect(idsOf((await list('?reason=email_deadline_elapsed&state=sms_delivered')).body)).toEqual([id.late]);
      expect(idsOf((await list('?category=welcome')).body).sort()).toEqual([id.doubt, id.delivered].sort());
      expect(idsOf((await list('?recipientId=r-del')).body)).toEqual([id.delivered]);
      const delivered = await stack.view(id.delivered);
      const from = encodeURIComponent(delivered.createdAt);
      const fromDelivered = idsOf((await list(`?from=${from}`)).body);
      expect(fromDelivered).toContain(id.delivered);
      expect(fromDelivered).not.toContain(id.late);
      expect(idsOf((await list(`?to=${from}`)).body)).not.toContain(id.delivered);
      expect((await list(`?id=${id.bounced}`)).body).toContain('email_bounced');
    });

    it('keeps listing the late decision as late, and no send as in doubt once resolved', async () => {
      expect(idsOf((await list('?view=late')).body)).toEqual([id.late]);
      expect(idsOf((await list('?view=in_doubt')).body)).toEqual([]);
      expect((await list('?view=in_doubt')).body).toContain('No notice matches.');
    });

    it('pages with an opaque cursor: every notice once, in order, the filters kept', async () => {
      const seen: string[] = [];
      let url: string | undefined = '/admin/notices?limit=2';
      let pages = 0;
      while (url) {
        const res = await stack.web.call('GET', url, undefined, admin);
        expect(res.statusCode).toBe(200);
        const ids = idsOf(res.body);
        expect(ids.length).toBeLessThanOrEqual(2);
        seen.push(...ids);
        url = nextOf(res.body);
        if (url) expect(url).toContain('limit=2');
        pages += 1;
      }
      expect(pages).toBe(3);
      expect(seen).toEqual(idsOf((await list()).body));
      const filtered = nextOf((await list('?category=terms_change&limit=1')).body)!;
      expect(filtered).toContain('category=terms_change');
      expect(idsOf((await stack.web.call('GET', filtered, undefined, admin)).body)).toHaveLength(1);
    });

    it('looks at a bounded number of notices per page and resumes where it stopped', async () => {
      const deps = {
        index: new NoticeIndex(stack.web.redis, stack.web.store.keys),
        archive: () => {
          throw new Error('no archive read for live notices');
        },
        now: Date.now(),
        lateAfterMs: stack.config.reconcileGraceMs,
        auditRetentionMs: stack.config.auditRetentionMs,
        addressLookup: testAddressLookup,
      };
      // The oldest notice is the only match: each page looks at 2 notices, then hands on its cursor.
      let page = await searchNotices(deps, { reason: 'email_deadline_elapsed' }, { maxExamined: 2 });
      const empty: number[] = [];
      while (page.notices.length === 0 && page.next !== null) {
        expect(page.examined).toBeLessThanOrEqual(2);
        empty.push(page.examined);
        page = await searchNotices(deps, { reason: 'email_deadline_elapsed' }, { maxExamined: 2, cursor: page.next });
      }
      expect(page.notices.map((n) => n.id)).toEqual([id.late]);
      expect(empty.length).toBe(2);
    });

    it('escapes what it echoes, and answers bad filters with a catalogued JSON error', async () => {
      const echoed = await list(`?category=${encodeURIComponent('"><script>alert(1)</script>')}`);
      expect(echoed.statusCode).toBe(200);
      expect(echoed.body).not.toContain('<script>alert');
      expect(echoed.body).toContain('&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;');
      for (const [query, field] of [
        ['?state=nope', 'state'],
        ['?view=everything', 'view'],
        ['?from=yesterday', 'from'],
        ['?cursor=not-a-cursor', 'cursor'],
        ['?limit=0', 'limit'],
        ['?id=ntc_zz', 'id'],
        ['?state=blocked&state=failed', 'state'],
      ] as const) {
        const res = await list(query);
        expect(res.statusCode, query).toBe(400);
        expect(res.json().error.code).toBe('validation_failed');
        expect(res.json().error.details.map((d: { field: string }) => d.field)).toContain(field);
      }
    });

    it('is behind the admin gate', async () => {
      expect((await stack.web.call('GET', '/admin/notices', undefined, { authorization: '' })).statusCode).toBe(401);
      expect(
        (await stack.web.call('GET', '/admin/notices', undefined, { authorization: 'Bearer wrong-token-0123456789' })).statusCode,
      ).toBe(403);
    });
  });
});

describe('a notice Redis let go of', () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack({
      prefix: testPrefix('notices-retired'),
      env: {
        HERALD_ADMIN_TOKEN: ADMIN,
        HERALD_NOTICE_KEEP_HOT: '0s',
        HERALD_LOG_KEEP_HOT: '0s',
        HERALD_MIRROR_INTERVAL_MS: '200',
        HERALD_CONTENT_PURGE_INTERVAL_MS: '200',
      },
    });
  });
  afterAll(async () => stack?.close());

  it('is found by its ID and by its recipient ID through the archive, and leaves the index with its record', async () => {
    const first = await stack.createNotice(noticeBody({ recipient: { id: 'r-gone', email: 'delivered+0ms@example.com' }, policy: checks }));
    await sleep(5);
    const second = await stack.createNotice(
      noticeBody({ recipient: { id: 'r-gone', email: 'delivered+0ms+2@example.com' }, policy: checks }),
    );
    const other = await stack.createNotice(
      noticeBody({ recipient: { id: 'r-other', email: 'delivered+0ms+3@example.com' }, policy: checks }),
    );
    for (const n of [first, second, other]) await waitFor(async () => (await stack.web.store.get(n)) === null, 30_000, `${n} to retire`);
    const list = async (query: string) => stack.web.call('GET', `/admin/notices${query}`, undefined, admin);

    expect(idsOf((await list('')).body)).toEqual([]);
    const byRecipient = await list('?recipientId=r-gone');
    expect(idsOf(byRecipient.body)).toEqual([second, first]);
    expect(byRecipient.body).toContain('archived');
    expect(idsOf((await list('?recipientId=r-gone&state=email_delivered&limit=1')).body)).toEqual([second]);
    expect(idsOf((await list('?recipientId=r-gone&state=blocked')).body)).toEqual([]);
    expect(idsOf((await list(`?id=${other}`)).body)).toEqual([other]);
    expect(await stack.web.redis.zcard(stack.web.store.keys.notices(0))).toBe(0);

    const archive = openArchive(stack.config);
    try {
      // Each notice's recipient pointer and its email address's.
      expect(await deletePointersOlderThan(archive, Date.now() + 60_000)).toBe(6);
    } finally {
      await archive.close();
    }
    expect(idsOf((await list('?recipientId=r-gone')).body)).toEqual([]);
  });
});

describe('notices created before the notices index', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('notices-upgrade'), inProcessWorker: false, env: { HERALD_ADMIN_TOKEN: ADMIN } });
  });
  afterAll(async () => stack?.close());

  it('are added to it once, and a notice gone from Redis is not', async () => {
    const { redis, store } = stack.web;
    const kept = await stack.createNotice(noticeBody({ recipient: { id: 'r-old', email: 'never@example.com' } }));
    const gone = await stack.createNotice(noticeBody({ recipient: { id: 'r-old', email: 'never@example.com' } }));
    // As an earlier version left them: in no index, and one of them already let go of.
    for (const n of [kept, gone]) await redis.zrem(store.keys.notices(shardOfNoticeId(n)!), n);
    await redis.del(store.keys.notice(gone));
    expect(idsOf((await stack.web.call('GET', '/admin/notices', undefined, admin)).body)).toEqual([]);

    expect(await indexExistingNoticesOnce(redis, store.keys, Date.now())).toBe(1);
    expect(idsOf((await stack.web.call('GET', '/admin/notices', undefined, admin)).body)).toEqual([kept]);
    expect(await redis.zscore(store.keys.notices(shardOfNoticeId(gone)!), gone)).toBeNull();
    expect(await indexExistingNoticesOnce(redis, store.keys, Date.now())).toBeNull();
  });
});
