import type cytoscape from 'cytoscape';
import { api, q, type Edge, type Principal } from '../api.js';
import { dl, edgeLink, errorBox, fill, h, principalLink, section, table, time } from '../dom.js';
import { clearFocus, drawGraph, exportButtons, focusOn, viewButtons, type DrawnEdge, type EdgeMark } from '../graph-view.js';
import { impactSection } from '../impact.js';
import { navigate, type PageContext, type Route } from '../router.js';
import { scopeText } from './receipt.js';

interface GraphExport { revision: number; principals: Principal[]; edges: Edge[] }
interface Diff { from: { revision: number; at: string }; to: { revision: number; at: string }; added: Edge[]; revoked: Edge[]; expired: Edge[]; principals_added: Principal[]; principals_revoked: Principal[] }

function edgeDetails(e: Edge): HTMLElement {
  return h('div', { class: 'edge-card' }, h('h3', {}, 'Edge ', edgeLink(e.id)), dl([
    ['Kind', e.kind], ['From → to', h('span', {}, principalLink(e.from), ' → ', e.kind === 'owns' ? h('code', {}, e.to) : principalLink(e.to))],
    ['Scope', scopeText(e)], ['Creator', e.creator], ['Reason', e.reason], ['Created', time(e.created_at)],
    ['Window', h('span', {}, time(e.not_before), ' – ', time(e.expires_at))], ['Revoked', time(e.revoked_at)],
  ]));
}

export function graphPage(route: Route, ctx: PageContext): HTMLElement {
  const p = route.params;
  const at = p.get('at') ?? '';
  const from = p.get('from') ?? '';
  const to = p.get('to') ?? '';
  const diffing = from !== '';
  const field = (name: string, label: string, value: string, hint: string) =>
    h('label', { class: 'field' }, h('span', {}, label), h('input', { name, value, placeholder: hint, inputmode: 'numeric', 'aria-describedby': 'graph-hint' }));
  const atForm = h('form', { class: 'filters', 'aria-label': 'Graph at a revision' },
    field('at', 'At revision or time', at, 'now'), h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'primary' }, 'Show')));
  atForm.addEventListener('submit', (ev) => { ev.preventDefault(); const v = String(new FormData(atForm).get('at') ?? '').trim(); navigate('graph', v ? { at: v } : {}); });
  const diffForm = h('form', { class: 'filters', 'aria-label': 'Diff between two revisions' },
    field('from', 'Diff from', from, 'revision'), field('to', 'to', to, 'now'),
    h('div', { class: 'field actions' }, h('button', { type: 'submit', class: 'primary', id: 'diff-button' }, 'Compare')));
  diffForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const d = new FormData(diffForm);
    const f = String(d.get('from') ?? '').trim();
    const t = String(d.get('to') ?? '').trim();
    navigate('graph', f ? { from: f, ...(t ? { to: t } : {}) } : {});
  });
  const info = h('div', { id: 'graph-info', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Loading…'));
  const box = h('div', { class: 'graph-box', id: 'authority-graph', role: 'img', 'aria-label': 'The authority graph; the edge lists below carry the same information' });
  const detail = h('div', { id: 'graph-edge-detail', 'aria-live': 'polite' });
  const diffBox = h('div', { id: 'graph-diff' });
  const listBox = h('div', { id: 'graph-edges' });
  let cy: cytoscape.Core | null = null;
  ctx.onLeave(() => cy?.destroy());
  const focus = p.get('focus') ?? '';
  const focusForm = h('form', { class: 'filters', 'aria-label': 'Focus on a principal' },
    h('label', { class: 'field' }, h('span', {}, 'Focus on principal'), h('input', { name: 'focus', value: focus, placeholder: 'seo-agent-7', autocomplete: 'off' })),
    h('div', { class: 'field actions' }, h('button', { type: 'submit' }, 'Focus'), h('button', { type: 'reset' }, 'Show all')));
  const showFocus = (id: string) => {
    if (!cy) return;
    if (!id) return clearFocus(cy);
    fill(detail, focusOn(cy, id)
      ? h('p', {}, 'Showing ', principalLink(id), ' and every principal above or below it. ', h('a', { href: `#/principal/${encodeURIComponent(id)}` }, 'Open its page →'))
      : h('p', { class: 'error' }, `No principal “${id}” in this graph.`));
  };
  focusForm.addEventListener('submit', (ev) => { ev.preventDefault(); showFocus(String(new FormData(focusForm).get('focus') ?? '').trim()); });
  focusForm.addEventListener('reset', () => { if (cy) clearFocus(cy); fill(detail); });

  void (async () => {
    try {
      const diff = diffing ? await api<Diff>(`/v1/graph/diff${q({ from, to })}`) : null;
      const g = await api<GraphExport>(`/v1/graph${q({ at: diff ? String(diff.to.revision) : at })}`);
      const marks = new Map<string, EdgeMark>();
      if (diff) {
        for (const e of diff.added) marks.set(e.id, 'added');
        for (const e of diff.expired) marks.set(e.id, 'expired');
        for (const e of diff.revoked) marks.set(e.id, 'revoked');
      }
      const shown: DrawnEdge[] = g.edges
        .filter((e) => marks.has(e.id) || e.revoked_at === null)
        .map((e) => ({ edge: e, mark: marks.get(e.id) ?? (diff ? 'unchanged' as const : null), label: `${e.id}` }));
      fill(info, h('p', {}, `Graph revision ${g.revision}: ${g.principals.length} principals, ${shown.length} edges shown${diff ? ` (diff from revision ${diff.from.revision} to ${diff.to.revision}: ${diff.added.length} added, ${diff.revoked.length} revoked, ${diff.expired.length} expired)` : ''}.`),
        h('ul', { class: 'legend', 'aria-label': 'Legend' },
          diff ? [h('li', { class: 'lg-added' }, 'added'), h('li', { class: 'lg-revoked' }, 'revoked'), h('li', { class: 'lg-expired' }, 'expired')]
            : [h('li', { class: 'lg-grant' }, 'grant'), h('li', { class: 'lg-delegate' }, 'delegate'), h('li', { class: 'lg-owns' }, 'owns'), h('li', { class: 'lg-approves' }, 'approves'), h('li', { class: 'lg-preempts' }, 'preempts')]));
      // The same edges as a list: for the keyboard, screen readers and searching the page.
      fill(listBox, h('details', {}, h('summary', {}, `All ${shown.length} edges as a list`),
        table('Edges', ['Edge', 'Kind', 'From → to', 'Scope', 'Reason', 'Expires'], shown.map(({ edge: e }) => [
          edgeLink(e.id), e.kind, h('span', {}, principalLink(e.from), ' → ', e.kind === 'owns' ? h('code', {}, e.to) : principalLink(e.to)), scopeText(e), e.reason, time(e.expires_at),
        ]))));
      cy = drawGraph(box, g.principals.map((x) => ({ id: x.id, kind: x.kind, revoked: x.revoked_at !== null })), shown,
        (e) => fill(detail, edgeDetails(e)), (id) => showFocus(id));
      if (focus) showFocus(focus);
      if (diff) {
        const rows = (list: Edge[], what: string) => list.map((e) => [what, edgeLink(e.id), e.kind, h('span', {}, principalLink(e.from), ' → ', principalLink(e.to)), e.reason, time(what === 'revoked' ? e.revoked_at : what === 'expired' ? e.expires_at : e.created_at)]);
        fill(diffBox, table('Changes', ['Change', 'Edge', 'Kind', 'From → to', 'Reason', 'When'], [...rows(diff.added, 'added'), ...rows(diff.revoked, 'revoked'), ...rows(diff.expired, 'expired')], { empty: 'No edge changed between these revisions.', id: 'diff-table' }),
          diff.principals_added.length || diff.principals_revoked.length
            ? h('p', {}, `Principals added: ${diff.principals_added.map((x) => x.id).join(', ') || 'none'}; revoked: ${diff.principals_revoked.map((x) => x.id).join(', ') || 'none'}.`) : null);
      }
    } catch (e) {
      fill(info, errorBox(e));
    }
  })();
  return h('div', {}, h('h1', {}, 'Authority graph'),
    section('View', h('p', { class: 'muted', id: 'graph-hint' }, 'A revision number (see a principal\'s time slider) or an RFC 3339 time; empty means now.'), h('div', { class: 'view-forms' }, atForm, diffForm)),
    section(diffing ? 'Diff' : 'Graph', info, focusForm, h('div', { class: 'toolbar-row' }, viewButtons(() => cy), exportButtons(() => cy, 'authority-graph')), box, detail, diffing ? diffBox : null, listBox));
}

export function edgePage(route: Route, _ctx: PageContext): HTMLElement {
  const id = route.arg ?? '';
  const root = h('div', {}, h('h1', {}, 'Edge ', h('code', {}, id)), h('p', { class: 'muted' }, 'Loading…'));
  void (async () => {
    try {
      const { edge } = await api<{ edge: Edge }>(`/v1/edges/${encodeURIComponent(id)}`);
      fill(root, h('h1', {}, 'Edge ', h('code', {}, edge.id)), section('Edge', edgeDetails(edge)),
        edge.revoked_at === null ? impactSection({ revoke: { edge: edge.id } }, `edge ${edge.id}`) : null);
    } catch (e) {
      fill(root, h('h1', {}, 'Edge ', h('code', {}, id)), errorBox(e));
    }
  })();
  return root;
}
