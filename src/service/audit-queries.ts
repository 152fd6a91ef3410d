import { WritError } from '../errors.js';
import type { Receipt } from '../audit/index.js';
import {
  edgeCovers, isEdgeLive, principalsOf, resolveChainsTo, resolveOwners, specificity, toPolicyEdge, type AuthorityGraph, type ResolutionStats,
} from '../graph/index.js';
import { GOVERNANCE_ID, type Edge, type Scope } from '../graph/model.js';
import type { CandidateChain, PolicyEdge } from '../policy/types.js';
import type { WritContext } from './context.js';
import { revocationOf, type Revocation } from './graph-queries.js';
import { delegatorHolds } from './edges.js';
import { registryProblem } from './resources.js';

export interface ChainLink {
  edge: PolicyEdge;
  /** The edge as it is now, when it was revoked since the decision: when, by whom, why. */
  now: Revocation | null;
}

export interface WhyReport {
  receipt: Receipt;
  /** The graph revision the decision was made at. */
  graph_revision: number | null;
  chain: ChainLink[];
  /** Principals of the chain (either end of an edge, but governance) revoked since the decision: each ends the chain too. */
  principals_revoked: (Revocation & { principal: string })[];
}

/**
 * NOT_FOUND for a receipt: an unknown id, and one its reader may not read, alike (the message names only the
 * id asked for). It says where an archived receipt went, the same whatever was archived: an auditor handed
 * the id of a receipt archived since must not take "no receipt" for one deleted.
 */
export function noReceipt(receiptId: string): WritError {
  return new WritError('NOT_FOUND', `no receipt ${receiptId} in the store (a receipt archived by writ audit archive is only in its archive file)`);
}

/** `writ why`: receipt → decision → chain → each edge as it was when the decision was made, and what became of it and its principals. */
export async function whyReceipt(ctx: WritContext, receiptId: string): Promise<WhyReport> {
  const receipt = await ctx.receipts.get(receiptId);
  if (!receipt) throw noReceipt(receiptId);
  const current = await ctx.graph.current();
  const then = receipt.graph_revision !== null ? await ctx.graph.atRevision(receipt.graph_revision) : current;
  const chain: ChainLink[] = [];
  for (const id of receipt.chain) {
    const was = then.edge(id) ?? current.edge(id);
    if (!was) throw new WritError('INTERNAL', `edge ${id} of receipt ${receiptId} is in no graph revision`);
    const revokedAt = current.edge(id)?.revoked_at ?? null;
    chain.push({ edge: toPolicyEdge(was), now: revokedAt !== null && revokedAt !== was.revoked_at ? await revocationOf(ctx, { edge: id }, revokedAt, then.revision) : null });
  }
  const principals_revoked: WhyReport['principals_revoked'] = [];
  for (const id of new Set(chain.flatMap((l) => [l.edge.from, l.edge.to]))) {
    const revokedAt = current.principal(id)?.revoked_at ?? null;
    if (id === GOVERNANCE_ID || revokedAt === null || then.principal(id)?.revoked_at === revokedAt) continue;
    principals_revoked.push({ principal: id, ...(await revocationOf(ctx, { principal: id }, revokedAt, then.revision)) });
  }
  return { receipt, graph_revision: receipt.graph_revision, chain, principals_revoked };
}

export interface Capability {
  chain: PolicyEdge[];
  valid: boolean;
  /** The final scope (what the chain gives), and why it does not count when it is not valid. */
  scope: Scope;
  problems: string[];
}

/** What a principal holds: its chains, each judged, and whether some were left unjudged. */
export interface CapabilityList {
  capabilities: Capability[];
  /**
   * True when the principal may hold more than is listed: the chains that add something to the listed
   * valid ones outnumbered CAPABILITY_LIMIT, or chain resolution stopped short (CANDIDATE_LIMIT, budget).
   */
  truncated: boolean;
}

/**
 * Chains judged per principal at most, each one policy evaluation. A principal may have more incoming
 * edges than this; past it the listing says it is truncated.
 */
export const CAPABILITY_LIMIT = 64;

/** Candidate chains read from the graph for one principal, before choosing which to judge. */
const CANDIDATE_LIMIT = 256;

export interface CapabilityQuery {
  /**
   * Only chains whose final scope passes (the searches' "gives update_post on …"): resolved in decide
   * mode, pruned edge by edge, so chains that cannot pass cost nothing and crowd out nothing. Without
   * it every chain comes, live or not, so that the policy can say what is wrong with the dead ones.
   */
  gives?: (scope: Scope) => boolean;
  /** With `gives`: only chains whose last edge (the one into the principal) passes, pruned while resolving as `gives` is. */
  lastEdge?: (edge: Edge) => boolean;
  /** Chains judged at most (default CAPABILITY_LIMIT). */
  limit?: number;
}

function representativeKey(pattern: string): string {
  return pattern.split(':').map((s) => (s === '*' || s === '**' ? 'any' : s)).join(':');
}

/**
 * `writ can`: what a principal could do at a time, and through which chains. Every candidate chain to
 * the principal is judged by the policy with a request that its own final scope covers, so the
 * verdict is the chain's (live, narrowing at every step), not the request's.
 */
export async function capabilitiesOf(ctx: WritContext, principal: string, at?: number, query: CapabilityQuery = {}): Promise<{ at: number; graph_revision: number } & CapabilityList> {
  const now = at ?? ctx.clock.now();
  const graph: AuthorityGraph = at === undefined ? await ctx.graph.current() : await ctx.graph.atTime(at);
  if (!graph.principal(principal)) throw new WritError('UNKNOWN_PRINCIPAL', `no principal "${principal}" at that time`);
  return { at: now, graph_revision: graph.revision, ...capabilitiesIn(ctx, graph, principal, now, query) };
}

/**
 * The capabilities of `principal` in a given graph (the live one, a past one, or a what-if copy) at `now`.
 * Up to `limit` candidate chains, all are judged and listed. Past it, a chain adds nothing when a chain
 * judged valid covers its last edge (edgeCovers), so chains are judged covering-first and covered ones
 * dropped unjudged: many narrow chains cannot crowd out a wide one, and the limit, which bounds the
 * policy evaluations a hostile graph can cause, bites only on authority that is distinct — then the
 * answer says it is truncated.
 */
export function capabilitiesIn(ctx: WritContext, graph: AuthorityGraph, principal: string, now: number, query: CapabilityQuery = {}): CapabilityList {
  const limit = query.limit ?? CAPABILITY_LIMIT;
  const stats: ResolutionStats = { visited: 0, truncated: false, complete: true };
  const options = { mode: query.gives ? 'decide' : 'explain', budget: { maxChains: CANDIDATE_LIMIT }, stats } as const;
  const candidates = resolveChainsTo(graph, principal, now, options, query.gives, query.gives && query.lastEdge);
  const judge = (chain: CandidateChain) => judgeChain(ctx, graph, principal, chain, now);
  if (candidates.length <= limit) return { capabilities: candidates.map(judge), truncated: !stats.complete };

  const lasts = candidates.map((c) => c.edges.at(-1)!);
  const live = candidates.map((c) => c.edges.every((e) => isEdgeLive(e, now) && graph.principal(e.from)?.revoked_at === null && graph.principal(e.to)?.revoked_at === null));
  // A chain that covers another covers all that one covers as well, so it counts more: judged first.
  const covers = lasts.map((w, i) => lasts.reduce((n, c, j) => (i !== j && edgeCovers(w, c) ? n + 1 : n), 0));
  const breadth = lasts.map((e) => Math.min(...e.scope.resources.map(specificity)));
  const order = candidates.map((_, i) => i).sort((a, b) => Number(live[b]) - Number(live[a]) || covers[b]! - covers[a]! || breadth[a]! - breadth[b]! || a - b);
  const held: PolicyEdge[] = [];
  const kept: { index: number; capability: Capability }[] = [];
  let truncated = !stats.complete;
  for (const i of order) {
    if (held.some((w) => edgeCovers(w, lasts[i]!))) continue;
    if (kept.length === limit) {
      // Live chains come first: once the next one is dead (expired, revoked), so are the rest, and a
      // dead chain adds no authority, so the list still holds all there is.
      truncated ||= live[i]!;
      break;
    }
    const capability = judge(candidates[i]!);
    kept.push({ index: i, capability });
    if (capability.valid) held.push(lasts[i]!);
  }
  return { capabilities: kept.sort((a, b) => a.index - b.index).map((k) => k.capability), truncated };
}

/** The policy's verdict on one chain, asked with a request that the chain's final scope covers. */
function judgeChain(ctx: WritContext, graph: AuthorityGraph, principal: string, chain: CandidateChain, now: number): Capability {
  const last = chain.edges[chain.edges.length - 1]!;
  const action = last.scope.actions.find((a) => a !== '*') ?? Object.keys(ctx.policy.data.writ.actions)[0]!;
  const resource = representativeKey(last.scope.resources[0]!);
  const environment = last.scope.environments.find((e) => e !== '*') ?? 'production';
  const fields = last.scope.fields.includes('*') ? [] : [...last.scope.fields].sort();
  const one: CandidateChain[] = [chain];
  const result = ctx.policy.decide({
    now,
    request: { principal, action, resource, environment, fields, risk: null },
    principals: principalsOf(graph, one, [principal]),
    chains: one,
    owners: resolveOwners(graph, resource, fields, now),
    approval: null,
  });
  const verdict = result.chains[0]!;
  const problems = [...verdict.edges.flatMap((e) => e.problems), ...verdict.problems];
  return { chain: chain.edges, valid: verdict.ok, scope: last.scope, problems };
}

/** `writ expiring`: live grants and delegations that expire within the window. */
export async function expiringEdges(ctx: WritContext, withinMs: number): Promise<Edge[]> {
  const now = ctx.clock.now();
  return (await ctx.graph.current())
    .edges()
    .filter((e) => (e.kind === 'grant' || e.kind === 'delegate') && isEdgeLive(e, now) && e.expires_at !== null && e.expires_at <= now + withinMs)
    .sort((a, b) => a.expires_at! - b.expires_at!);
}

export interface Orphan {
  edge: Edge;
  violations: string[];
}

/**
 * `writ orphans`: live edges that count for nothing, or for less than they say. Delegations whose delegator
 * no longer holds what it gave (its parent was revoked, expired or narrowed): the policy's delegation
 * check — the same one that runs at write time — says why. And edges part of whose scope can never apply
 * under the policy's registry (an action not in its catalogue, a pattern no resource class has: written
 * before edges were checked for it, or stranded by a policy change since), with the reason an edge
 * written now would be refused.
 */
export async function orphanedDelegations(ctx: WritContext, only?: (edge: Edge) => boolean): Promise<Orphan[]> {
  return orphansIn(ctx, await ctx.graph.current(), ctx.clock.now(), only);
}

/**
 * The orphans of a given graph (the live one or a what-if copy) at `now`; `only` narrows which edges are
 * judged. `registry: false` judges delegations by their delegator only (what a graph change can alter:
 * impact analysis), leaving out edges whose scope the registry does not cover.
 */
export function orphansIn(ctx: WritContext, graph: AuthorityGraph, now: number, only?: (edge: Edge) => boolean, options: { registry?: boolean } = {}): Orphan[] {
  const registryToo = options.registry ?? true;
  const out: Orphan[] = [];
  for (const edge of graph.edges()) {
    if (edge.kind === 'preempts' || (!registryToo && edge.kind !== 'delegate') || !isEdgeLive(edge, now) || (only !== undefined && !only(edge))) continue;
    const violations: string[] = [];
    const registry = registryToo ? registryProblem(ctx.policy.data, edge) : null;
    if (registry !== null) violations.push(registry);
    if (edge.kind === 'delegate') {
      const verdict = delegatorHolds(ctx, graph, toPolicyEdge(edge), now);
      if (!verdict.allow) violations.push(...verdict.violations);
    }
    if (violations.length > 0) out.push({ edge, violations });
  }
  return out.sort((a, b) => a.edge.id.localeCompare(b.edge.id));
}
