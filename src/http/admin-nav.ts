import { markup, type Html } from './html.js';

/** The admin pages' navigation bar; its rules go into each page's hashed style block. */
export const NAV_CSS = `
.skip{position:absolute;left:-9999px} .skip:focus{left:8px;top:8px;background:#fff;padding:4px 8px;z-index:1}
nav.admin{display:flex;flex-wrap:wrap;align-items:center;gap:4px 16px;padding:8px 24px;background:#24292f}
nav.admin a{color:#fff;text-decoration:none;padding:2px 0} nav.admin a[aria-current=page]{border-bottom:2px solid #fff;font-weight:600}
nav.admin form{margin:0 0 0 auto} nav.admin button{font:inherit}
nav.admin :focus-visible{outline:2px solid #fff;outline-offset:2px}
`;

const LINKS = [
  { page: 'overview', href: '/admin', label: 'Overview' },
  { page: 'notices', href: '/admin/notices', label: 'Notices' },
  { page: 'queues', href: '/admin/queues', label: 'Queues' },
] as const;

/** A skip link, the admin links (the current page marked) and the log-out button. */
export function adminNav(current: (typeof LINKS)[number]['page'] | 'timeline'): Html {
  return markup`<a class="skip" href="#main">Skip to content</a>
<nav class="admin" aria-label="Herald admin">${LINKS.map(
    (link) => markup`<a href="${link.href}"${link.page === current ? markup` aria-current="page"` : ''}>${link.label}</a>`,
  )}<form method="post" action="/admin/logout"><button type="submit">Log out</button></form></nav>`;
}
