import type { Session } from './api.js';

/** A view of the console: `#/name/arg?query` (deep links: paste one into a ticket and it opens the same view). */
export interface Route { name: string; arg: string | null; params: URLSearchParams }

export interface PageContext {
  session: Session;
  /** Runs when the view is left (stop polling, destroy a graph). */
  onLeave(fn: () => void): void;
}

export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#\/?/, '');
  const [path, query] = [raw.split('?')[0] ?? '', raw.split('?').slice(1).join('?')];
  const [name, ...rest] = path.split('/');
  return { name: name || 'receipts', arg: rest.length ? decodeURIComponent(rest.join('/')) : null, params: new URLSearchParams(query) };
}

export function href(name: string, arg?: string | null, params: Record<string, string> = {}): string {
  const s = new URLSearchParams(params).toString();
  return `#/${name}${arg ? `/${encodeURIComponent(arg)}` : ''}${s ? `?${s}` : ''}`;
}

export function navigate(name: string, params: Record<string, string> = {}, arg?: string | null): void {
  location.hash = href(name, arg, params);
}
