import { MultiDirectedGraph } from 'graphology';
import type { Attributes } from 'graphology-types';
import { WritError } from '../errors.js';
import { compilePattern } from './patterns.js';
import {
  GOVERNANCE_ID,
  type Edge,
  type EdgeKind,
  type GraphEvent,
  type Principal,
  type PublicJwk,
  type RecordedGraphEvent,
  type Scope,
} from './model.js';

/** Node id prefix of managed state: an `owns` edge whose `to` is the pattern `p` points at node `state:p`. */
export const MANAGED_STATE_PREFIX = 'state:';
/** Node id prefix of a priority class: a `preempts` edge may point at `class:<priority_class>`. */
export const PRIORITY_CLASS_PREFIX = 'class:';

export interface ManagedStateNode {
  node: 'managed_state';
  /** `state:<pattern>` */
  id: string;
  pattern: string;
}

export interface PriorityClassNode {
  node: 'priority_class';
  /** `class:<name>` */
  id: string;
  name: string;
}

/** A node is a principal (its attributes are the Principal itself), managed state or a priority class. */
export type GraphNode = Principal | ManagedStateNode | PriorityClassNode;

export function managedStateNodeId(pattern: string): string {
  return MANAGED_STATE_PREFIX + pattern;
}

/** Principal ids must not take the node ids reserved for managed state and priority classes. */
export function isReservedNodeId(id: string): boolean {
  return id.startsWith(MANAGED_STATE_PREFIX) || id.startsWith(PRIORITY_CLASS_PREFIX);
}

export function isPrincipalNode(node: GraphNode | undefined): node is Principal {
  return node !== undefined && (node as { node?: unknown }).node === undefined;
}

export interface AuthorityGraphOptions {
  /** Stop replaying after this revision (point-in-time rebuild). */
  upTo?: number;
}

type NodeAttrs = GraphNode & Attributes;
type EdgeAttrs = Edge & Attributes;

/**
 * The authority graph in memory: a graphology multigraph folded from the graph event log.
 * Each Edge and Principal object is stored once, as the graphology attributes of its edge or node;
 * the objects handed out are those, so callers must treat them as read-only. Identical scopes are
 * interned (shared and frozen), which is most of the memory of a large graph.
 *
 * Graphology keeps each node's neighbours as properties of a plain object keyed by neighbour key.
 * With arbitrary string ids V8 builds a hidden class per insertion order, which made building a
 * 1M-edge graph three times slower; so graphology nodes are keyed by a dense index ("0", "1", ...,
 * stored as elements) and `keys` maps node ids to it. Edge keys are the edge ids.
 */
export class AuthorityGraph {
  private readonly g = new MultiDirectedGraph<NodeAttrs, EdgeAttrs>({ allowSelfLoops: true });
  private readonly keys = new Map<string, string>();
  private readonly scopes = new Map<string, Scope>();
  /** owns edges by the first segment of each of their patterns ('*' for a wildcard first segment). */
  private readonly ownsIndex = new Map<string, Set<Edge>>();
  private rev = 0;

  /** Builds a graph by folding `events` in revision order (from revision 1). */
  static replay(events: Iterable<RecordedGraphEvent>, options: AuthorityGraphOptions = {}): AuthorityGraph {
    const graph = new AuthorityGraph();
    for (const rec of events) {
      if (options.upTo !== undefined && rec.revision > options.upTo) break;
      graph.apply(rec);
    }
    return graph;
  }

  /**
   * An independent copy of this graph at the same revision: applying events to the copy (a what-if
   * revocation or delegation) leaves this graph untouched. Principals and edges are copied; scopes
   * are frozen and shared.
   */
  fork(): AuthorityGraph {
    const copy = new AuthorityGraph();
    for (const [key, shared] of this.scopes) copy.scopes.set(key, shared);
    this.g.forEachNode((_key, attrs) => {
      copy.addNode(attrs.id, { ...attrs } as NodeAttrs);
    });
    this.g.forEachEdge((id, attrs, source, target) => {
      const edge = { ...attrs } as EdgeAttrs;
      copy.g.addDirectedEdgeWithKey(id, source, target, edge);
      if (edge.kind === 'owns') copy.indexOwns(edge);
    });
    copy.rev = this.rev;
    return copy;
  }

  /**
   * Undoes the last applied event, for what-if analysis on a fork that is then reused: a revocation
   * of a live edge or principal becomes live again, a created delegation, grant or approval is
   * dropped. Never used on the live graph. Other events (and revocations of something already
   * revoked before `rec`) cannot be undone: INTERNAL.
   */
  undo(rec: RecordedGraphEvent): void {
    if (rec.revision !== this.rev) throw new WritError('INTERNAL', `only the last event (revision ${this.rev}) can be undone, not ${rec.revision}`);
    const event = rec.event;
    if (event.type === 'edge.revoked' && this.g.hasEdge(event.id) && this.g.getEdgeAttributes(event.id).revoked_at === event.at) {
      this.g.getEdgeAttributes(event.id).revoked_at = null;
    } else if (event.type === 'principal.revoked' && this.principal(event.id)?.revoked_at === event.at) {
      this.principal(event.id)!.revoked_at = null;
    } else if (event.type === 'edge.created' && event.edge.kind !== 'owns' && this.g.hasEdge(event.edge.id)) {
      this.g.dropEdge(event.edge.id);
    } else {
      throw new WritError('INTERNAL', `graph event ${event.type} at revision ${rec.revision} cannot be undone`);
    }
    this.rev = rec.revision - 1;
  }

  /** The revision of the last applied event (0 for an empty graph). */
  get revision(): number {
    return this.rev;
  }

  get principalCount(): number {
    let n = 0;
    this.g.forEachNode((_id, attrs) => {
      if (isPrincipalNode(attrs)) n++;
    });
    return n;
  }

  get edgeCount(): number {
    return this.g.size;
  }

  /**
   * Applies the next event. Events must come in revision order without gaps or repeats; an event
   * that does not fit the graph (unknown principal, duplicate id) throws and changes nothing.
   */
  apply(rec: RecordedGraphEvent): void {
    if (rec.revision !== this.rev + 1) {
      throw new WritError('INTERNAL', `graph event revision ${rec.revision} does not follow revision ${this.rev}`, {
        expected: this.rev + 1,
        got: rec.revision,
      });
    }
    this.fold(rec.event, rec.revision);
    this.rev = rec.revision;
  }

  principal(id: string): Principal | undefined {
    const key = this.keys.get(id);
    if (key === undefined) return undefined;
    const node = this.g.getNodeAttributes(key);
    return isPrincipalNode(node) ? node : undefined;
  }

  principals(): Principal[] {
    const out: Principal[] = [];
    this.g.forEachNode((_id, attrs) => {
      if (isPrincipalNode(attrs)) out.push(attrs);
    });
    return out;
  }

  /** Every node: principals, managed state and priority classes, keyed by node id. */
  forEachNode(callback: (id: string, node: GraphNode) => void): void {
    this.g.forEachNode((_key, node) => callback(node.id, node));
  }

  edge(id: string): Edge | undefined {
    return this.g.hasEdge(id) ? this.g.getEdgeAttributes(id) : undefined;
  }

  edges(): Edge[] {
    const out: Edge[] = [];
    this.g.forEachEdge((_id, attrs) => {
      out.push(attrs);
    });
    return out;
  }

  /** Edges into node `id` (a principal, `state:<pattern>` or `class:<name>`), optionally of some kinds. */
  incoming(id: string, kinds?: readonly EdgeKind[]): Edge[] {
    const out: Edge[] = [];
    const key = this.keys.get(id);
    if (key === undefined) return out;
    this.g.forEachInEdge(key, (_e, attrs) => {
      if (kinds === undefined || kinds.includes(attrs.kind)) out.push(attrs);
    });
    return out;
  }

  outgoing(id: string, kinds?: readonly EdgeKind[]): Edge[] {
    const out: Edge[] = [];
    const key = this.keys.get(id);
    if (key === undefined) return out;
    this.g.forEachOutEdge(key, (_e, attrs) => {
      if (kinds === undefined || kinds.includes(attrs.kind)) out.push(attrs);
    });
    return out;
  }

  /** Hot-path iteration over the edges into `id` with the node they come from; nothing when `id` is unknown. */
  forEachIncoming(id: string, callback: (edge: Edge, from: GraphNode) => void): void {
    const key = this.keys.get(id);
    if (key === undefined) return;
    this.g.forEachInEdge(key, (_e, attrs, _s, _t, sourceAttrs) => callback(attrs, sourceAttrs));
  }

  /** Hot-path iteration over the edges out of `id` with the node they go to. */
  forEachOutgoing(id: string, callback: (edge: Edge, to: GraphNode) => void): void {
    const key = this.keys.get(id);
    if (key === undefined) return;
    this.g.forEachOutEdge(key, (_e, attrs, _s, _t, _sa, targetAttrs) => callback(attrs, targetAttrs));
  }

  /** `owns` edges that may match a key whose first segment is `firstSegment` (live or not). */
  ownsCandidates(firstSegment: string): Edge[] {
    const out: Edge[] = [];
    for (const bucket of [this.ownsIndex.get(firstSegment), this.ownsIndex.get('*')]) {
      if (bucket !== undefined) for (const e of bucket) out.push(e);
    }
    return out;
  }


  private fold(event: GraphEvent, revision: number): void {
    switch (event.type) {
      case 'principal.created':
        return this.createPrincipal(event.principal);
      case 'principal.keys_set':
        this.requirePrincipal(event.id).keys = event.keys;
        return;
      case 'principal.revoked': {
        const p = this.requirePrincipal(event.id);
        if (p.revoked_at === null) p.revoked_at = event.at;
        return;
      }
      case 'edge.created':
        return this.createEdge(event.edge, revision);
      case 'edge.revoked': {
        if (!this.g.hasEdge(event.id)) throw new WritError('UNKNOWN_EDGE', `no edge "${event.id}" to revoke`, { id: event.id });
        const edge = this.g.getEdgeAttributes(event.id);
        if (edge.revoked_at === null) edge.revoked_at = event.at;
        return;
      }
      default: {
        const unknown: never = event;
        throw new WritError('INTERNAL', `unknown graph event ${(unknown as { type: string }).type}`);
      }
    }
  }

  private createPrincipal(p: Omit<Principal, 'revoked_at'>): void {
    if (this.keys.has(p.id)) throw new WritError('ALREADY_EXISTS', `principal "${p.id}" already exists`, { id: p.id });
    if (isReservedNodeId(p.id)) {
      throw new WritError('UNPROCESSABLE', `principal id "${p.id}" uses a reserved prefix (state:, class:)`, { id: p.id });
    }
    if ((p.kind === 'governance') !== (p.id === GOVERNANCE_ID)) {
      throw new WritError('UNPROCESSABLE', `only the principal "${GOVERNANCE_ID}" has kind governance`, { id: p.id });
    }
    const principal: Principal = {
      id: p.id,
      kind: p.kind,
      priority_class: p.priority_class,
      priority: p.priority,
      attributes: p.attributes ?? {},
      keys: (p.keys ?? []) as PublicJwk[],
      created_at: p.created_at,
      revoked_at: null,
    };
    this.addNode(p.id, principal as NodeAttrs);
  }

  private createEdge(e: Omit<Edge, 'revoked_at' | 'revision'>, revision: number): void {
    if (this.g.hasEdge(e.id)) throw new WritError('ALREADY_EXISTS', `edge "${e.id}" already exists`, { id: e.id });
    if (!this.principal(e.from)) throw new WritError('UNKNOWN_PRINCIPAL', `edge "${e.id}" comes from unknown principal "${e.from}"`, { id: e.id, from: e.from });
    const target = this.targetNode(e);
    const edge: Edge = {
      id: e.id,
      kind: e.kind,
      from: e.from,
      to: e.to,
      scope: this.intern(e.scope),
      max_depth: e.max_depth ?? null,
      creator: e.creator,
      reason: e.reason,
      created_at: e.created_at,
      not_before: e.not_before ?? null,
      expires_at: e.expires_at ?? null,
      revoked_at: null,
      revision,
    };
    const fromKey = this.keys.get(edge.from)!;
    const toKey = this.keys.get(target.id) ?? this.addNode(target.id, target.node);
    this.g.addDirectedEdgeWithKey(edge.id, fromKey, toKey, edge as EdgeAttrs);
    if (edge.kind === 'owns') this.indexOwns(edge);
  }

  private targetNode(e: Omit<Edge, 'revoked_at' | 'revision'>): { id: string; node: NodeAttrs } {
    if (e.kind === 'owns') {
      const id = managedStateNodeId(e.to);
      return { id, node: { node: 'managed_state', id, pattern: e.to } };
    }
    if (e.kind === 'preempts' && e.to.startsWith(PRIORITY_CLASS_PREFIX)) {
      return { id: e.to, node: { node: 'priority_class', id: e.to, name: e.to.slice(PRIORITY_CLASS_PREFIX.length) } };
    }
    const p = this.principal(e.to);
    if (!p) throw new WritError('UNKNOWN_PRINCIPAL', `edge "${e.id}" goes to unknown principal "${e.to}"`, { id: e.id, to: e.to });
    return { id: e.to, node: p as NodeAttrs };
  }

  private addNode(id: string, node: NodeAttrs): string {
    const key = String(this.keys.size);
    this.keys.set(id, key);
    this.g.addNode(key, node);
    return key;
  }

  private requirePrincipal(id: string): Principal {
    const p = this.principal(id);
    if (!p) throw new WritError('UNKNOWN_PRINCIPAL', `no principal "${id}"`, { id });
    return p;
  }

  private indexOwns(edge: Edge): void {
    for (const pattern of edge.scope.resources) {
      const first = compilePattern(pattern)[0] ?? '';
      const key = first.includes('*') ? '*' : first;
      let bucket = this.ownsIndex.get(key);
      if (bucket === undefined) this.ownsIndex.set(key, (bucket = new Set()));
      bucket.add(edge);
    }
  }

  /** Identical scopes share one frozen object: a large graph repeats a few thousand scopes a million times. */
  private intern(scope: Scope): Scope {
    const key = JSON.stringify(scope);
    let shared = this.scopes.get(key);
    if (shared === undefined) {
      shared = deepFreeze({
        actions: [...scope.actions],
        resources: [...scope.resources],
        environments: [...scope.environments],
        fields: [...scope.fields],
        constraints: { ...scope.constraints },
      });
      this.scopes.set(key, shared);
    }
    return shared;
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
