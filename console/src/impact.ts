import { api, type ImpactReport } from './api.js';
import { edgeLink, errorBox, fill, h, principalLink, section, table } from './dom.js';

/** The "Impact" button of the edge and principal pages: POST /v1/impact (computes on a copy; changes nothing). */
export function impactSection(change: { revoke: { edge: string } | { principal: string } }, what: string): HTMLElement {
  const out = h('div', { class: 'impact-result', 'aria-live': 'polite' });
  const button = h('button', { type: 'button', class: 'primary', id: 'impact-button' }, `Impact of revoking ${what}`) as HTMLButtonElement;
  button.addEventListener('click', async () => {
    button.disabled = true;
    fill(out, h('p', { class: 'muted' }, 'Computing on a copy of the graph…'));
    try {
      fill(out, renderImpact(await api<ImpactReport>('/v1/impact', { method: 'POST', body: change })));
    } catch (e) {
      fill(out, errorBox(e));
    } finally {
      button.disabled = false;
    }
  });
  return section('Impact analysis',
    h('p', { class: 'muted' }, 'Who would lose what if this were revoked: computed on a copy of the graph, nothing is changed.'),
    button, out);
}

export function renderImpact(r: ImpactReport): HTMLElement {
  const caps = (list: ImpactReport['lost']) => list.flatMap((p) => p.capabilities.map((c) => [
    principalLink(p.principal), c.action, h('code', {}, c.resource), c.environment, c.fields.includes('*') ? 'every field' : c.fields.join(', '),
    h('span', {}, c.via.map((chain, i) => h('span', { class: 'chain' }, i > 0 ? ' · ' : '', chain.map((id, j) => [j > 0 ? ' → ' : '', edgeLink(id)])))),
  ]));
  return h('div', { id: 'impact-report' },
    h('p', {}, `Graph revision ${r.graph_revision}; ${r.principals_examined} principal(s) examined.`),
    h('h3', {}, 'Capabilities lost'),
    table('Capabilities lost', ['Principal', 'Action', 'Resource', 'Environment', 'Fields', 'Through'], caps(r.lost), { empty: 'No principal loses anything.', id: 'impact-lost' }),
    r.gained.length ? [h('h3', {}, 'Capabilities gained'), table('Capabilities gained', ['Principal', 'Action', 'Resource', 'Environment', 'Fields', 'Through'], caps(r.gained))] : null,
    h('h3', {}, 'Leases that would end at their next renewal'),
    table('Leases ending', ['Lease', 'Holder', 'Keys', 'Why'], r.leases_ending.map((l) => [h('code', {}, l.lease_id), principalLink(l.holder), l.keys.join(', '), `${l.code}: ${l.reason}`]), { empty: 'No live lease is affected.' }),
    h('h3', {}, 'Delegations that would become orphans'),
    table('Orphaned delegations', ['Edge', 'From', 'To', 'Why'], r.orphaned_delegations.map((o) => [edgeLink(o.edge.id), principalLink(o.edge.from), principalLink(o.edge.to), o.reasons.join('; ')]), { empty: 'None.' }),
    h('h3', {}, 'Approvals that would stop counting'),
    table('Approvals ending', ['Edge', 'From', 'To', 'Why'], r.approvals_ending.map((o) => [edgeLink(o.edge.id), principalLink(o.edge.from), principalLink(o.edge.to), o.reasons.join('; ')]), { empty: 'None.' }),
  );
}
