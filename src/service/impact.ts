/**
 * Impact analysis: what a revocation (of an edge or a principal) or a new delegation would change —
 * capabilities lost or gained, live leases that would end at their next renewal, delegations that
 * would become (or stop being) orphans, approval edges that would stop counting. Computed on a copy
 * of the current graph (AuthorityGraph.fork); nothing is written.
 */
import { randomUUID } from 'node:crypto';
import { WritError } from '../errors.js';
import { checkAuthorityStillValid } from '../gateway/authority-watermark.js';
import { hasEdgeEnded, isEdgeLive, patternCovers, toPolicyEdge, type AuthorityGraph } from '../graph/index.js';
import { GOVERNANCE_ID, type Edge, type GraphEvent, type RecordedGraphEvent } from '../graph/model.js';
import type { DecisionClaims } from '../decision/index.js';
import type { PolicyEdge } from '../policy/types.js';
import { capabilitiesIn, orphansIn, type Orphan } from './audit-queries.js';
import { AUDIT_READ, auditKey, readableEdge, unknownEdge, whomMayAsk, type AsksAbout } from './ask-about.js';
import type { WritContext } from './context.js';
import { checkDelegationFits, checkNotEnded, delegationDraft, edgeIdTaken, type DelegationInput } from './edges.js';
import { checkScopeApplies } from './resources.js';
import { checkReason } from './validate.js';

export type ImpactChange =
  | { revoke: { edge: string; principal?: undefined } | { principal: string; edge?: undefined }; delegate?: undefined }
  | { delegate: DelegationInput; revoke?: undefined };

/** One capability: an action on a resource pattern in an environment, for these fields (`*`: every field). */
export interface CapabilityDelta {
  action: string;
  resource: string;
  environment: string;
  fields: string[];
  /** Edge ids of the chains that gave it (lost) or would give it (gained). */
  via: string[][];
}

export interface PrincipalImpact {
  principal: string;
  capabilities: CapabilityDelta[];
}

export interface LeaseImpact {
  lease_id: string;
  holder: string;
  keys: string[];
  /** Why its next renewal would be refused (AUTHORITY_REVOKED or OWNER_CHANGED, as the renewal would say). */
  code: string;
  reason: string;
}

export interface EdgeImpact {
  edge: PolicyEdge;
  reasons: string[];
}

export interface ImpactReport {
  /** The change analysed, as asked. */
  change: ImpactChange;
  /** The graph revision the copy was taken from; the live graph is still at it (nothing was written). */
  graph_revision: number;
  computed_at: number;
  /**
   * The principals whose capabilities the change can touch: the principal it revokes or the edge's
   * `to`, and everyone below them (grant/delegate edges); none for an edge that gives no capability
   * (owns, approves, preempts).
   */
  principals_examined: number;
  /**
   * False when `lost` and `gained` may be wrong for some principals: before or after the change they had
   * more chains adding to their valid ones than Writ judges for one principal (capabilitiesIn), so what
   * they hold was not fully known. Those principals are listed in `inexact_principals`.
   */
  exact: boolean;
  inexact_principals: string[];
  /**
   * Principals the caller may learn about only as the other ends of its own edges the change makes or
   * ends (no audit_read on them): their lost and gained count only the chains whose last edge is one of
   * those edges — what those edges give or gave, whether or not the principal holds it otherwise.
   */
  through_change_only: string[];
  lost: PrincipalImpact[];
  gained: PrincipalImpact[];
  leases_ending: LeaseImpact[];
  orphaned_delegations: EdgeImpact[];
  /** Delegations that are orphans now and would hold again (a new delegation restores their parent). */
  healed_delegations: EdgeImpact[];
  /** Live approves edges that would stop counting: approvals signed through them would no longer be accepted. */
  approvals_ending: EdgeImpact[];
}

/** How far below the change the analysis looks: chains are no longer than this (the resolver's default depth). */
const MAX_DEPTH = 6;

/**
 * What would change if `change` were made now. Who may ask, and about what:
 *
 * - governance, about anything;
 * - anyone, about a principal its authority covers action `audit_read` on `audit:principal:<id>` for
 *   (and about itself): the report may concern only such principals — those examined (lost, gained,
 *   principals_examined), lease holders, both ends of the orphaned, healed and ending edges, and both
 *   ends of a delegation proposed on another's behalf (checked before anything about them is looked up);
 * - the principal who could make the change itself (an edge's creator or `from`; a delegation's
 *   `from`) or a principal about its own revocation learns without `audit_read` only what is its own:
 *   itself and the other ends of the edges the change makes or ends (a delegation's `to` and what it
 *   would gain, a revoked edge's `to` and what it would lose, a revoked principal's neighbours), and of
 *   those ends only what comes through those edges: their lost and gained count only the chains whose
 *   last edge is one of them (`through_change_only` lists such principals), and a lease of theirs that
 *   would end through a chain ending otherwise, or a delegation not among those edges that would be
 *   orphaned or healed, is FORBIDDEN (its verdict is on the other's own chains). What those principals
 *   passed on further below is theirs, not the asker's: it needs `audit_read` as above.
 *
 * What each change can touch: revoking a grant or delegate edge, the capabilities of its `to` and of
 * everyone below (chains are made of grant and delegate edges only); revoking a principal, its own and
 * those below it, and every edge into or out of it; a delegation, its `to` and those below. An `owns`,
 * `approves` or `preempts` edge gives no capability and is on no chain, so revoking one examines
 * nobody: an ownership can end leases (OWNER_CHANGED), an approval ends itself (approvals_ending), a
 * preemption ends only future takeovers (nothing the report lists).
 *
 * A caller who may not ask gets FORBIDDEN naming no one it did not name (any principal below the change
 * it names would tell it who is there), and learns nothing of what it named: a principal it may not ask
 * about is FORBIDDEN before it is looked up (as checkMayAskAbout), and an edge it may not read (GET
 * /v1/edges/:id) is UNKNOWN_EDGE like one that does not exist. Governance and an auditor of the named
 * principal get the precise UNKNOWN_* codes. A delegation's `id` taken by an edge the caller may not
 * read is judged as if it were free, as POST /v1/delegations judges it: every check and error the same,
 * and a delegation that would otherwise be written is refused ALREADY_EXISTS saying only that the id is
 * taken (edgeIdTaken), which is what writing it would answer.
 */
export async function analyseImpact(ctx: WritContext, caller: string, change: ImpactChange): Promise<ImpactReport> {
  // Everything read from the store comes first: from the moment the live graph is taken the analysis
  // runs without awaiting, so the live graph (updated in place as it catches up) cannot move under it.
  const asks = await whomMayAsk(ctx, caller);
  const leases = await liveLeaseAuthorities(ctx);
  const now = ctx.clock.now();
  const before = await ctx.graph.current();
  const revision = before.revision;
  const planned = plan(ctx, before, caller, change, now, asks);
  const after = takeFork(before);
  const applied: RecordedGraphEvent[] = [];
  try {
    for (const event of planned.events) {
      const rec = { revision: after.revision + 1, event, actor: caller, at: now };
      after.apply(rec);
      applied.push(rec);
    }
    return analyse(ctx, caller, change, { ...planned, before, after, asks, leases, revision, now });
  } finally {
    giveBackFork(before, after, revision, applied);
  }
}

/**
 * Forks of the live graph, one kept per live graph between analyses: copying a 10,000-principal graph
 * costs more than analysing most changes on it, so the copy is reused while the live graph stays at
 * its revision. An analysis takes the spare fork (or makes one), applies its change, and gives it back
 * with the change undone; a fork in use is never shared.
 */
const spareForks = new WeakMap<AuthorityGraph, AuthorityGraph>();

function takeFork(live: AuthorityGraph): AuthorityGraph {
  const spare = spareForks.get(live);
  spareForks.delete(live);
  return spare !== undefined && spare.revision === live.revision ? spare : live.fork();
}

function giveBackFork(live: AuthorityGraph, fork: AuthorityGraph, revision: number, applied: RecordedGraphEvent[]): void {
  try {
    for (const rec of applied.reverse()) fork.undo(rec);
  } catch {
    return; // not reusable: dropped
  }
  if (fork.revision === revision && live.revision === revision) spareForks.set(live, fork);
}

function analyse(
  ctx: WritContext,
  caller: string,
  change: ImpactChange,
  { before, after, roots, asks, exempt, changeEdges, leases: held, revision, now }: Planned & { before: AuthorityGraph; after: AuthorityGraph; asks: AsksAbout; leases: LeaseAuthority[]; revision: number; now: number },
): ImpactReport {

  const examined = downstream(before, after, roots, now);
  const requireSubjects = (subjects: Iterable<string>) => {
    for (const s of subjects) if (!exempt.has(s) && !asks(s)) throw mayNotAsk(caller);
  };
  // Examined without audit_read: the roots and the `to`s of the change's own grant and delegate edges. Any
  // other exempt principal (a neighbour upstream, the other end of an approval or a preemption) that is
  // examined was reached further below, through others' edges: it is below, as anyone there.
  const endsBelow = new Set(roots);
  for (const id of changeEdges) {
    const edge = before.edge(id) ?? after.edge(id);
    if (edge && GIVES_CAPABILITIES.includes(edge.kind)) endsBelow.add(edge.to);
  }
  for (const s of examined) if (!asks(s) && !(exempt.has(s) && endsBelow.has(s))) throw mayNotAsk(caller);
  // Known to the caller only as the other end of one of its own edges the change makes or ends: of it the
  // caller learns only what comes through those edges.
  const throughChangeOnly = (p: string) => exempt.has(p) && !asks(p);
  const ownLast = (edge: { id: string }) => changeEdges.has(edge.id);

  const lost: PrincipalImpact[] = [];
  const gained: PrincipalImpact[] = [];
  const inexact: string[] = [];
  for (const principal of [...examined].sort()) {
    const last = throughChangeOnly(principal) ? ownLast : undefined;
    const [was, wasCut] = validScopes(ctx, before, principal, now, last);
    const [will, willCut] = validScopes(ctx, after, principal, now, last);
    if (wasCut || willCut) inexact.push(principal);
    const l = difference(was, will);
    const g = difference(will, was);
    if (l.length > 0) lost.push({ principal, capabilities: l });
    if (g.length > 0) gained.push({ principal, capabilities: g });
  }

  // Delegations judged by their delegator only: what a change does to the chains below it (a registry
  // problem is there before and after, and would hide a delegation the change orphans).
  const touches = (e: Edge) => examined.has(e.from);
  const orphanIds = (orphans: Orphan[]) => new Map(orphans.map((o) => [o.edge.id, o]));
  const orphansBefore = orphanIds(orphansIn(ctx, before, now, touches, { registry: false }));
  const orphansAfter = orphanIds(orphansIn(ctx, after, now, touches, { registry: false }));
  const orphaned = [...orphansAfter.values()].filter((o) => !orphansBefore.has(o.edge.id)).map((o) => ({ edge: toPolicyEdge(o.edge), reasons: o.violations }));
  const healed = [...orphansBefore.values()].filter((o) => !orphansAfter.has(o.edge.id)).map((o) => ({ edge: toPolicyEdge(o.edge), reasons: o.violations }));

  const approvals = approvalsEnding(before, after, now);
  const ending = leasesEnding(held, before, after, now);
  // An edge not the change's own, into a principal the caller knows only as an end of its own edges, is
  // one it may not read unless it may ask about its from (mayReadEdge), and its verdict (an orphan's is on
  // the delegator's chains) is not its to learn. Into a principal it may ask about, it is readable, and the
  // delegator's chains show in that one's; from one, they are that one's.
  for (const { edge } of [...approvals, ...orphaned, ...healed]) {
    requireSubjects([edge.from, edge.to]);
    if (!ownLast(edge) && throughChangeOnly(edge.to) && !asks(edge.from)) throw mayNotAsk(caller);
  }
  for (const { lease, failed } of ending) {
    requireSubjects([lease.holder]);
    if (throughChangeOnly(lease.holder) && !(failed.chain.length > 0 && ownLast({ id: failed.chain.at(-1)! }))) throw mayNotAsk(caller);
  }
  const leases = ending.map((l) => l.impact);

  return {
    change,
    graph_revision: revision,
    computed_at: now,
    principals_examined: examined.size,
    exact: inexact.length === 0,
    inexact_principals: inexact,
    through_change_only: [...examined].filter(throughChangeOnly).sort(),
    lost,
    gained,
    leases_ending: leases,
    orphaned_delegations: orphaned,
    healed_delegations: healed,
    approvals_ending: approvals,
  };
}

/** FORBIDDEN for a caller who may not ask about a change: it names no principal, so it tells nothing of who is below it. */
function mayNotAsk(caller: string): WritError {
  return new WritError('FORBIDDEN', `${caller} may not ask about this change: only governance, or a principal whose authority covers action ${AUDIT_READ} on ${auditKey('<id>')} for every principal the change concerns, may ask (the principal who could make the change itself may ask about itself and the other ends of its own edges the change makes or ends, not about what is below them)`);
}

interface Planned {
  events: GraphEvent[];
  /** The principals whose capabilities the change can touch, with everyone below them (downstream). */
  roots: string[];
  /** The principals the caller may learn about without audit_read (see analyseImpact). */
  exempt: ReadonlySet<string>;
  /** The ids of the edges the change makes or ends, when the change is the caller's own (else none). */
  changeEdges: ReadonlySet<string>;
}

/** Edge kinds that give capabilities: the only ones on a chain. */
const GIVES_CAPABILITIES: readonly Edge['kind'][] = ['grant', 'delegate'];

/**
 * The events the change would append, the principals it starts from, and the principals the caller
 * may learn about without audit_read (itself; when the change is its own, the ends of its own edges
 * the change makes or ends, see analyseImpact).
 */
function plan(ctx: WritContext, graph: AuthorityGraph, caller: string, change: ImpactChange, now: number, asks: AsksAbout): Planned {
  const asked = [change.revoke?.edge, change.revoke?.principal, change.delegate].filter((x) => x !== undefined).length;
  if (asked !== 1) throw new WritError('UNPROCESSABLE', 'name exactly one change: revoke.edge, revoke.principal or delegate');
  if (change.revoke?.edge !== undefined) {
    // An edge the caller may not read (as GET /v1/edges/:id) is as unknown to it as one that does not exist.
    const edge = readableEdge(graph, caller, change.revoke.edge, asks);
    if (!edge) throw unknownEdge(change.revoke.edge);
    const own = caller === edge.creator || caller === edge.from;
    const events: GraphEvent[] = edge.revoked_at === null ? [{ type: 'edge.revoked', id: edge.id, at: now, reason: 'impact analysis' }] : [];
    // An owns, approves or preempts edge is on no chain: revoking it changes nobody's capabilities.
    const roots = GIVES_CAPABILITIES.includes(edge.kind) ? [edge.to] : [];
    return { events, roots, exempt: new Set(own ? [caller, edge.from, edge.to] : [caller]), changeEdges: new Set(own ? [edge.id] : []) };
  }
  if (change.revoke?.principal !== undefined) {
    // Before the lookup (as checkMayAskAbout): an unknown principal and one the caller may not ask about alike.
    if (!asks(change.revoke.principal)) throw mayNotAsk(caller);
    const p = graph.principal(change.revoke.principal);
    if (!p) throw new WritError('UNKNOWN_PRINCIPAL', `no principal "${change.revoke.principal}"`);
    if (p.id === GOVERNANCE_ID) throw new WritError('UNPROCESSABLE', 'governance cannot be revoked');
    const events: GraphEvent[] = p.revoked_at === null ? [{ type: 'principal.revoked', id: p.id, at: now, reason: 'impact analysis' }] : [];
    const exempt = new Set([caller]);
    const changeEdges = new Set<string>();
    if (caller === p.id) {
      // The edges its revocation ends: one that ended already is no edge of the change's, nor its other end a neighbour.
      graph.forEachOutgoing(p.id, (e) => {
        if (hasEdgeEnded(e, now)) return;
        exempt.add(e.to);
        changeEdges.add(e.id);
      });
      graph.forEachIncoming(p.id, (e) => {
        if (hasEdgeEnded(e, now)) return;
        exempt.add(e.from);
        changeEdges.add(e.id);
      });
    }
    return { events, roots: [p.id], exempt, changeEdges };
  }
  const input = change.delegate!;
  if (!input || typeof input !== 'object') throw new WritError('UNPROCESSABLE', 'delegate must be a delegation (from, to, scope, reason)');
  const own = caller === input.from;
  // On another's behalf only who may ask about both ends, before anything about them is looked up:
  // POST /v1/delegations refuses such a caller at once too, telling nothing of either end.
  if (!own && !(asks(input.from) && asks(input.to))) throw mayNotAsk(caller);
  checkReason(input.reason ?? '', 'every edge');
  const draft = delegationDraft({ ...input, id: input.id ?? `impact-${randomUUID()}` });
  // An id taken by an edge the caller may read is refused at once; one it may not read is judged as if it
  // were free, as POST /v1/delegations judges it, and refused only at the end (edgeIdTaken, below).
  if (readableEdge(graph, caller, draft.id!, asks)) throw new WritError('ALREADY_EXISTS', `edge "${draft.id}" already exists`);
  checkNotEnded(draft.expires_at, now);
  const edge = { ...draft, id: draft.id!, creator: caller, created_at: now };
  checkScopeApplies(ctx.policy.data, edge.kind, edge.scope);
  checkDelegationFits(ctx, graph, { ...edge, revoked_at: null }, now, asks);
  if (graph.edge(edge.id)) throw edgeIdTaken(edge.id);
  return { events: [{ type: 'edge.created', edge }], roots: [draft.to], exempt: new Set(own ? [caller, draft.to] : [caller]), changeEdges: new Set(own ? [edge.id] : []) };
}

/**
 * The roots and every principal reachable from them over grant/delegate edges (in either graph), up to
 * MAX_DEPTH hops. An edge that has ended in a graph (revoked, or expired) is on no chain there, now or
 * later: a principal reachable only through such edges can lose or gain nothing by the change.
 */
function downstream(before: AuthorityGraph, after: AuthorityGraph, roots: string[], now: number): Set<string> {
  const seen = new Set<string>();
  let frontier = roots.filter((r) => r !== GOVERNANCE_ID && before.principal(r) !== undefined);
  for (const r of frontier) seen.add(r);
  for (let hop = 0; hop < MAX_DEPTH && frontier.length > 0; hop++) {
    const next: string[] = [];
    for (const id of frontier) {
      for (const g of [before, after]) {
        g.forEachOutgoing(id, (edge) => {
          if (GIVES_CAPABILITIES.includes(edge.kind) && !hasEdgeEnded(edge, now) && !seen.has(edge.to)) {
            seen.add(edge.to);
            next.push(edge.to);
          }
        });
      }
    }
    frontier = next;
  }
  return seen;
}

interface Held {
  key: string;
  action: string;
  resource: string;
  environment: string;
  fields: Set<string>;
  /** The chains that give it, each with the fields it gives. */
  via: { chain: string[]; fields: readonly string[] }[];
}

/**
 * The valid chains' final scopes of `principal` in `graph` (only those whose last edge passes `lastEdge`,
 * when given), one entry per action × resource pattern × environment, and whether the principal may hold
 * more (capabilitiesIn's `truncated`). Chains covered by another
 * valid chain may be left out: what they give is held anyway, so `difference` is the same.
 */
function validScopes(ctx: WritContext, graph: AuthorityGraph, principal: string, now: number, lastEdge?: (edge: Edge) => boolean): [held: Map<string, Held>, truncated: boolean] {
  const out = new Map<string, Held>();
  const p = graph.principal(principal);
  if (!p || p.revoked_at !== null) return [out, false];
  // Valid chains only: decide mode (live chains; `gives` passes every scope).
  const { capabilities, truncated } = capabilitiesIn(ctx, graph, principal, now, { gives: () => true, ...(lastEdge ? { lastEdge } : {}) });
  for (const c of capabilities) {
    if (!c.valid) continue;
    const chain = c.chain.map((e) => e.id);
    for (const action of c.scope.actions) {
      for (const resource of c.scope.resources) {
        for (const environment of c.scope.environments) {
          const key = JSON.stringify([action, resource, environment]);
          let held = out.get(key);
          if (!held) out.set(key, (held = { key, action, resource, environment, fields: new Set(), via: [] }));
          for (const f of c.scope.fields) held.fields.add(f);
          held.via.push({ chain, fields: c.scope.fields });
        }
      }
    }
  }
  return [out, truncated];
}

/**
 * What `a` holds that `b` does not: per action × resource pattern × environment, the fields no entry of
 * `b` covers, and the chains that give those fields (not those that give only fields `b` has too: they
 * are no part of the change, and the principal's other chains are not the asker's to see).
 */
function difference(a: Map<string, Held>, b: Map<string, Held>): CapabilityDelta[] {
  const out: CapabilityDelta[] = [];
  for (const held of a.values()) {
    const covered = new Set<string>();
    for (const other of b.values()) {
      if ((other.action === held.action || other.action === '*')
        && (other.environment === held.environment || other.environment === '*')
        && patternCovers(other.resource, held.resource)) {
        for (const f of other.fields) covered.add(f);
      }
    }
    if (covered.has('*')) continue;
    const fields = [...held.fields].filter((f) => !covered.has(f)).sort();
    const via = held.via.filter((v) => v.fields.some((f) => fields.includes(f))).map((v) => v.chain);
    if (fields.length > 0) out.push({ action: held.action, resource: held.resource, environment: held.environment, fields, via });
  }
  return out.sort((x, y) => x.action.localeCompare(y.action) || x.resource.localeCompare(y.resource) || x.environment.localeCompare(y.environment));
}

function approvalCounts(graph: AuthorityGraph, edge: Edge, now: number): boolean {
  const live = (id: string) => graph.principal(id)?.revoked_at === null;
  return isEdgeLive(edge, now) && live(edge.from) && live(edge.to);
}

function approvalsEnding(before: AuthorityGraph, after: AuthorityGraph, now: number): EdgeImpact[] {
  const out: EdgeImpact[] = [];
  for (const edge of before.edges()) {
    if (edge.kind !== 'approves' || !approvalCounts(before, edge, now)) continue;
    const will = after.edge(edge.id)!;
    if (approvalCounts(after, will, now)) continue;
    const reasons = will.revoked_at !== null ? [`approves edge ${edge.id} would be revoked`] : [edge.from, edge.to].filter((id) => after.principal(id)?.revoked_at !== null).map((id) => `principal ${id} would be revoked`);
    out.push({ edge: toPolicyEdge(edge), reasons });
  }
  return out.sort((a, b) => a.edge.id.localeCompare(b.edge.id));
}

interface LeaseAuthority {
  lease_id: string;
  holder: string;
  keys: string[];
  decisions: DecisionClaims[];
}

/** The live leases and the decisions each was taken with (renewals re-check those). */
async function liveLeaseAuthorities(ctx: WritContext): Promise<LeaseAuthority[]> {
  const held = new Map<string, string[]>();
  for (const rec of await ctx.leases.held()) {
    if (rec.leaseId === null) continue;
    held.set(rec.leaseId, [...(held.get(rec.leaseId) ?? []), rec.key]);
  }
  if (held.size === 0) return [];
  return ctx.store.read(async (tx) => {
    const out: LeaseAuthority[] = [];
    for (const [leaseId, keys] of held) {
      const a = await tx.leaseAuthority.get(leaseId);
      if (a) out.push({ lease_id: leaseId, holder: a.holder, keys: keys.sort(), decisions: a.decisions });
    }
    return out;
  });
}

/**
 * Live leases whose recorded authority holds in the live graph and would not in the changed one (the
 * renewal's own check), each with the decision its renewal would be refused for.
 */
function leasesEnding(leases: LeaseAuthority[], before: AuthorityGraph, after: AuthorityGraph, now: number): { lease: LeaseAuthority; failed: DecisionClaims; impact: LeaseImpact }[] {
  const failure = (lease: LeaseAuthority, graph: AuthorityGraph): { claims: DecisionClaims; error: WritError } | null => {
    for (const claims of lease.decisions) {
      try {
        checkAuthorityStillValid(graph, claims, now);
      } catch (e) {
        if (e instanceof WritError) return { claims, error: e };
        throw e;
      }
    }
    return null;
  };
  const out: { lease: LeaseAuthority; failed: DecisionClaims; impact: LeaseImpact }[] = [];
  for (const lease of leases) {
    if (failure(lease, before) !== null) continue;
    const f = failure(lease, after);
    if (f) out.push({ lease, failed: f.claims, impact: { lease_id: lease.lease_id, holder: lease.holder, keys: lease.keys, code: f.error.code, reason: f.error.message } });
  }
  return out.sort((a, b) => a.lease.lease_id.localeCompare(b.lease.lease_id));
}

