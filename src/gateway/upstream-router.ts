import { WritError } from '../errors.js';
import { matchesPattern } from '../graph/index.js';
import { HttpUpstreamClient, type UpstreamClient } from '../upstream/client.js';

export interface UpstreamRoute {
  pattern: string;
  timeoutMs: number;
  /** The environment whose state this upstream holds: a decision made for another environment never reaches it. */
  environment: string;
  client: UpstreamClient;
}

export interface UpstreamRouteConfig {
  pattern: string;
  url: string;
  timeoutMs: number;
  environment: string;
}

/** Route table: (resource key pattern, environment) → the upstream that holds that state. First match wins. */
export class UpstreamRouter {
  constructor(private readonly routes: UpstreamRoute[]) {}

  static fromConfig(routes: UpstreamRouteConfig[]): UpstreamRouter {
    return new UpstreamRouter(routes.map((r) => ({ pattern: r.pattern, environment: r.environment, timeoutMs: r.timeoutMs, client: new HttpUpstreamClient({ baseUrl: r.url, timeoutMs: r.timeoutMs }) })));
  }

  /** The upstream for this key in this environment (with its timeout), having checked it can address the key. */
  route(resourceKey: string, environment: string): UpstreamRoute {
    const route = this.routes.find((r) => r.environment === environment && matchesPattern(r.pattern, resourceKey));
    if (!route) {
      const elsewhere = this.routes.filter((r) => matchesPattern(r.pattern, resourceKey)).map((r) => r.environment);
      throw new WritError('NO_UPSTREAM', `no upstream holds ${resourceKey} in ${environment}${elsewhere.length ? ` (only in ${elsewhere.join(', ')})` : ''}`);
    }
    route.client.check(resourceKey);
    return route;
  }

  /**
   * For leases: state that an upstream of this Writ holds can only be leased in an environment that
   * has a route (a staging decision must not lock production keys); keys no route holds (state
   * written by a controller that fences itself, e.g. deploys) need no route to be coordinated.
   */
  checkLeasable(resourceKey: string, environment: string): void {
    if (this.routes.some((r) => matchesPattern(r.pattern, resourceKey))) this.route(resourceKey, environment);
  }

  /** The environments in which an upstream holds this key (where a write to it can have gone). */
  environmentsOf(resourceKey: string): string[] {
    return [...new Set(this.routes.filter((r) => matchesPattern(r.pattern, resourceKey)).map((r) => r.environment))].sort();
  }

  /**
   * Whether any upstream holding this key applied the write with this receipt id (reconciliation of
   * PENDING receipts; receipt ids are unique, so asking every environment's upstream is safe).
   */
  async lookup(resourceKey: string, receiptId: string): Promise<{ applied: boolean; revision?: number }> {
    const routes = this.routes.filter((r) => matchesPattern(r.pattern, resourceKey));
    if (routes.length === 0) throw new WritError('NO_UPSTREAM', `no upstream holds ${resourceKey}`);
    // "Not applied" only when every upstream that could hold it answered; one that cannot be asked
    // leaves the receipt unresolved (PENDING) rather than guessed.
    let unanswered: unknown;
    for (const route of routes) {
      try {
        const found = await route.client.lookup(resourceKey, receiptId);
        if (found.applied) return found;
      } catch (e) {
        unanswered ??= e;
      }
    }
    if (unanswered !== undefined) throw unanswered;
    return { applied: false };
  }
}
