import type { FastifyInstance } from 'fastify';
import type { AppDeps } from './deps.js';
import { ArchiveIntegrityError, ArchiveUnavailableError } from '../archive/archive.js';
import {
  FALLBACK_REASONS,
  NOTICE_VIEWS,
  NoticeQueryError,
  parseNoticeQuery,
  searchDeps,
  searchNotices,
  type NoticeFilters,
  type NoticePage,
} from '../notice/search.js';
import { STATES } from '../notice/states.js';
import { HttpError } from './errors.js';
import { adminNav, NAV_CSS } from './admin-nav.js';
import { markup, sendPage, styleBlock, type Html } from './html.js';

/** The notices list's one style block (hashed into its CSP). Under 720px each row becomes a card of labelled values. */
export const NOTICES_CSS =
  `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1f2328;background:#fff}
main{padding:16px 24px}
h1{font-size:20px;margin:0 0 12px}
a{color:#0969da} a:focus-visible,input:focus-visible,select:focus-visible,button:focus-visible{outline:3px solid #0969da;outline-offset:2px}
form.filters{display:grid;grid-template-columns:repeat(auto-fill,minmax(190px,1fr));gap:8px 12px;padding:12px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;margin-bottom:12px}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#57606a;gap:2px}
form.filters input,form.filters select{font:inherit;padding:4px 6px;border:1px solid #d0d7de;border-radius:4px;color:#1f2328;background:#fff}
.actions{display:flex;gap:12px;align-items:end} .actions button{font:inherit;padding:5px 14px}
.summary{color:#57606a;margin:8px 0}
table{border-collapse:collapse;width:100%} th,td{border-bottom:1px solid #d0d7de;padding:6px 8px;text-align:left;vertical-align:top}
th{font-size:12px;color:#57606a} code{font-family:ui-monospace,monospace;font-size:13px}
.state{white-space:nowrap} .retired{color:#57606a;font-size:12px}
.pages{display:flex;gap:16px;margin-top:12px}
@media (max-width:720px){
 body{margin:12px}
 table,tbody,tr,td{display:block;width:auto} thead{position:absolute;left:-9999px}
 tr{border:1px solid #d0d7de;border-radius:6px;margin-bottom:8px;padding:4px 0}
 td{border:0;padding:2px 8px;display:grid;grid-template-columns:8em 1fr;gap:8px}
 td::before{content:attr(data-label);color:#57606a;font-size:12px}
 code{word-break:break-all}
}
` + NAV_CSS;

const FIELDS: { name: keyof NoticeFilters | 'recipientId'; label: string; hint?: string }[] = [
  { name: 'id', label: 'Notice ID', hint: 'ntc_…' },
  { name: 'recipientId', label: 'Recipient ID' },
  { name: 'email', label: 'Email address', hint: 'player@example.com' },
  { name: 'phone', label: 'Phone', hint: '+819012345678' },
  { name: 'tenant', label: 'Tenant', hint: 'every tenant' },
  { name: 'category', label: 'Category' },
  { name: 'from', label: 'Created from', hint: '2026-11-29T14:00Z' },
  { name: 'to', label: 'Created before', hint: '2026-11-30' },
];

/** The notices list's filters, cursor and page size from a query, or 400 `validation_failed` naming each bad field. */
export function noticeQueryOf(query: Record<string, unknown>): ReturnType<typeof parseNoticeQuery> {
  try {
    return parseNoticeQuery(query);
  } catch (error) {
    if (error instanceof NoticeQueryError)
      throw new HttpError('validation_failed', `The filters are not valid: ${error.message}.`, error.problems);
    throw error;
  }
}

/** `GET /admin/notices`: the notices list, behind the admin gate of the scope it is registered in. */
export function noticesListRoute(app: FastifyInstance, deps: AppDeps): void {
  const index = deps.noticeIndex;
  const opened = deps.archive;

  app.get<{ Querystring: Record<string, unknown> }>('/admin/notices', { schema: { hide: true } }, async (request, reply) => {
    const query = noticeQueryOf(request.query);
    let page: NoticePage;
    try {
      page = await searchNotices(searchDeps(deps.config, { index, archive: opened, now: deps.clock.now() }), query.filters, {
        cursor: query.cursor,
        limit: query.limit,
      });
    } catch (error) {
      if (error instanceof ArchiveUnavailableError || error instanceof ArchiveIntegrityError) {
        request.log.warn({ err: error }, 'notices list: archive read failed');
        throw new HttpError('unavailable', 'Retired notices are in the audit archive, which cannot be read now; retry later.');
      }
      throw error;
    }
    return sendPage(reply, renderNoticesList(request.query, query.filters, query.limit, page), NOTICES_CSS);
  });
}

/** The list page: filter form (GET), table, pagination. No scripts; every value escaped by `markup`. */
export function renderNoticesList(raw: Record<string, unknown>, filters: NoticeFilters, limit: number, page: NoticePage): Html {
  const given = (name: string) => (typeof raw[name] === 'string' ? (raw[name] as string) : '');
  const select = (name: string, label: string, options: readonly string[], anyLabel: string) =>
    markup`<label>${label}<select name="${name}"><option value="">${anyLabel}</option>${options.map(
      (o) => markup`<option value="${o}"${given(name) === o ? markup` selected` : ''}>${o}</option>`,
    )}</select></label>`;
  const kept = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) {
    if (value === undefined) continue;
    kept.set(name, name === 'from' || name === 'to' ? new Date(value as number).toISOString() : String(value));
  }
  if (limit !== 50) kept.set('limit', String(limit));
  const nextHref = page.next === null ? undefined : `/admin/notices?${new URLSearchParams([...kept, ['cursor', page.next]]).toString()}`;
  const firstHref = `/admin/notices${kept.size > 0 ? `?${kept.toString()}` : ''}`;
  const rows = page.notices.map(
    (n) => markup`<tr>
<td data-label="ID"><a href="/admin/notices/${encodeURIComponent(n.id)}"><code>${n.id}</code></a>${n.retired ? markup` <span class="retired">archived</span>` : ''}</td>
<td data-label="State" class="state">${n.state}</td>
<td data-label="Category">${n.category}</td>
<td data-label="Recipient">${n.recipientId}</td>
<td data-label="Tenant">${n.tenant}</td>
<td data-label="Created">${n.createdAt}</td>
<td data-label="Deadline">${n.deadline}</td>
<td data-label="Fallback reason">${n.fallbackReason ?? '—'}</td>
</tr>\n`,
  );
  const summary =
    page.notices.length === 0
      ? page.next === null
        ? 'No notice matches.'
        : `No match among the ${page.examined} notices looked at; older ones may match.`
      : `${page.notices.length} notice${page.notices.length === 1 ? '' : 's'}, newest first${page.next === null ? '' : '; older ones on the next page'}.`;
  return markup`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Notices — Herald admin</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
${styleBlock(NOTICES_CSS)}</head>
<body>
${adminNav('notices')}
<main id="main">
<h1>Notices</h1>
<form class="filters" method="get" action="/admin/notices" role="search" aria-label="Filter notices">
${FIELDS.map((f) => markup`<label>${f.label}<input name="${f.name}" value="${given(f.name)}"${f.hint ? markup` placeholder="${f.hint}"` : ''}></label>`)}
${select('state', 'State', STATES, 'any state')}
${select('reason', 'Fallback reason', FALLBACK_REASONS, 'any reason')}
${select('view', 'View', NOTICE_VIEWS, 'all notices')}
${limit !== 50 ? markup`<input type="hidden" name="limit" value="${limit}">` : ''}
<div class="actions"><button type="submit">Filter</button><a href="/admin/notices">Clear</a></div>
</form>
<p class="summary" id="summary" role="status">${summary}</p>
<table id="results"><thead><tr><th scope="col">ID</th><th scope="col">State</th><th scope="col">Category</th><th scope="col">Recipient</th><th scope="col">Tenant</th><th scope="col">Created</th><th scope="col">Deadline</th><th scope="col">Fallback reason</th></tr></thead>
<tbody>
${rows}</tbody></table>
<nav class="pages" aria-label="Pages">${raw.cursor ? markup`<a href="${firstHref}">Newest</a>` : ''}${nextHref ? markup`<a href="${nextHref}" rel="next" id="next-page">Older →</a>` : ''}</nav>
</main>
</body></html>`;
}
