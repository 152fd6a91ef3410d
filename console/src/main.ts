/**
 * The auditor's console: a read-only single page over the public API, signed in with a session
 * cookie obtained from a one-time link (`writ console`). Views are deep links in the fragment.
 */
import { api, ApiError, type Session } from './api.js';
import { errorBox, fill, h, time } from './dom.js';
import { coordinationPage } from './pages/coordination.js';
import { edgePage, graphPage } from './pages/graph.js';
import { principalPage } from './pages/principal.js';
import { receiptPage } from './pages/receipt.js';
import { receiptsPage } from './pages/receipts.js';
import { parseRoute, type PageContext, type Route } from './router.js';

const PAGES: Record<string, (route: Route, ctx: PageContext) => HTMLElement> = {
  receipts: receiptsPage, receipt: receiptPage, principal: principalPage, graph: graphPage, edge: edgePage, coordination: coordinationPage,
};
const TITLES: Record<string, string> = { receipts: 'Receipts', receipt: 'Receipt', principal: 'Principal', graph: 'Graph', edge: 'Edge', coordination: 'Coordination' };

const main = document.getElementById('main')!;
const nav = document.getElementById('nav')!;
const who = document.getElementById('who')!;
let leaving: (() => void)[] = [];

async function signIn(): Promise<void> {
  const m = /^#login=([A-Za-z0-9_.-]+)$/.exec(location.hash);
  if (!m) return;
  // The token leaves the address bar (and history) before anything else happens.
  history.replaceState(null, '', `${location.pathname}#/receipts`);
  await api<Session>('/v1/console/session', { method: 'POST', body: { token: m[1] } });
}

function signedOut(e?: unknown): void {
  nav.hidden = true;
  fill(who);
  fill(main, h('div', { class: 'card signin' },
    h('h1', {}, 'Sign in to the Writ console'),
    e ? errorBox(e) : null,
    h('p', {}, 'Run this on the Writ host and open the link it prints (it works once):'),
    h('pre', {}, h('code', {}, 'writ console                      # as governance\nwrit console --principal ID       # as a principal holding an audit grant')),
    h('p', { class: 'muted' }, 'The console is read-only: it can look, and compute the impact of a change, but never change anything.')));
  main.focus();
}

let policyStatus: HTMLElement | null = null;
/** Answers of /readyz are taken in the order they were asked (two views in quick succession), and shown only when they changed. */
let policyAsked = 0;
let policyShown = '';

function shortReason(reason: string): string {
  const last = reason.split('\n').map((l) => l.trim().replace(/^- /, '')).filter(Boolean).pop() ?? reason;
  return last.length <= 72 ? last : `…${last.slice(-72)}`;
}

/** The live policy revision, and a rebuilt bundle the service refused (GET /readyz), in the header: looked up at each view. */
async function showPolicy(): Promise<void> {
  if (!policyStatus) return;
  const asked = ++policyAsked;
  try {
    const r = await api<{ policy_revision: string; policy_refused?: { revision: string | null; reason: string; at: string } }>('/readyz');
    const key = JSON.stringify([r.policy_revision, r.policy_refused ?? null]);
    if (asked !== policyAsked || key === policyShown) return;
    policyShown = key;
    const live = h('span', { title: `the policy bundle deciding now: ${r.policy_revision}` }, h('span', { class: 'muted' }, 'policy '), h('code', {}, r.policy_revision.replace(/^sha256:/, '').slice(0, 8)));
    // The header stays one line: the reason's last line (Rego's message, or the last data problem), the whole of it on hover.
    const refused = r.policy_refused
      ? h('span', { class: 'policy-refused', title: r.policy_refused.reason },
          ` · rebuilt ${r.policy_refused.revision?.replace(/^sha256:/, '').slice(0, 8) ?? 'bundle'} refused `, time(r.policy_refused.at), `: ${shortReason(r.policy_refused.reason)}`)
      : null;
    fill(policyStatus, live, refused);
  } catch {
    if (asked !== policyAsked) return;
    policyShown = '';
    fill(policyStatus);
  }
}

function render(session: Session): void {
  void showPolicy();
  for (const fn of leaving) fn();
  leaving = [];
  const route = parseRoute(location.hash);
  const page = PAGES[route.name];
  for (const a of nav.querySelectorAll('a')) {
    const current = a.getAttribute('data-page') === route.name || (route.name === 'receipt' && a.getAttribute('data-page') === 'receipts');
    if (current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${TITLES[route.name] ?? 'Not found'}${route.arg ? ` ${route.arg}` : ''} · Writ console`;
  const ctx: PageContext = { session, onLeave: (fn) => leaving.push(fn) };
  fill(main, page ? page(route, ctx) : h('div', { class: 'card' }, h('h1', {}, 'Not found'), h('p', {}, `No view “${route.name}”.`)));
  main.focus({ preventScroll: true });
  window.scrollTo(0, 0);
}

async function start(): Promise<void> {
  let signInError: unknown = null;
  try {
    await signIn();
  } catch (e) {
    signInError = e;
  }
  let session: Session;
  try {
    session = await api<Session>('/v1/console/session');
  } catch (e) {
    return signedOut(signInError ?? (e instanceof ApiError && e.status === 401 ? null : e));
  }
  if (signInError) {
    // A spent link while a session is open: say so, then carry on with the session.
    console.warn(signInError);
  }
  nav.hidden = false;
  const signOut = h('button', { type: 'button', class: 'link-button', id: 'sign-out' }, 'Sign out');
  signOut.addEventListener('click', async () => {
    await api('/v1/console/session', { method: 'DELETE' }).catch(() => undefined);
    signedOut();
  });
  const principalForm = h('form', { class: 'jump', role: 'search', 'aria-label': 'Open a principal' },
    h('label', { for: 'jump-principal', class: 'sr-only' }, 'Principal id'),
    h('input', { id: 'jump-principal', name: 'principal', placeholder: 'principal id…', autocomplete: 'off' }),
    h('button', { type: 'submit' }, 'Open'));
  principalForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = String(new FormData(principalForm).get('principal') ?? '').trim();
    if (v) location.hash = `#/principal/${encodeURIComponent(v)}`;
  });
  const policy = h('span', { class: 'policy', role: 'status' });
  fill(who, principalForm, policy, h('span', { class: 'session' }, h('span', { class: 'muted' }, 'Signed in as '), h('strong', {}, session.principal), session.auditor ? ' (auditor)' : ' (own records only)'), signOut);
  policyStatus = policy;
  window.addEventListener('hashchange', () => { if (location.hash.startsWith('#/')) render(session); });
  window.addEventListener('writ:session-ended', (ev) => {
    for (const fn of leaving) fn();
    leaving = [];
    signedOut((ev as CustomEvent).detail);
  });
  if (!location.hash || location.hash === '#' || location.hash === '#/') history.replaceState(null, '', `${location.pathname}#/receipts`);
  render(session);
}

// The skip link moves focus without touching the fragment (which holds the view).
document.querySelector('a.skip')?.addEventListener('click', (ev) => { ev.preventDefault(); main.focus(); });

void start();
