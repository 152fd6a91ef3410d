import { api, q } from '../api.js';
import { errorBox, fill, h, leaseStateBadge, principalLink, section, table, time } from '../dom.js';
import type { PageContext, Route } from '../router.js';

interface LeaseRecord { key: string; holderIdentity: string | null; leaseDurationSeconds: number | null; acquireTime: string | null; renewTime: string | null; leaseTransitions: number; epoch: number; expiresAt: string | null; leaseId: string | null; priority: number | null; state: string; preemptedBy: string | null }
interface Queue { key: string; waiters: { ticket: number; holder: string; priority: number; enqueued_at: string; deadline: string }[] }
interface Incident { id: string; declared_by: string; reason: string; environment: string | null; declared_at: string; ends_at: string; resolved_at: string | null }

const REFRESH_MS = 3000;

/** Live leases, wait queues and incidents, refreshed every 3 s. */
export function coordinationPage(_route: Route, ctx: PageContext): HTMLElement {
  const leases = h('div', { id: 'leases' }, h('p', { class: 'muted' }, 'Loading…'));
  const queues = h('div', { id: 'queues' });
  const incidents = h('div', { id: 'incidents' });
  const showAll = h('input', { type: 'checkbox', id: 'show-free' }) as HTMLInputElement;
  // Every key ever leased comes a page at a time (GET /v1/leases pages by key): the page shown starts after this key.
  let after: string | undefined;
  let timer: number | undefined;
  let left = false;
  const pager = h('div', { id: 'leases-pages', class: 'field actions' });
  const load = async () => {
    try {
      const [l, qs, inc] = await Promise.all([
        // Only the held keys unless asked for all: every key ever leased may be millions.
        api<{ leases: LeaseRecord[]; next: string | null }>(showAll.checked ? `/v1/leases${q({ after })}` : '/v1/leases?state=HELD'), api<{ queues: Queue[] }>('/v1/leases/queues'), api<{ incidents: Incident[] }>('/v1/incidents'),
      ]);
      if (left) return;
      fill(leases, table('Leases', ['Key', 'State', 'Holder', 'Fencing epoch', 'Expires', 'Renewed', 'Transitions', 'Lease'], l.leases.map((x) => [
        h('code', {}, x.key), leaseStateBadge(x.state),
        x.holderIdentity ? principalLink(x.holderIdentity) : '—', String(x.epoch), time(x.expiresAt), time(x.renewTime), String(x.leaseTransitions),
        x.leaseId ? h('code', {}, x.leaseId.slice(0, 12)) : '—',
      ]), { empty: showAll.checked ? (after === undefined ? 'No key was ever leased.' : `No key after ${after}.`) : 'No lease is held right now.' }));
      const next = l.next;
      fill(pager,
        after !== undefined ? h('button', { type: 'button', id: 'leases-first', onclick: () => turn(undefined) }, '← First keys') : null,
        next !== null ? h('button', { type: 'button', id: 'leases-next', onclick: () => turn(next) }, `Keys after ${next} →`) : null);
      fill(queues, table('Wait queues', ['Key', 'Position', 'Waiter', 'Priority', 'Waiting since', 'Deadline'], qs.queues.flatMap((k) => k.waiters.map((w, i) => [
        h('code', {}, k.key), String(i + 1), principalLink(w.holder), String(w.priority), time(w.enqueued_at), time(w.deadline),
      ])), { empty: 'Nobody is waiting.' }));
      fill(incidents, table('Incidents', ['Incident', 'Environment', 'Declared by', 'Reason', 'Declared', 'Ends'], inc.incidents.map((i) => [
        i.id, i.environment ?? 'not recorded', principalLink(i.declared_by), i.reason, time(i.declared_at), time(i.ends_at),
      ]), { empty: 'No active incident.' }));
    } catch (e) {
      fill(leases, errorBox(e));
    }
    if (!left) timer = window.setTimeout(load, REFRESH_MS);
  };
  const turn = (to: string | undefined) => { after = to; window.clearTimeout(timer); void load(); };
  showAll.addEventListener('change', () => turn(undefined));
  void load();
  ctx.onLeave(() => { left = true; window.clearTimeout(timer); });
  return h('div', {}, h('h1', {}, 'Coordination'),
    section('Leases', h('label', { class: 'check' }, showAll, ' Show free and expired keys too'), leases, pager),
    section('Wait queues', queues), section('Incidents', incidents));
}
