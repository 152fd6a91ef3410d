import { api, q, type Receipt } from '../api.js';
import { badge, errorBox, fill, h, principalLink, receiptLink, section, table, time } from '../dom.js';
import { navigate, type Route, type PageContext } from '../router.js';

const POLL_MS = 2000;

/**
 * The receipts timeline, newest first in pages of 50 (GET /v1/receipts?order=newest, `before` is the
 * cursor). Live: while the newest page is shown, it is asked for again every 2 s, so new receipts
 * appear at the top, marked, without a reload. Polling rather than SSE: it is the public read the agents' tools
 * use already, through the same authentication, rate limits and drain as every request, and it holds
 * no connection open across a server's graceful shutdown.
 */
export function receiptsPage(route: Route, ctx: PageContext): HTMLElement {
  const p = route.params;
  const filters = { resource: p.get('resource') ?? '', principal: p.get('principal') ?? '', decision_id: p.get('decision_id') ?? '', status: p.get('status') ?? '', since: p.get('since') ?? '', until: p.get('until') ?? '' };
  const before = Number(p.get('before') ?? '0') || 0;
  const input = (name: keyof typeof filters, label: string, type = 'text', placeholder = '') =>
    h('label', { class: 'field' }, h('span', {}, label), h('input', { name, type, value: type === 'datetime-local' ? toLocalInput(filters[name]) : filters[name], placeholder }));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter receipts' },
    input('resource', 'Resource', 'text', 'wp:post:1024'),
    input('principal', 'Principal', 'text', 'seo-agent-7'),
    input('decision_id', 'Decision id', 'text', 'from a receipt or the decision log'),
    h('label', { class: 'field' }, h('span', {}, 'Status'),
      h('select', { name: 'status' }, ['', 'COMPLETED', 'REJECTED', 'FAILED', 'PENDING'].map((s) => h('option', { value: s, selected: s === filters.status }, s || 'any')))),
    input('since', 'From', 'datetime-local'),
    input('until', 'To', 'datetime-local'),
    h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'primary' }, 'Filter'), h('button', { type: 'reset' }, 'Clear')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const data = new FormData(form);
    const out: Record<string, string> = {};
    for (const k of Object.keys(filters)) {
      const v = String(data.get(k) ?? '').trim();
      if (v) out[k] = k === 'since' || k === 'until' ? new Date(v).toISOString() : v;
    }
    navigate('receipts', out);
  });
  form.addEventListener('reset', (ev) => { ev.preventDefault(); navigate('receipts', {}); });

  const list = h('div', { id: 'receipt-list', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const status = h('p', { class: 'muted live', id: 'live-status' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  let timer: number | undefined;
  let seen: Set<string> | null = null;
  let left = false;

  const load = async () => {
    try {
      const page = await api<{ receipts: Receipt[]; next: number | null }>(`/v1/receipts${q({ ...filters, order: 'newest', before: before || undefined, limit: 50 })}`);
      if (left) return;
      const fresh = seen ? page.receipts.filter((r) => !seen!.has(r.receipt_id)) : [];
      if (fresh.length) status.textContent = `${fresh.length} new receipt(s) just arrived (marked).`;
      seen = new Set([...(seen ?? []), ...page.receipts.map((r) => r.receipt_id)]);
      const freshIds = new Set(fresh.map((r) => r.receipt_id));
      const rendered = table('Receipts', ['Created', 'Status', 'Principal', 'Action', 'Resource', 'Fields', 'Receipt'], page.receipts.map((r) => [
        time(r.created_at), h('span', {}, badge(r.status, r.status), r.error ? [' ', h('code', { class: 'muted' }, r.error.code)] : null), principalLink(r.principal), r.action, h('code', {}, r.resource_key), r.fields.join(', '), receiptLink(r.receipt_id, r.receipt_id.slice(0, 13)),
      ]), { empty: 'No receipt matches.' });
      rendered.querySelectorAll('tbody tr').forEach((tr, i) => { if (freshIds.has(page.receipts[i]!.receipt_id)) tr.classList.add('fresh'); });
      fill(list, rendered);
      fill(pager,
        before > 0 ? h('a', { href: hrefWith(route, { before: '' }), class: 'button' }, '← Newest') : null,
        page.next !== null ? h('a', { href: hrefWith(route, { before: String(page.next) }), class: 'button' }, 'Older →') : null);
      if (before === 0) {
        if (!status.textContent) status.textContent = 'Live: new receipts appear at the top as they are written.';
        timer = window.setTimeout(load, POLL_MS);
      }
    } catch (e) {
      fill(list, errorBox(e));
    }
  };
  void load();
  ctx.onLeave(() => { left = true; window.clearTimeout(timer); });
  return h('div', {}, h('h1', {}, 'Receipts'),
    ctx.session.auditor ? null : h('p', { class: 'notice' }, `Signed in as ${ctx.session.principal} without an audit grant: only its own receipts are shown.`),
    section('Filters', form),
    section('Timeline',
      filters.decision_id ? h('p', { class: 'notice', id: 'decision-filter' }, 'Receipts of the writes and refusals that presented decision ', h('code', {}, filters.decision_id),
        ': a decision authorizes one write, so at most one of them is not REJECTED.') : null,
      status, list, pager));
}

function hrefWith(route: Route, change: Record<string, string>): string {
  const p = new URLSearchParams(route.params);
  for (const [k, v] of Object.entries(change)) (v ? p.set(k, v) : p.delete(k));
  const s = p.toString();
  return `#/receipts${s ? `?${s}` : ''}`;
}

function toLocalInput(iso: string): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
