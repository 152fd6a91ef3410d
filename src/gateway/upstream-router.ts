import { WritError } from '../errors.js';
import { matchesPattern } from '../graph/index.js';
import { HttpUpstreamClient, type UpstreamClient } from '../upstream/client.js';

export interface UpstreamRoute {
  pattern: string;
  client: UpstreamClient;
}

/** Route table: resource key pattern → the upstream that holds that state. First match wins. */
export class UpstreamRouter {
  constructor(private readonly routes: UpstreamRoute[]) {}

  static fromConfig(routes: { pattern: string; url: string; timeoutMs: number }[]): UpstreamRouter {
    return new UpstreamRouter(routes.map((r) => ({ pattern: r.pattern, client: new HttpUpstreamClient({ baseUrl: r.url, timeoutMs: r.timeoutMs }) })));
  }

  clientFor(resourceKey: string): UpstreamClient {
    const route = this.routes.find((r) => matchesPattern(r.pattern, resourceKey));
    if (!route) throw new WritError('NO_UPSTREAM', `no upstream is configured for ${resourceKey}`);
    return route.client;
  }
}
