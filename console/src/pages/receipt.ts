import type cytoscape from 'cytoscape';
import { api, type Edge, type Receipt } from '../api.js';
import { badge, dl, edgeLink, errorBox, fill, h, principalLink, section, table, time } from '../dom.js';
import { drawGraph, exportButtons } from '../graph-view.js';
import type { PageContext, Route } from '../router.js';

/** A revocation since the decision: when, by whom, why. */
interface Revocation { revoked_at: string; revoked_by: string | null; reason: string | null }
interface Why { receipt: Receipt; graph_revision: number | null; chain: { edge: Edge; now: Revocation | null }[]; principals_revoked: (Revocation & { principal: string })[] }
/** GET /v1/audit/verify: every per-key chain, the index, the latest signed checkpoint. */
interface Verdict { ok: boolean; entries: number; chains: number; head: string; chain?: string; firstBadPos?: number; problem?: string; checkpoint?: { seq: number; archived: number } }

/** "revoked TIME by WHO: REASON", marked bad. */
function revoked(r: Revocation): HTMLElement {
  return h('span', { class: 'bad' }, 'revoked ', time(r.revoked_at), r.revoked_by === null ? '' : ` by ${r.revoked_by}`, r.reason === null ? '' : `: ${r.reason}`);
}

export function scopeText(e: Edge): string {
  const s = e.scope;
  return `${s.actions.join(', ')} on ${s.resources.join(', ')} in ${s.environments.join(', ')}; fields ${s.fields.join(', ')}${s.constraints.risk_max !== undefined ? `; risk ≤ ${String(s.constraints.risk_max)}` : ''}`;
}

export function receiptPage(route: Route, ctx: PageContext): HTMLElement {
  const id = route.arg ?? '';
  const root = h('div', {}, h('h1', {}, 'Receipt ', h('code', {}, id)), h('p', { class: 'muted' }, 'Loading…'));
  let cy: cytoscape.Core | null = null;
  ctx.onLeave(() => cy?.destroy());
  void (async () => {
    try {
      const why = await api<Why>(`/v1/receipts/${encodeURIComponent(id)}/why`);
      const r = why.receipt;
      const graphBox = h('div', { class: 'graph-box small', id: 'chain-graph', role: 'img', 'aria-label': `Delegation chain: ${['governance', ...why.chain.map((l) => l.edge.to)].join(' to ')}` });
      const edgeDetail = h('div', { id: 'edge-detail', 'aria-live': 'polite' });
      const verdictBox = h('div', { id: 'chain-verdict' }, h('p', { class: 'muted' }, 'Verifying the hash chain…'));
      fill(root,
        h('h1', {}, 'Receipt ', h('code', {}, r.receipt_id)),
        section('Decision',
          dl([
            ['Status', badge(r.status, r.status)],
            ['Principal', principalLink(r.principal)],
            ['Action', r.action],
            ['Resource', h('code', {}, r.resource_key)],
            ['Fields', r.fields.join(', ') || '—'],
            ['Decision', h('code', {}, r.decision_id ?? '—')],
            ['Policy revision', h('code', {}, r.policy_revision ?? '—')],
            ['Graph revision', r.graph_revision === null ? '—' : h('a', { href: `#/graph?at=${r.graph_revision}` }, String(r.graph_revision))],
            ['Owners', r.owners.length ? h('span', {}, r.owners.map((o, i) => [i ? ', ' : '', principalLink(o)])) : '—'],
            ['Authority / ownership epoch', `${r.authority_epoch ?? '—'} / ${r.ownership_epoch ?? '—'}`],
            ['Lease', r.lease_id ? h('span', {}, h('code', {}, r.lease_id), ` · fencing epoch ${r.lease_epoch ?? '—'}`) : 'none (no lease required)'],
            ['Version', h('span', { id: 'versions' }, `${r.expected_version ?? '—'} → ${r.final_version ?? '—'}`)],
            ['Conflicts', r.conflicts.length ? h('ul', {}, r.conflicts.map((c) => h('li', {}, `${c.kind}${c.detail ? `: ${c.detail}` : ''}`))) : 'none'],
            ['Upstream status', r.upstream_status === null ? '—' : String(r.upstream_status)],
            ['Error', r.error ? `${r.error.code}: ${r.error.message}` : '—'],
            ['Created', time(r.created_at)],
            ['Completed', time(r.completed_at)],
          ])),
        section('Delegation chain',
          h('p', { class: 'muted' }, `Each edge as it was at graph revision ${why.graph_revision ?? '—'}, when the decision was made. Select an edge in the drawing or the table.`),
          exportButtons(() => cy, `receipt-${r.receipt_id}-chain`),
          graphBox,
          edgeDetail,
          table('Chain edges', ['Edge', 'Kind', 'From → to', 'Scope', 'Creator', 'Reason', 'Created', 'Window', 'Now'], why.chain.map(({ edge: e, now }) => [
            edgeLink(e.id), e.kind, h('span', {}, principalLink(e.from), ' → ', principalLink(e.to)), scopeText(e), e.creator, e.reason, time(e.created_at),
            h('span', {}, time(e.not_before), ' – ', time(e.expires_at)),
            now ? revoked(now) : e.revoked_at ? h('span', { class: 'bad' }, 'revoked') : 'unchanged',
          ]), { empty: 'This receipt has no chain (it was rejected before a decision).', id: 'chain-edges' }),
          why.principals_revoked.length === 0 ? null : table('Principals of the chain revoked since', ['Principal', 'Revoked'],
            why.principals_revoked.map((p) => [principalLink(p.principal), revoked(p)]), { id: 'chain-principals-revoked' })),
        section('Hash chain',
          h('p', { class: 'muted' }, 'Where this receipt sits in the tamper-evident receipt log.'),
          verdictBox,
          table('Entries', ['Position', 'Seq', 'Kind', 'At', 'Previous hash', 'Hash'], r.entries.map((e) => [String(e.pos), String(e.seq), String(e.kind ?? ''), time(e.at), h('code', { title: String(e.prev_hash) }, String(e.prev_hash ?? '').slice(0, 16)), h('code', { title: String(e.hash) }, String(e.hash ?? '').slice(0, 16))]))),
      );
      if (why.chain.length) {
        const show = (e: Edge) => fill(edgeDetail, h('div', { class: 'edge-card' }, h('h3', {}, 'Edge ', edgeLink(e.id)), dl([
          ['Kind', e.kind], ['From → to', `${e.from} → ${e.to}`], ['Scope', scopeText(e)], ['Creator', e.creator], ['Reason', e.reason],
          ['Created', time(e.created_at)], ['Not before', time(e.not_before)], ['Expires', time(e.expires_at)], ['Max depth', e.max_depth === null ? '—' : String(e.max_depth)],
        ])));
        cy = drawGraph(graphBox, [{ id: 'governance', kind: 'governance' }, { id: r.principal, focus: true }],
          why.chain.map((l) => ({ edge: l.edge, mark: 'chain' as const, label: `${l.edge.id} (${l.edge.kind})` })), show, (p) => { location.hash = `#/principal/${encodeURIComponent(p)}`; });
      } else graphBox.remove();
      try {
        const v = await api<Verdict>('/v1/audit/verify');
        const positions = r.entries.map((e) => e.pos);
        const against = v.checkpoint ? ` against signed checkpoint ${v.checkpoint.seq}` : ' (no signed checkpoint yet)';
        const mine = v.chain === r.hash_chain;
        fill(verdictBox, v.ok
          ? h('p', { class: 'good' }, `Verified${against}: ${v.chains} chains, ${v.entries} entries sound, heads root ${v.head.slice(0, 16)}…; this receipt is entries ${positions.join(', ')} of the chain of ${r.hash_chain}.`)
          : v.chain === undefined
            ? h('p', { class: 'bad' }, `The log is BROKEN: ${v.problem}. The break is in no chain: do not rely on this receipt until it is resolved.`)
            : h('p', { class: 'bad' }, `The log is BROKEN in the chain of ${v.chain} at entry ${v.firstBadPos ?? '?'}: ${v.problem}. ${!mine ? 'This receipt is in another chain.' : v.firstBadPos !== undefined && v.firstBadPos <= Math.max(...positions) ? 'This receipt is at or after the break in its chain: do not trust it.' : 'This receipt is before the break in its chain.'}`));
      } catch (e) {
        fill(verdictBox, errorBox(e));
      }
    } catch (e) {
      fill(root, h('h1', {}, 'Receipt ', h('code', {}, id)), errorBox(e));
    }
  })();
  return root;
}
