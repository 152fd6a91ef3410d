import { randomUUID } from 'node:crypto';
import { WritError } from '../errors.js';
import { findOwnershipConflict, hasEdgeEnded, principalsOf, resolveChainsTo, scopeCovers, type AuthorityGraph } from '../graph/index.js';
import { GOVERNANCE_ID, type Edge, type EdgeKind, type GraphEvent } from '../graph/model.js';
import type { CandidateChain, PolicyEdge } from '../policy/types.js';
import { commitGraphChange, liveGraphWriter, type GraphWriter } from './graph-changes.js';
import { readableEdge, unknownEdge, whomMayAsk, type AsksAbout } from './ask-about.js';
import type { WritContext } from './context.js';
import { requireGovernance } from './principals.js';
import { checkScopeApplies } from './resources.js';
import { checkId, checkReason, normalizeScope, sameJson, window, type ScopeInput } from './validate.js';
import { toWireTimeOrNull } from '../wire/time.js';

interface EdgeInputBase {
  id?: string;
  reason: string;
  not_before?: string | number | null;
  expires_at?: string | number | null;
}
export interface GrantInput extends EdgeInputBase { to: string; scope: ScopeInput; max_depth?: number }
export interface DelegationInput extends EdgeInputBase { from: string; to: string; scope: ScopeInput; max_depth?: number }
export interface OwnershipInput extends EdgeInputBase { owner: string; resource: string; fields?: string[] }
export interface ApprovalInput extends EdgeInputBase { from: string; to: string; scope: ScopeInput }
export interface PreemptionInput extends EdgeInputBase { from: string; to: string }

export interface EdgeResult {
  edge: Edge;
  created: boolean;
  graph_revision: number;
}

/**
 * A registered, unrevoked principal, else UNKNOWN_PRINCIPAL or UNPROCESSABLE (revoked). A caller who may
 * not ask about it (`asks`) is told a revoked one is unknown, as one never registered: that it existed is
 * not its to learn. Left out on the paths only governance takes, which asks about everyone.
 */
function livePrincipal(graph: AuthorityGraph, id: string, role: string, asks: AsksAbout = () => true): void {
  const p = graph.principal(id);
  if (!p || (p.revoked_at !== null && !asks(id))) throw new WritError('UNKNOWN_PRINCIPAL', `${role} "${id}" is not a registered principal`);
  if (p.revoked_at !== null) throw new WritError('UNPROCESSABLE', `${role} "${id}" is revoked`);
}

/**
 * The shared path of every edge creation: idempotency by id, then the kind-specific checks, then the
 * event. An id taken by an edge the caller may not read (readableEdge) is judged as if it were free —
 * every check, every error — and only a change that would otherwise be made is refused, saying the id is
 * taken (edgeIdTaken): the caller learns that the id is in use, nothing of the edge.
 */
async function createEdge(
  ctx: WritContext,
  caller: string,
  draft: Omit<Edge, 'id' | 'creator' | 'created_at' | 'revoked_at' | 'revision'> & { id?: string | undefined },
  check: (graph: AuthorityGraph, candidate: PolicyEdge, now: number, asks: AsksAbout) => void,
  writer: GraphWriter,
): Promise<EdgeResult> {
  const id = checkId(draft.id ?? `e-${randomUUID()}`, 'edge id');
  checkReason(draft.reason ?? '', 'every edge');
  const asks = await whomMayAsk(ctx, caller);
  let created = false;
  const revision = await writer.commit((graph, now): GraphEvent[] => {
    const existing = readableEdge(graph, caller, id, asks);
    if (existing) {
      // Times as the wire has them (clamped to years 0000–9999): an edge an older Writ stored with
      // expires_at 1e20 is the same edge as its export, which says 9999-12-31T23:59:59.999Z.
      const comparable = (e: Pick<Edge, 'kind' | 'from' | 'to' | 'scope' | 'max_depth' | 'reason' | 'not_before' | 'expires_at'>) => ({
        kind: e.kind, from: e.from, to: e.to, scope: e.scope, max_depth: e.max_depth, reason: e.reason, not_before: toWireTimeOrNull(e.not_before), expires_at: toWireTimeOrNull(e.expires_at),
      });
      if (sameJson(comparable(existing), comparable(draft as Edge))) return [];
      throw new WritError('ALREADY_EXISTS', `edge "${id}" exists with different content; edges are immutable (revoke and create a new one)`);
    }
    checkNotEnded(draft.expires_at, now);
    const edge = { ...draft, id, creator: caller, created_at: now } as Omit<Edge, 'revoked_at' | 'revision'>;
    checkScopeApplies(ctx.policy.data, edge.kind, edge.scope);
    check(graph, { ...edge, revoked_at: null }, now, asks);
    if (graph.edge(id)) throw edgeIdTaken(id);
    created = true;
    return [{ type: 'edge.created', edge }];
  });
  const edge = (await writer.current()).edge(id);
  if (!edge) throw new WritError('INTERNAL', `edge ${id} vanished after creation`);
  return { edge, created, graph_revision: revision };
}

/** ALREADY_EXISTS for a new edge whose id an edge the caller may not read has: it is told that the id is in use, nothing more. */
export function edgeIdTaken(id: string): WritError {
  return new WritError('ALREADY_EXISTS', `edge id "${id}" is taken: choose another id, or omit id and Writ makes one up`);
}

/**
 * A new edge that has ended already is refused: it would never count, and nothing else says so (a retry
 * by id of an edge that exists still answers it, as the idempotency check comes first).
 */
export function checkNotEnded(expiresAt: number | null, now: number): void {
  if (expiresAt === null || expiresAt > now) return;
  throw new WritError('UNPROCESSABLE', `expires_at ${new Date(expiresAt).toISOString()} is not after now (${new Date(now).toISOString()}): the edge would never count`);
}

function depth(value: number | undefined): number {
  const d = value ?? 0;
  if (!Number.isInteger(d) || d < 0 || d > 16) throw new WritError('UNPROCESSABLE', 'max_depth must be an integer from 0 to 16');
  return d;
}

/** A root grant governance → P. Only governance grants. */
export async function createGrant(ctx: WritContext, caller: string, input: GrantInput, writer: GraphWriter = liveGraphWriter(ctx, caller)): Promise<EdgeResult> {
  requireGovernance(caller, 'create grants');
  const draft = {
    id: input.id, kind: 'grant' as EdgeKind, from: GOVERNANCE_ID, to: input.to, scope: normalizeScope(input.scope),
    max_depth: depth(input.max_depth), reason: input.reason, ...window(input.not_before, input.expires_at),
  };
  return createEdge(ctx, caller, draft, (graph) => {
    livePrincipal(graph, input.to, 'grantee');
    if (input.to === GOVERNANCE_ID) throw new WritError('UNPROCESSABLE', 'governance cannot grant to itself');
  }, writer);
}

/**
 * A delegation P → Q. Only P itself (or governance, applying a manifest on P's behalf) may write it,
 * and only if P holds, right now, a valid chain whose last scope covers the delegated scope on every
 * dimension. The policy (not TypeScript) judges that, so write time and decision time apply one rule set.
 */
export async function createDelegation(ctx: WritContext, caller: string, input: DelegationInput, writer: GraphWriter = liveGraphWriter(ctx, caller)): Promise<EdgeResult> {
  if (caller !== input.from && caller !== GOVERNANCE_ID) {
    throw new WritError('FORBIDDEN', `${caller} cannot delegate on behalf of ${input.from}; only the holder of a scope may delegate it`);
  }
  return createEdge(ctx, caller, delegationDraft(input), (graph, candidate, now, asks) => checkDelegationFits(ctx, graph, candidate, now, asks), writer);
}

/** A delegation input as an edge draft (scope normalized, window and depth checked). */
export function delegationDraft(input: DelegationInput) {
  return {
    id: input.id, kind: 'delegate' as EdgeKind, from: input.from, to: input.to, scope: normalizeScope(input.scope),
    max_depth: depth(input.max_depth), reason: input.reason, ...window(input.not_before, input.expires_at),
  };
}

/**
 * May this delegation be written into `graph` now: both ends live and distinct, not to governance, fewer
 * than WRIT_MAX_DELEGATIONS_BETWEEN delegations from the delegator to the delegate not yet ended (else
 * TOO_MANY_DELEGATIONS), and within what the delegator holds (the policy's attenuation check), else
 * ATTENUATION_VIOLATION. Run in the graph write's plan, so the count is of the graph the write is appended
 * on: two writes planned on one revision cannot both be appended (commitGraphChange). An end
 * that is revoked is UNKNOWN_PRINCIPAL to a caller who may not ask about it (`asks`, whomMayAsk).
 */
export function checkDelegationFits(ctx: WritContext, graph: AuthorityGraph, candidate: PolicyEdge, now: number, asks: AsksAbout): void {
  livePrincipal(graph, candidate.from, 'delegator', asks);
  livePrincipal(graph, candidate.to, 'delegate', asks);
  if (candidate.from === candidate.to) throw new WritError('UNPROCESSABLE', 'a principal cannot delegate to itself');
  if (candidate.to === GOVERNANCE_ID) throw new WritError('UNPROCESSABLE', 'nothing can be delegated to governance');
  checkDelegationsBetween(graph, candidate, now, ctx.config.maxDelegationsBetween);
  const verdict = delegatorHolds(ctx, graph, candidate, now);
  if (!verdict.allow) {
    throw new WritError('ATTENUATION_VIOLATION', `delegation ${candidate.from} → ${candidate.to} exceeds what ${candidate.from} holds: ${verdict.violations.join('; ')}`, {
      violations: verdict.violations,
    });
  }
}

/**
 * TOO_MANY_DELEGATIONS when `candidate.from` has given `candidate.to` `bound` delegations that have not
 * ended (unrevoked, unexpired; one not yet valid counts: it will be). Anyone who may delegate may delegate
 * to anyone, unasked, and the delegate's every chain resolution searches each such edge; what one
 * delegator can add there is bounded here.
 */
function checkDelegationsBetween(graph: AuthorityGraph, candidate: PolicyEdge, now: number, bound: number): void {
  let given = 0;
  graph.forEachIncoming(candidate.to, (edge) => {
    if (edge.kind === 'delegate' && edge.from === candidate.from && !hasEdgeEnded(edge, now)) given++;
  });
  if (given >= bound) {
    throw new WritError(
      'TOO_MANY_DELEGATIONS',
      `${candidate.from} has already given ${candidate.to} ${given} delegations that have not ended, the most one principal may give another (WRIT_MAX_DELEGATIONS_BETWEEN=${bound}); revoke one first`,
      { from: candidate.from, to: candidate.to, delegations: given, bound },
    );
  }
}

/**
 * The policy's verdict on whether `proposed.from` holds what `proposed` gives. First only the delegator's
 * live chains whose every edge covers the proposed scope (a supporting chain narrows down to a last edge
 * that covers it), so chains that cannot support it — however many — do not crowd out one that does;
 * when none does, every chain (explain mode), so that the violations say what is missing.
 */
export function delegatorHolds(ctx: WritContext, graph: AuthorityGraph, proposed: PolicyEdge, now: number): { allow: boolean; violations: string[] } {
  const check = (chains: CandidateChain[]) => ctx.policy.checkDelegation({ now, proposed, principals: principalsOf(graph, chains, [proposed.from, proposed.to]), chains });
  const supporting = check(resolveChainsTo(graph, proposed.from, now, { mode: 'decide' }, (scope) => scopeCovers(scope, proposed.scope)));
  if (supporting.allow) return supporting;
  // The unpruned chains are for the reasons only; the verdict stays the pruned search's (fail closed), as
  // a decision's does: should the policy ever pass a chain the pruning drops (a bundle whose rules are
  // looser than the resolver's narrowing and liveness checks), no delegation is written from it.
  const explained = check(resolveChainsTo(graph, proposed.from, now, { mode: 'explain' }));
  if (!explained.allow) return explained;
  return { allow: false, violations: [`chain: ${proposed.from} holds no chain from governance whose every edge and principal is unrevoked and live now that covers it`] };
}

/** An ownership's scope: its resource pattern and fields (every action). */
export function ownershipScope(input: Pick<OwnershipInput, 'resource' | 'fields'>) {
  return normalizeScope({ actions: ['*'], resources: [input.resource], fields: input.fields ?? ['*'], risk_max: 0 });
}

/** owns P → managed state. One live owner per managed state (same pattern, overlapping fields). */
export async function createOwnership(ctx: WritContext, caller: string, input: OwnershipInput, writer: GraphWriter = liveGraphWriter(ctx, caller)): Promise<EdgeResult> {
  requireGovernance(caller, 'assign ownership');
  const scope = ownershipScope(input);
  const draft = {
    id: input.id, kind: 'owns' as EdgeKind, from: input.owner, to: input.resource, scope, max_depth: null,
    reason: input.reason, ...window(input.not_before, input.expires_at),
  };
  return createEdge(ctx, caller, draft, (graph, _candidate, now) => {
    livePrincipal(graph, input.owner, 'owner');
    const conflict = findOwnershipConflict(graph, { resources: scope.resources, fields: scope.fields }, now);
    if (conflict) {
      throw new WritError('OWNERSHIP_CONFLICT', `${input.resource} [${scope.fields.join(', ')}] is already owned by ${conflict.from} (edge ${conflict.id}); revoke that edge first`, {
        edge: conflict.id,
        owner: conflict.from,
      });
    }
  }, writer);
}

/** approves P → Q: P may approve Q's requests up to scope.constraints.risk_max. */
export async function createApproval(ctx: WritContext, caller: string, input: ApprovalInput, writer: GraphWriter = liveGraphWriter(ctx, caller)): Promise<EdgeResult> {
  requireGovernance(caller, 'create approval edges');
  const draft = {
    id: input.id, kind: 'approves' as EdgeKind, from: input.from, to: input.to, scope: normalizeScope(input.scope),
    max_depth: null, reason: input.reason, ...window(input.not_before, input.expires_at),
  };
  return createEdge(ctx, caller, draft, (graph) => {
    livePrincipal(graph, input.from, 'approver');
    livePrincipal(graph, input.to, 'approved principal');
  }, writer);
}

/** preempts P → Q (or → class:NAME): P may take over Q's leases during an active incident. */
export async function createPreemption(ctx: WritContext, caller: string, input: PreemptionInput, writer: GraphWriter = liveGraphWriter(ctx, caller)): Promise<EdgeResult> {
  requireGovernance(caller, 'create preemption edges');
  const draft = {
    id: input.id, kind: 'preempts' as EdgeKind, from: input.from, to: input.to,
    scope: normalizeScope({ actions: ['*'], resources: ['**'], risk_max: 0 }),
    max_depth: null, reason: input.reason, ...window(input.not_before, input.expires_at),
  };
  return createEdge(ctx, caller, draft, (graph) => {
    livePrincipal(graph, input.from, 'preempting principal');
    if (input.to.startsWith('class:')) {
      const cls = input.to.slice('class:'.length);
      if (ctx.config.priorities[cls] === undefined) throw new WritError('UNPROCESSABLE', `unknown priority class "${cls}"`);
    } else {
      livePrincipal(graph, input.to, 'preempted principal');
    }
  }, writer);
}

/**
 * Revokes an edge. Governance, the edge's creator or its `from` may revoke. Everything below it stops
 * counting at the next decision, and the gateway refuses decisions made before the revocation. An edge
 * the caller may not read (readableEdge) is UNKNOWN_EDGE, as one that does not exist; FORBIDDEN, which
 * names who may revoke it, is for a caller who may read it.
 */
export async function revokeEdge(ctx: WritContext, caller: string, id: string, reason: string): Promise<{ edge: Edge; revoked: boolean; graph_revision: number }> {
  checkReason(reason, 'a revocation');
  const asks = await whomMayAsk(ctx, caller);
  let changed = false;
  const revision = await commitGraphChange(ctx, caller, (graph, now): GraphEvent[] => {
    const edge = readableEdge(graph, caller, id, asks);
    if (!edge) throw unknownEdge(id);
    if (caller !== GOVERNANCE_ID && caller !== edge.creator && caller !== edge.from) {
      throw new WritError('FORBIDDEN', `${caller} may not revoke edge ${id} (only governance, its creator ${edge.creator} or ${edge.from})`);
    }
    if (edge.revoked_at !== null) return [];
    changed = true;
    return [{ type: 'edge.revoked', id, at: now, reason }];
  });
  const edge = (await ctx.graph.current()).edge(id)!;
  return { edge, revoked: changed, graph_revision: revision };
}
