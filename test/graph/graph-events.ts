import type { Edge, GraphEvent, Principal, PrincipalKind, RecordedGraphEvent, Scope } from '../../src/graph/model.js';

export const T0 = Date.UTC(2026, 0, 1);

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

  edge(id: string, kind: Edge['kind'], from: string, to: string, scope: Partial<Scope> = {}, extra: Partial<Edge> = {}): this {
    return this.add({
      type: 'edge.created',
      edge: {
        id,
        kind,
        from,
        to,
        scope: scopeOf(scope),
        max_depth: kind === 'grant' || kind === 'delegate' ? 3 : null,
        creator: from,
        reason: `test ${id}`,
        created_at: T0,
        not_before: null,
        expires_at: null,
        ...extra,
      },
    });
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
};
