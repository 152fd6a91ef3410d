import type cytoscape from 'cytoscape';
import { api, type Edge, type PresentedLease, type Receipt } from '../api.js';
import { badge, type Child, dl, edgeLink, errorBox, fill, h, leaseStateBadge, principalLink, receiptLink, section, table, time } from '../dom.js';
import { drawGraph, exportButtons } from '../graph-view.js';
import { href, type PageContext, type Route } from '../router.js';

/** A revocation since the decision: when, by whom, why. */
interface Revocation { revoked_at: string; revoked_by: string | null; reason: string | null }
interface Why { receipt: Receipt; graph_revision: number | null; chain: { edge: Edge; now: Revocation | null }[]; principals_revoked: (Revocation & { principal: string })[] }
/**
 * GET /v1/audit/verify: every per-key chain, the index, the latest signed checkpoint, and the graph event
 * log's hash chain; the whole answer, as its schema (src/http/routes/coordination.ts) has it.
 */
interface Verdict {
  ok: boolean; entries: number; chains: number; head: string; chain?: string; firstBadPos?: number; firstBadSeq?: number; problem?: string;
  /** `at` in RFC 3339; `jws` the checkpoint as signed and stored (compact JWS, checked offline with the JWKS). */
  checkpoint?: { seq: number; at: string; chains: number; root: string; archived: number; graph_revision?: number; graph_hash?: string; jws: string };
  graph?: { ok: boolean; events: number; revision: number; hash: string; unhashed: number; firstBadRevision?: number; problem?: string };
}

/** "revoked TIME by WHO: REASON", marked bad. */
function revoked(r: Revocation): HTMLElement {
  return h('span', { class: 'bad' }, 'revoked ', time(r.revoked_at), r.revoked_by === null ? '' : ` by ${r.revoked_by}`, r.reason === null ? '' : `: ${r.reason}`);
}

/**
 * A receipt's error. A DECISION_REPLAYED refusal names the receipt of the write that used the decision:
 * that receipt is a link, from the refusal's `used_by_receipt_id`; a refusal recorded before Writ kept that
 * field names it in its message only ("… receipt ID; …"), read from there.
 */
function errorFact(error: NonNullable<Receipt['error']>): Child {
  if (error.code !== 'DECISION_REPLAYED') return `${error.code}: ${error.message}`;
  const usedBy = error.used_by_receipt_id;
  if (usedBy !== undefined) {
    const link = receiptLink(usedBy);
    link.id = 'used-by-receipt';
    link.dataset.from = 'field';
    // The message names the same receipt: linked where it does, else the link follows it.
    const at = error.message.indexOf(`receipt ${usedBy}`);
    if (at < 0) return h('span', {}, `${error.code}: ${error.message} (used by receipt `, link, ')');
    const start = at + 'receipt '.length;
    return h('span', {}, `${error.code}: ${error.message.slice(0, start)}`, link, error.message.slice(start + usedBy.length));
  }
  const used = /\breceipt ([^\s;,]+)/.exec(error.message);
  if (used === null) return `${error.code}: ${error.message}`;
  const link = receiptLink(used[1]!);
  link.id = 'used-by-receipt';
  link.dataset.from = 'message';
  return h('span', {}, `${error.code}: ${error.message.slice(0, used.index + 'receipt '.length)}`, link, error.message.slice(used.index + used[0].length));
}

export function scopeText(e: Edge): string {
  const s = e.scope;
  return `${s.actions.join(', ')} on ${s.resources.join(', ')} in ${s.environments.join(', ')}; fields ${s.fields.join(', ')}${s.constraints.risk_max !== undefined ? `; risk ≤ ${String(s.constraints.risk_max)}` : ''}`;
}

/** The Lease fact of a receipt that names none: a write that needed none, or a refusal (the lease it presented is below when it was the reason). */
function leaseNotHeld(r: Receipt): string {
  if (r.presented_lease) return 'refused: see Lease presented, below';
  return r.status === 'REJECTED' ? 'not recorded on this refusal' : 'none (no lease required)';
}

/**
 * Why a write was refused for a lease reason: the lease it presented (never its token) against each key's
 * epoch, holder and lease at the refusal. A presented epoch behind the key's is a fenced-out writer
 * (its lease expired or was preempted, and someone took the key since).
 */
function presentedLeaseSection(p: PresentedLease, code: string): HTMLElement {
  const presented = (k: PresentedLease['keys'][number]): Child => {
    if (k.presented_epoch === null) return h('span', { class: 'muted' }, 'none');
    if (k.presented_epoch < k.current_epoch) return h('span', { class: 'bad' }, `${k.presented_epoch} (stale: the key is at ${k.current_epoch})`);
    if (k.presented_epoch > k.current_epoch) return h('span', { class: 'bad' }, `${k.presented_epoch} (never issued: the key is at ${k.current_epoch})`);
    return String(k.presented_epoch);
  };
  const whose = (k: PresentedLease['keys'][number]): Child => {
    if (k.lease_id === null) return '—';
    const same = p.lease_id !== null && k.lease_id === p.lease_id;
    return h('span', {}, h('code', {}, k.lease_id), same ? ' (the one presented)' : h('span', { class: 'bad' }, ' (not the one presented)'));
  };
  return section('Lease presented',
    h('p', { class: 'muted' }, `Refused with ${code}: the lease this write presented, and each key as Writ found it at the refusal. The lease token itself is never recorded.`),
    dl([
      ['Lease presented', p.lease_id === null ? 'none (no lease id nor lease token)' : h('code', { id: 'presented-lease-id' }, p.lease_id)],
      ...(p.token_lease_id !== null && p.token_lease_id !== p.lease_id ? [['Its token names', h('span', { class: 'bad' }, h('code', {}, p.token_lease_id), ' (another lease than the one named)')] as [string, Child]] : []),
    ]),
    table('Keys at the refusal', ['Key', 'Fencing epoch presented', 'Current epoch', 'Holder', 'Lease on the key', 'State'], p.keys.map((k) => [
      h('code', {}, k.key), presented(k), String(k.current_epoch), k.holder === null ? h('span', { class: 'muted' }, 'nobody') : principalLink(k.holder), whose(k), leaseStateBadge(k.state),
    ]), { id: 'presented-keys', empty: 'The write needed no coordination key.' }));
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
            ['Decision', r.decision_id === null ? '—' : h('span', {}, h('code', {}, r.decision_id), ' · ',
              h('a', { href: href('receipts', null, { decision_id: r.decision_id }), id: 'decision-receipts' }, 'every receipt that presented it'))],
            ['Policy revision', h('code', {}, r.policy_revision ?? '—')],
            ['Graph revision', r.graph_revision === null ? '—' : h('a', { href: `#/graph?at=${r.graph_revision}` }, String(r.graph_revision))],
            ['Owners', r.owners.length ? h('span', {}, r.owners.map((o, i) => [i ? ', ' : '', principalLink(o)])) : '—'],
            ['Authority / ownership epoch', `${r.authority_epoch ?? '—'} / ${r.ownership_epoch ?? '—'}`],
            ['Lease', r.lease_id ? h('span', {}, h('code', {}, r.lease_id), ` · fencing epoch ${r.lease_epoch ?? '—'}`) : leaseNotHeld(r)],
            ['Version', h('span', { id: 'versions' }, `${r.expected_version ?? '—'} → ${r.final_version ?? '—'}`)],
            ['Conflicts', r.conflicts.length ? h('ul', {}, r.conflicts.map((c) => h('li', {}, `${c.kind}${c.detail ? `: ${c.detail}` : ''}`))) : 'none'],
            ['Upstream status', r.upstream_status === null ? '—' : String(r.upstream_status)],
            ['Error', r.error ? errorFact(r.error) : '—'],
            ['Created', time(r.created_at)],
            ['Completed', time(r.completed_at)],
          ])),
        r.presented_lease ? presentedLeaseSection(r.presented_lease, r.error?.code ?? 'REJECTED') : null,
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
        // The receipts sound, the graph's event log broken: the chain and edges shown above come from that log.
        const graphBroken = v.graph !== undefined && !v.graph.ok && v.problem === undefined;
        fill(verdictBox, v.ok
          ? h('p', { class: 'good' }, `Verified${against}: ${v.chains} chains, ${v.entries} entries sound, heads root ${v.head.slice(0, 16)}…; this receipt is entries ${positions.join(', ')} of the chain of ${r.hash_chain}; the graph's event log, ${v.graph?.events ?? 0} events, sound.`)
          : graphBroken
            ? h('p', { class: 'bad' }, `The receipts verify${against}, but the graph's event log is BROKEN at revision ${v.graph!.firstBadRevision ?? '?'}: ${v.graph!.problem}. The delegation chain and the edges shown here are read from that log: do not rely on them until it is resolved.`)
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
