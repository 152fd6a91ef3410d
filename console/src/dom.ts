/** A tiny element builder: text is always set as text (never parsed as HTML), so nothing from the API can inject markup. */
export type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.replace(/^on/, ''), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** A time in the viewer's zone, UTC on hover. */
export function time(iso: string | null | undefined): Node {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  return h('time', { datetime: iso, title: `${d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, '').replace('Z', '')} UTC` }, d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' }));
}

export function link(href: string, ...children: Child[]): HTMLAnchorElement {
  return h('a', { href }, ...children);
}

export const principalLink = (id: string) => link(`#/principal/${encodeURIComponent(id)}`, id);
export const edgeLink = (id: string) => link(`#/edge/${encodeURIComponent(id)}`, id);
export const receiptLink = (id: string, text?: string) => link(`#/receipt/${encodeURIComponent(id)}`, text ?? id);

export function badge(text: string, kind: string): HTMLElement {
  return h('span', { class: `badge badge-${kind.toLowerCase()}` }, text);
}

/** A key's lease state (HELD, EXPIRED, FREE), coloured like the receipt statuses it leads to. */
export function leaseStateBadge(state: string): HTMLElement {
  return badge(state, state === 'HELD' ? 'completed' : state === 'EXPIRED' ? 'failed' : 'pending');
}

/** A table in a horizontally scrolling box (narrow screens), with a caption for screen readers. */
export function table(caption: string, head: string[], rows: Child[][], opts: { empty?: string; id?: string } = {}): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, opts.empty ?? 'Nothing to show.');
  return h('div', { class: 'table-wrap', id: opts.id },
    h('table', {},
      h('caption', { class: 'sr-only' }, caption),
      h('thead', {}, h('tr', {}, head.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => h('td', { 'data-label': head[i] || null }, c)))))));
}

export function section(title: string, ...children: Child[]): HTMLElement {
  const id = `s-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;
  return h('section', { class: 'card', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

export function dl(pairs: [string, Child][]): HTMLElement {
  return h('dl', { class: 'facts' }, pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function errorBox(e: unknown): HTMLElement {
  const err = e as { code?: string; message?: string };
  return h('div', { class: 'error', role: 'alert' }, err.code ? h('strong', {}, `${err.code}: `) : null, err.message ?? String(e));
}
