import { WritError } from '../errors.js';
import type { CandidateChain, PolicyPrincipal } from './policy-view.js';
import { isPrincipalNode, type AuthorityGraph } from './authority-graph.js';
import { isEdgeLive, toPolicyEdge } from './liveness.js';
import { GOVERNANCE_ID, type Edge } from './model.js';
import { compileCoverageRequest, scopeCoversRequest } from './request-cover.js';
import { narrowsTo } from './edge-cover.js';

/**
 * Bounds of one resolution. Running out of `maxVisited` is BUDGET_EXCEEDED (unless complete chains were
 * already found: then those are returned); reaching `maxChains` stops the search after the current path
 * length; `maxDepth` bounds the chain length.
 *
 * There is no bound on the delegators into one principal (a fan-out): anyone who may delegate may delegate
 * to anyone, unasked, so such a bound (there was one, of 64) let 65 principals deny another every decision by
 * each delegating to it, and denied an agent that many people delegate to. `maxVisited` bounds the work of
 * a wide graph as it did, and the chains are searched shortest first, so a principal's own short chain is
 * found however many others delegate to it; how many delegations one delegator may give one principal is
 * bounded when they are written (WRIT_MAX_DELEGATIONS_BETWEEN).
 */
export interface ResolutionBudget {
  /** Longest chain, in edges. Longer paths are not chains. */
  maxDepth: number;
  /** Chains returned at most. */
  maxChains: number;
  /** Incoming grant/delegate edges examined in total. */
  maxVisited: number;
}

export const DEFAULT_RESOLUTION_BUDGET: Readonly<ResolutionBudget> = Object.freeze({
  maxDepth: 6,
  maxChains: 16,
  maxVisited: 20_000,
});

/**
 * - `decide` (hot path): skips edges that cannot be on a valid chain — revoked, not live at `now`,
 *   not covering the request (its risk included), or not narrowing to the next edge of the path
 *   (narrowsTo) — and revoked principals. Every edge of a valid chain covers the request and narrows
 *   to the next, so this loses nothing valid.
 * - `explain`: prunes nothing but structure and budget, so that the policy can say what is wrong
 *   with revoked, expired or too narrow chains.
 */
export type ResolutionMode = 'decide' | 'explain';

export interface ResolveOptions {
  mode: ResolutionMode;
  budget?: Partial<ResolutionBudget>;
  /** Filled in when given: what the resolution cost (for metrics and benchmarks). */
  stats?: ResolutionStats;
}

export interface ResolutionStats {
  /** Incoming grant/delegate edges examined. */
  visited: number;
  /** The budget ran out after complete chains had been found; those were returned. */
  truncated: boolean;
  /**
   * Every chain within `maxDepth` was returned. False when the budget ran out (`truncated`) or
   * `maxChains` stopped the search or cut the chains found: more chains may exist than were returned.
   */
  complete: boolean;
}

export interface ChainRequest {
  principal: string;
  action: string;
  /** Canonical resource key. */
  resource: string;
  environment: string;
  /** Requested fields; empty means the whole resource. */
  fields: readonly string[];
  /**
   * The risk the policy judges the request at (requestRisk: the action's catalogue risk, raised by a
   * declared one), not the declared risk alone. The last edge of a valid chain has a risk_max at least
   * this, and risk narrows along a chain, so decide mode skips every edge whose risk_max is below it.
   */
  risk: number;
}

/** A path being grown backwards from the requester: `next` is the step closer to the requester. */
interface Step {
  readonly principal: string;
  readonly edge: Edge | null;
  readonly next: Step | null;
}

/**
 * Candidate chains `governance → … → request.principal` for a request, searched backwards from the
 * requester over incoming `grant` and `delegate` edges, simple paths only. Order: chains whose edges
 * and principals are all live first, then shorter, then by edge ids. The policy judges them; this
 * only finds them. An unknown requester (or governance itself) has no chains.
 */
export function resolveChains(graph: AuthorityGraph, request: ChainRequest, now: number, options: ResolveOptions): CandidateChain[] {
  const coverage = compileCoverageRequest(request);
  return resolve(graph, request.principal, now, options, (edge) => scopeCoversRequest(edge.scope, coverage));
}

/**
 * Candidate chains `governance → … → principal`: for write-time checks of a delegation by
 * `principal`, and for what a principal holds (`writ can`). In `decide` mode liveness prunes, and so
 * does `gives` when given: an edge whose scope fails it cannot be on a valid chain whose final scope
 * passes it (scopes narrow along a valid chain), e.g. "gives update_post". The policy compares scopes.
 * `last`, in `decide` mode, keeps only the chains whose last edge (the one into `principal`) passes.
 */
export function resolveChainsTo(graph: AuthorityGraph, principal: string, now: number, options: ResolveOptions, gives?: (scope: Edge['scope']) => boolean, last?: (edge: Edge) => boolean): CandidateChain[] {
  if (gives === undefined && last === undefined) return resolve(graph, principal, now, options, null);
  // Chains are simple paths grown backwards from `principal`: only the last edge of a chain leads into it.
  return resolve(graph, principal, now, options, (edge) => (gives === undefined || gives(edge.scope)) && (last === undefined || edge.to !== principal || last(edge)));
}

/** The principals of every chain plus `extra` (e.g. the caller), as the policy sees them. Unknown ids are left out. */
export function principalsOf(graph: AuthorityGraph, chains: readonly CandidateChain[], extra: Iterable<string> = []): Record<string, PolicyPrincipal> {
  const out: Record<string, PolicyPrincipal> = {};
  const add = (id: string): void => {
    if (Object.hasOwn(out, id)) return;
    const p = graph.principal(id);
    if (p) out[id] = { id: p.id, kind: p.kind, priority_class: p.priority_class, revoked_at: p.revoked_at };
  };
  for (const chain of chains) {
    for (const e of chain.edges) {
      add(e.from);
      add(e.to);
    }
  }
  for (const id of extra) add(id);
  return out;
}

function resolve(
  graph: AuthorityGraph,
  target: string,
  now: number,
  options: ResolveOptions,
  covers: ((edge: Edge) => boolean) | null,
): CandidateChain[] {
  const budget: ResolutionBudget = { ...DEFAULT_RESOLUTION_BUDGET, ...options.budget };
  const pruning = options.mode === 'decide';
  const requester = graph.principal(target);
  if (target === GOVERNANCE_ID || requester === undefined) return [];
  if (pruning && requester.revoked_at !== null) return [];

  const found: Step[] = [];
  let frontier: Step[] = [{ principal: target, edge: null, next: null }];
  let visited = 0;
  let truncated = false;
  let stopped = false;
  try {
    for (let depth = 1; depth <= budget.maxDepth && frontier.length > 0; depth++) {
      const nextFrontier: Step[] = [];
      for (const step of frontier) {
        graph.forEachIncoming(step.principal, (edge, from) => {
          if (edge.kind !== 'grant' && edge.kind !== 'delegate') return;
          if (++visited > budget.maxVisited) {
            throw new WritError('BUDGET_EXCEEDED', `chain resolution for "${target}" examined more than ${budget.maxVisited} edges`, {
              budget,
              visited: visited - 1,
              limit: 'maxVisited',
            });
          }
          if (!isPrincipalNode(from)) return;
          if (pruning && (from.revoked_at !== null || !isEdgeLive(edge, now) || (covers !== null && !covers(edge)))) return;
          // Nor an edge its successor on the path is wider than: such paths are no chains, and left in they
          // could fill maxChains ahead of a valid one (delegations left over from a revoked re-delegable grant).
          if (pruning && step.edge !== null && !narrowsTo(edge, step.edge)) return;
          if (onPath(step, edge.from)) return;
          // Each parallel edge is expanded: a later edge on the path may narrow from one and not another.
          const grown: Step = { principal: edge.from, edge, next: step };
          if (edge.from === GOVERNANCE_ID) found.push(grown);
          else if (depth < budget.maxDepth) nextFrontier.push(grown);
        });
      }
      frontier = nextFrontier;
      if (found.length >= budget.maxChains) {
        stopped = frontier.length > 0;
        break;
      }
    }
  } catch (e) {
    // Complete chains already found are enough candidates; only an empty-handed search fails.
    if (!(e instanceof WritError && e.code === 'BUDGET_EXCEEDED') || found.length === 0) throw e;
    truncated = true;
  } finally {
    if (options.stats) {
      options.stats.visited = Math.min(visited, budget.maxVisited);
      options.stats.truncated = truncated;
      options.stats.complete = !truncated && !stopped && found.length <= budget.maxChains;
    }
  }
  return order(graph, found, now).slice(0, budget.maxChains).map((edges) => ({ edges: edges.map(toPolicyEdge) }));
}

function onPath(step: Step | null, principal: string): boolean {
  for (let s = step; s !== null; s = s.next) if (s.principal === principal) return true;
  return false;
}

function order(graph: AuthorityGraph, found: Step[], now: number): Edge[][] {
  const chains = found.map((head) => {
    const edges: Edge[] = [];
    for (let s: Step | null = head; s !== null && s.edge !== null; s = s.next) edges.push(s.edge);
    const live = edges.every((e) => isEdgeLive(e, now) && graph.principal(e.to)?.revoked_at === null && graph.principal(e.from)?.revoked_at === null);
    return { edges, live };
  });
  chains.sort((a, b) => {
    if (a.live !== b.live) return a.live ? -1 : 1;
    if (a.edges.length !== b.edges.length) return a.edges.length - b.edges.length;
    for (let i = 0; i < a.edges.length; i++) {
      const x = a.edges[i]!.id;
      const y = b.edges[i]!.id;
      if (x !== y) return x < y ? -1 : 1;
    }
    return 0;
  });
  return chains.map((c) => c.edges);
}
