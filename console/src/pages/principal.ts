import { api, q, type Capability, type Edge, type GraphEvent } from '../api.js';
import { badge, edgeLink, errorBox, fill, h, principalLink, section, table, time } from '../dom.js';
import { impactSection } from '../impact.js';
import type { PageContext, Route } from '../router.js';

interface Capabilities { principal: string; at: string; graph_revision: number; capabilities: Capability[] }

export function describeEvent(e: GraphEvent): string {
  const what = e.type === 'edge.created' ? `${e.kind ?? 'edge'} ${e.subject} created (${e.from} → ${e.to})`
    : e.type === 'edge.revoked' ? `${e.kind ?? 'edge'} ${e.subject} revoked (${e.from} → ${e.to})`
      : e.type === 'principal.created' ? `principal ${e.subject} registered`
        : e.type === 'principal.revoked' ? `principal ${e.subject} revoked` : `keys of ${e.subject} set`;
  return `${what}${e.reason ? `: “${e.reason}”` : ''}`;
}

export function capabilityTable(caps: Capability[], id: string): HTMLElement {
  return table('Capabilities', ['', 'Actions', 'Resources', 'Environments', 'Fields', 'Through', 'Why not'], caps.map((c) => [
    c.valid ? badge('valid', 'completed') : badge('not valid', 'rejected'),
    c.scope.actions.join(', '), h('code', {}, c.scope.resources.join(', ')), c.scope.environments.join(', '), c.scope.fields.join(', '),
    h('span', { class: 'chain' }, c.chain.map((e, i) => [i ? ' → ' : '', edgeLink(e.id)])),
    c.problems.join('; ') || '—',
  ]), { empty: 'No chain reaches this principal: it can do nothing.', id });
}

export function principalPage(route: Route, ctx: PageContext): HTMLElement {
  const id = route.arg ?? ctx.session.principal;
  const atParam = route.params.get('at');
  const nowBox = h('div', { id: 'caps-now' }, h('p', { class: 'muted' }, 'Loading…'));
  const atBox = h('div', { id: 'caps-at', 'aria-live': 'polite' });
  const sliderBox = h('div', { class: 'slider-box' });
  const expiringBox = h('div', { id: 'expiring' });
  const orphansBox = h('div', { id: 'orphans' });
  const root = h('div', {},
    h('h1', {}, 'Principal ', h('code', {}, id)),
    section('Capabilities now', h('p', { class: 'muted' }, 'Every chain from governance to this principal, judged by the policy now.'), nowBox),
    section('Capabilities at a time', h('p', { class: 'muted' }, 'Move along the graph\'s event log (arrow keys, Home, End): the capabilities as they were just after each change — the same machinery as `writ can --at`.'), sliderBox, atBox),
    section('Delegations expiring within 7 days', expiringBox),
    section('Orphaned edges', h('p', { class: 'muted' }, 'Live edges from or to this principal that count for nothing or for less than they say: delegations whose delegator no longer holds what it gave, and edges part of whose scope can never apply under the policy\'s registry.'), orphansBox),
    id === 'governance' ? null : impactSection({ revoke: { principal: id } }, `principal ${id}`),
  );
  let left = false;
  ctx.onLeave(() => (left = true));

  const loadAt = async (iso: string, label: Node) => {
    try {
      const c = await api<Capabilities>(`/v1/principals/${encodeURIComponent(id)}/capabilities${q({ at: iso })}`);
      if (left) return;
      fill(atBox, h('p', {}, label), capabilityTable(c.capabilities, 'caps-at-table'));
    } catch (e) {
      fill(atBox, errorBox(e));
    }
  };

  void (async () => {
    try {
      const now = await api<Capabilities>(`/v1/principals/${encodeURIComponent(id)}/capabilities`);
      fill(nowBox, h('p', { class: 'muted' }, 'As of graph revision ', String(now.graph_revision), ', ', time(now.at), '.'), capabilityTable(now.capabilities, 'caps-now-table'));
    } catch (e) {
      fill(nowBox, errorBox(e));
    }
    try {
      const events: GraphEvent[] = [];
      let after = 0;
      for (;;) {
        const page = await api<{ events: GraphEvent[]; next: number | null }>(`/v1/graph/events${q({ after, limit: 5000 })}`);
        events.push(...page.events);
        if (page.next === null || events.length >= 20_000) break;
        after = page.next;
      }
      if (left) return;
      if (events.length === 0) return fill(sliderBox, h('p', { class: 'muted' }, 'The graph has no events.'));
      let initial = events.length - 1;
      if (atParam) {
        const t = Date.parse(atParam);
        const i = events.findLastIndex((e) => Date.parse(e.at) <= t);
        if (i >= 0) initial = i;
      }
      const slider = h('input', { type: 'range', id: 'time-slider', min: 0, max: events.length - 1, step: 1, value: initial, 'aria-describedby': 'slider-label' }) as HTMLInputElement;
      const labelText = h('span', { id: 'slider-label' });
      const describe = (i: number) => {
        const e = events[i]!;
        slider.setAttribute('aria-valuetext', `revision ${e.revision}, ${new Date(e.at).toLocaleString()}: ${describeEvent(e)}`);
        fill(labelText, h('strong', {}, `Revision ${e.revision}`), ' · ', time(e.at), ' · ', describeEvent(e));
      };
      let debounce: number | undefined;
      const onMove = () => {
        const i = Number(slider.value);
        describe(i);
        window.clearTimeout(debounce);
        debounce = window.setTimeout(() => {
          const e = events[i]!;
          history.replaceState(null, '', `#/principal/${encodeURIComponent(id)}?at=${encodeURIComponent(e.at)}`);
          void loadAt(e.at, h('span', {}, 'Just after revision ', String(e.revision), ' (', time(e.at), ')'));
        }, 150);
      };
      slider.addEventListener('input', onMove);
      fill(sliderBox,
        h('label', { for: 'time-slider', class: 'slider-title' }, 'Point in time (graph event)'),
        slider,
        h('div', { class: 'slider-ends muted' }, h('span', {}, time(events[0]!.at)), h('span', {}, time(events[events.length - 1]!.at))),
        h('p', { class: 'slider-label' }, labelText));
      describe(initial);
      const e = events[initial]!;
      void loadAt(e.at, h('span', {}, 'Just after revision ', String(e.revision), ' (', time(e.at), ')'));
    } catch (e) {
      fill(sliderBox, (e as { code?: string }).code === 'FORBIDDEN'
        ? h('p', { class: 'notice' }, 'The time slider reads the whole graph\'s event log: it needs an audit grant (audit_read on audit:principal:* in every environment).')
        : errorBox(e));
    }
    const edgeRows = (edges: Edge[]) => edges.map((e) => [edgeLink(e.id), e.kind, h('span', {}, principalLink(e.from), ' → ', principalLink(e.to)), time(e.expires_at), e.reason]);
    try {
      const x = await api<{ edges: Edge[] }>(`/v1/audit/expiring${q({ principal: id, within_ms: 7 * 86_400_000 })}`);
      fill(expiringBox, table('Expiring delegations', ['Edge', 'Kind', 'From → to', 'Expires', 'Reason'], edgeRows(x.edges), { empty: 'Nothing expires within 7 days.' }));
    } catch (e) {
      fill(expiringBox, errorBox(e));
    }
    try {
      const o = await api<{ orphans: { edge: Edge; violations: string[] }[] }>(`/v1/audit/orphans${q({ principal: id })}`);
      // An ownership's `to` is managed state (a resource pattern), not a principal.
      fill(orphansBox, table('Orphans', ['Edge', 'From → to', 'Why'], o.orphans.map((x) => [edgeLink(x.edge.id), h('span', {}, principalLink(x.edge.from), ' → ', x.edge.kind === 'owns' ? h('code', {}, x.edge.to) : principalLink(x.edge.to)), x.violations.join('; ')]), { empty: 'No orphaned edge.' }));
    } catch (e) {
      fill(orphansBox, errorBox(e));
    }
  })();
  return root;
}
