import type { Edge, GraphEvent, Principal, PrincipalKind, RecordedGraphEvent, Scope } from '../../src/graph/model.js';

export const T0 = Date.UTC(2026, 0, 1);

/** The max_depth of a grant unless a test gives one. */
export const GRANT_DEPTH = 6;

/** Builds a recorded event log for tests, one revision per event, one minute apart. */
export class EventLogBuilder {
  readonly events: RecordedGraphEvent[] = [];

  add(event: GraphEvent, at = T0 + this.events.length * 60_000): this {
    this.events.push({ revision: this.events.length + 1, at, actor: 'governance', event });
    return this;
  }

  principal(id: string, kind: PrincipalKind = 'agent', extra: Partial<Principal> = {}): this {
    return this.add({
      type: 'principal.created',
      principal: { id, kind, priority_class: kind, priority: 10, attributes: {}, keys: [], created_at: T0, ...extra },
    });
  }

  /**
   * Depths are realistic unless `extra` says otherwise: a grant allows GRANT_DEPTH further hops (every
   * chain within the default maxDepth, and one more), a delegation keeps one less than the least its
   * delegator holds so far (0 when it holds nothing yet), as the policy's depth rule allows.
   */
  edge(id: string, kind: Edge['kind'], from: string, to: string, scope: Partial<Scope> = {}, extra: Partial<Edge> = {}): this {
    return this.add({
      type: 'edge.created',
      edge: {
        id,
        kind,
        from,
        to,
        scope: scopeOf(scope),
        max_depth: kind === 'grant' ? GRANT_DEPTH : kind === 'delegate' ? this.depthLeftTo(from) : null,
        creator: from,
        reason: `test ${id}`,
        created_at: T0,
        not_before: null,
        expires_at: null,
        ...extra,
      },
    });
  }

  private depthLeftTo(delegator: string): number {
    const held: number[] = [];
    for (const { event } of this.events) {
      if (event.type === 'edge.created' && event.edge.to === delegator && (event.edge.kind === 'grant' || event.edge.kind === 'delegate')) held.push(event.edge.max_depth ?? 0);
    }
    return held.length === 0 ? 0 : Math.max(0, Math.min(...held) - 1);
  }

  revokeEdge(id: string, at = T0 + this.events.length * 60_000): this {
    return this.add({ type: 'edge.revoked', id, at, reason: 'test' }, at);
  }

  revokePrincipal(id: string, at = T0 + this.events.length * 60_000): this {
    return this.add({ type: 'principal.revoked', id, at, reason: 'test' }, at);
  }
}

export function scopeOf(s: Partial<Scope> = {}): Scope {
  return {
    actions: ['update_post'],
    resources: ['wp:post:*'],
    environments: ['production'],
    fields: ['*'],
    constraints: { risk_max: 5 },
    ...s,
  };
}

export const REQUEST = {
  principal: 'seo-agent-7',
  action: 'update_post',
  resource: 'wp:post:1024',
  environment: 'production',
  fields: ['title'],
  risk: 1, // update_post's catalogue risk
};
