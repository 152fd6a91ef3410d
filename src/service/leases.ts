import { WritError } from '../errors.js';
import { callerNoLongerValid, callerOf, checkDecisionBinding, isReplayedAssertion, spendAssertion, type AuthenticatedCaller, type DecisionClaims } from '../decision/index.js';
import { isEdgeLive, type AuthorityGraph, type Edge, type PublicJwk, type RecordedGraphEvent } from '../graph/index.js';
import { checkAuthorityStillValid, checkNotRevokedSince, checkOwnersUnchangedSince, principalsOfChain } from '../gateway/authority-watermark.js';
import { coordinationKeys } from '../gateway/coordination-keys.js';
import { keyRoot } from '../wire/key-family.js';
import { AcquisitionWithdrawn, LEASE_PAGE, type LeaseGrant, type LeaseRecord, type PreemptedLease, type WaiterRow } from '../lease/index.js';
import type { StoreTx } from '../store/contract.js';
import { forOneOperation, type WritContext } from './context.js';
import { incidentsCounting } from './incidents.js';
import { verifyPresentedDecision } from './presented-decision.js';

export interface LeaseRequestInput {
  /** Allow decisions (tokens) for the writes this lease is for: a lease grants no authority, and authority is needed to take one. */
  decisions: string[];
  ttl_ms?: number;
  wait_ms?: number;
  /** Take the keys over during an active incident of the decisions' environment (needs a preempts edge over the holder). */
  preempt?: boolean;
  /** The caller's own lease token, which makes asking again safe (see AcquireRequest.token). */
  token?: string;
}

export interface LeaseOutcome extends LeaseGrant {
  keys: string[];
  holder: string;
}

/** Verifies a decision for use by `caller` at the gateway: signature, audience, expiry, caller, live chain. */
export async function verifyDecisionFor(ctx: WritContext, caller: string, token: string): Promise<DecisionClaims> {
  const now = ctx.clock.now();
  const claims = await verifyPresentedDecision(ctx, token, now);
  if (claims.principal !== caller) {
    checkDecisionBinding(claims, { principal: caller, action: claims.action, resource: claims.resource, environment: claims.environment, fields: claims.fields });
  }
  checkAuthorityStillValid(await ctx.graph.atLeast(claims.graph_revision), claims, now);
  return claims;
}

/** What lets `caller` take `holder`'s lease over: its live preempts edges over the holder (or the holder's class), and the graph revision they were read at. */
async function preemptsGrounds(ctx: WritContext, caller: string, holder: string, now: number): Promise<{ edges: Edge[]; revision: number }> {
  const graph = await ctx.graph.current();
  const holderClass = graph.principal(holder)?.priority_class;
  const edges = graph.outgoing(caller, ['preempts']).filter((e) => isEdgeLive(e, now) && (e.to === holder || (holderClass !== undefined && e.to === `class:${holderClass}`)));
  return { edges: edges.map((e) => ({ ...e })), revision: graph.revision };
}

/**
 * In an acquisition's transaction: the chains and owners of the decisions it presents, and for a
 * takeover the preempts edges it was checked on, must still hold against the graph events since they
 * were checked (from `since`, at or before every graph revision they were checked at), read from the
 * store under the graph log's shared lock (see GraphEventStore.head), so a revocation on another
 * replica either came before (and refuses the acquisition, as the check would have) or waits for its commit.
 */
async function graphEventsSinceCheck(tx: StoreTx, since: number): Promise<RecordedGraphEvent[]> {
  // The read is queued after the lock (they go in one message, in order): it sees every revocation committed before it.
  const [, events] = await Promise.all([tx.graph.head({ lock: 'share' }), tx.graph.read(since)]);
  return events;
}

/**
 * In an acquisition's transaction: the caller that authenticated when it asked (with a verified
 * assertion, or a lease stream's opening one) is still who it was (callerNoLongerValid) on `graph` with
 * `events`, the graph events read in the transaction since the checks, folded in: its principal still
 * there and unrevoked, still with the very key that signed the assertion. UNAUTHENTICATED
 * (CallerNoLongerValid) otherwise. Only looked into when one of the events is about its principal or the
 * principal has a revocation time: as a rule nothing is made here (the lease stream's hot path).
 */
function checkCallerStillValid(caller: AuthenticatedCaller, graph: AuthorityGraph, events: readonly RecordedGraphEvent[]): void {
  const id = caller.principal;
  const known = graph.principal(id);
  let changed = known === undefined || known.revoked_at !== null;
  for (const { event } of events) {
    if (event.type === 'principal.created' ? event.principal.id === id : (event.type === 'principal.keys_set' || event.type === 'principal.revoked') && event.id === id) changed = true;
  }
  if (!changed) return;
  const why = callerNoLongerValid(caller, (p) => (p === id ? principalAfter(graph, events, id) : graph.principal(p)));
  if (why) throw new CallerNoLongerValid(`${why} since it asked: the acquisition is not granted`);
}

/** Principal `id`'s keys and revocation on `graph` with `events` (from a revision at or before the graph's) folded in, as AuthorityGraph folds them. */
function principalAfter(graph: AuthorityGraph, events: readonly RecordedGraphEvent[], id: string): { keys: PublicJwk[]; revoked_at: number | null } | undefined {
  const known = graph.principal(id);
  let p = known === undefined ? undefined : { keys: known.keys, revoked_at: known.revoked_at };
  for (const { event } of events) {
    if (event.type === 'principal.created' && event.principal.id === id) p ??= { keys: event.principal.keys, revoked_at: null };
    else if (event.type === 'principal.keys_set' && event.id === id && p) p.keys = event.keys;
    else if (event.type === 'principal.revoked' && event.id === id && p && p.revoked_at === null) p.revoked_at = event.at;
  }
  return p;
}

/** An acquisition refused in its granting transaction: its caller is no longer who authenticated (see checkCallerStillValid). */
export class CallerNoLongerValid extends WritError {
  constructor(message: string) {
    super('UNAUTHENTICATED', message);
  }
}

function checkPreemptsStillHold(events: readonly RecordedGraphEvent[], caller: string, grounds: ReadonlyMap<string, { edges: Edge[]; revision: number }>, preempted: readonly PreemptedLease[], now: number): void {
  const revoked = new Map<string, number>();
  for (const { event, revision } of events) if (event.type === 'edge.revoked') revoked.set(event.id, revision);
  for (const p of preempted) {
    const g = grounds.get(p.holder);
    if (!g) continue;
    if (g.edges.some((e) => !revoked.has(e.id) && isEdgeLive(e, now))) continue;
    const why = g.edges.map((e) => (revoked.has(e.id) ? `${e.id} was revoked at graph revision ${revoked.get(e.id)}` : `${e.id} is no longer within its validity window`)).join(', ');
    throw new WritError('FORBIDDEN', `${caller} has no preempts edge over ${p.holder}, who holds ${p.key}, any more: ${why}, before the takeover committed`);
  }
}

export interface AcquireOptions {
  /**
   * Aborted when the caller went away (its lease stream closed): its answer can reach no one. A
   * waiting acquisition leaves the queue at once and takes nothing. One granted all the same (its
   * attempt was in the store as the caller went) is given back at once when Writ made its token, which
   * no one can ever learn; with the caller's own token it is kept (until its TTL) for the caller to claim
   * by asking again with that token. Each is told to `ctx.observer.abandonedAcquisition`.
   */
  callerGone?: AbortSignal;
  /**
   * The caller as it authenticated, for one given as a principal id (a lease stream's, authenticated
   * once by its upgrade): like a verified assertion's caller, it must still be who it was when the
   * acquisition is granted (see checkCallerStillValid), however long it waited in the queue.
   */
  authenticated?: AuthenticatedCaller;
}

/**
 * POST /v1/leases: the keys come from the decisions (agents never invent keys); priority comes from
 * the graph. The authority the lease was taken with is recorded in the granting transaction, and so
 * is the spend of the caller's assertion when it comes unspent: one commit per acquisition, and no
 * lease can exist without its authority record (renewals re-check it), even across a crash.
 */
export async function acquireLeases(ctx: WritContext, who: string | AuthenticatedCaller, input: LeaseRequestInput, options: AcquireOptions = {}): Promise<LeaseOutcome> {
  const gone = options.callerGone;
  const authenticated = typeof who === 'string' ? options.authenticated : who;
  if (!gone) return acquireFor(ctx, who, input, authenticated);
  const principal = typeof who === 'string' ? who : who.principal;
  let grant: LeaseOutcome;
  try {
    grant = await acquireFor(ctx, who, input, authenticated, gone);
  } catch (e) {
    if (e instanceof AcquisitionWithdrawn) ctx.observer.abandonedAcquisition({ outcome: 'withdrawn', principal, keys: [...e.keys], lease_id: null });
    throw e;
  }
  if (gone.aborted) await abandonGrant(ctx, principal, input, grant);
  return grant;
}

/** Grants given up already (by acquireLeases or by the transport that could not answer them): each is given up once. */
const abandonedGrants = new WeakSet<LeaseOutcome>();

/**
 * Gives up a grant whose answer cannot reach its caller, as acquireLeases does with one granted after
 * `callerGone` fired: released at once when Writ made its token, kept until its TTL for a replay with the
 * caller's own token; told to `ctx.observer.abandonedAcquisition`. For a transport that learns only once
 * acquireLeases has returned that the answer did not go out (a lease stream already CLOSING, a write that
 * failed). Once per grant: a second call, or a call for a grant acquireLeases gave up itself, does nothing.
 */
export async function abandonGrant(ctx: WritContext, principal: string, input: LeaseRequestInput, grant: LeaseOutcome): Promise<void> {
  // A replay took nothing now: the lease is the earlier acquisition's, taken with the caller's token.
  if (grant.replayed || abandonedGrants.has(grant)) return;
  abandonedGrants.add(grant);
  const keep = input.token !== undefined;
  // A lease already ended (expired, preempted) needs no giving back: the release's refusal says so, and is not the answer.
  if (!keep) await ctx.leases.release(grant.lease_id, grant.token).catch((e: unknown) => (e instanceof WritError && e.code.startsWith('LEASE_') ? undefined : Promise.reject(e)));
  // A takeover given back is a preemption wasted: the holders it displaced stay fenced out (their epoch is
  // past; they may take the keys again, at the next epoch). Nothing is undone: giving a displaced holder its
  // lease back would reuse an epoch, and keeping the keys until the TTL would hold them for no one during
  // an incident. It is told apart (its own outcome, and the holders it displaced) for an operator to see.
  const preempted = grant.preempted.map((p) => ({ lease_id: p.lease_id, holder: p.holder, key: p.key }));
  const outcome = keep ? 'kept_for_replay' : preempted.length > 0 ? 'released_after_preemption' : 'released';
  ctx.observer.abandonedAcquisition({ outcome, principal, keys: grant.keys, lease_id: grant.lease_id, ...(preempted.length > 0 ? { preempted } : {}) });
}

async function acquireFor(ctx: WritContext, who: string | AuthenticatedCaller, input: LeaseRequestInput, authenticated: AuthenticatedCaller | undefined, callerGone?: AbortSignal): Promise<LeaseOutcome> {
  let op = ctx;
  if (typeof who !== 'string' && (input.wait_ms ?? 0) > 0) {
    // A waiting acquisition may sit in the queue for up to maxWaitMs: its assertion is spent now, in
    // a commit of its own, so that no other process sharing the store can use it meanwhile.
    const waiting = who;
    await ctx.store.readWrite((tx) => spendAssertion(ctx.replay, tx, waiting, ctx.clock.now()));
    who = who.principal;
    // That commit may have waited: the decisions are judged on the graph as it is now.
    op = forOneOperation(ctx);
  }
  return spendingAssertion(op, who, (caller, spend) => acquire(op, caller, input, spend, authenticated, callerGone));
}

/**
 * Runs a lease operation for a caller whose assertion may still be unspent: the operation spends it
 * in its own transaction (`alsoCommit`), and a refused one spends it afterwards. If that later spend
 * finds it spent by someone else (the assertion is a replay: nothing read it from the store before),
 * the answer is the replay's 401, never the operation's refusal, which would tell a replayer who holds
 * a key; if this operation spent it itself (e.g. with the release that ends a revoked lease), the
 * operation's own answer stands.
 */
async function spendingAssertion<T>(
  ctx: WritContext,
  who: string | AuthenticatedCaller,
  op: (caller: string, spend: (tx: StoreTx) => Promise<void>, spentWith: () => void) => Promise<T>,
): Promise<T> {
  const { principal, spend } = callerOf(who, ctx.replay, () => ctx.clock.now());
  // An authenticated principal (the lease stream's) has nothing to spend: no transaction after a refusal.
  if (typeof who === 'string') return op(principal, spend, () => {});
  // Set only once a transaction carrying the spend has COMMITTED (`spentWith`): a callback that ran the
  // spend may still roll back (a retry, a deferred refusal rerun), and then the spend did not happen.
  let spentByOp = false;
  try {
    return await op(principal, spend, () => (spentByOp = true));
  } catch (refusal) {
    try {
      await ctx.store.readWrite(spend);
    } catch (e) {
      throw isReplayedAssertion(e) && spentByOp ? refusal : e;
    }
    throw refusal;
  }
}

async function acquire(ctx: WritContext, caller: string, input: LeaseRequestInput, spend: (tx: StoreTx) => Promise<void>, authenticated: AuthenticatedCaller | undefined, callerGone?: AbortSignal): Promise<LeaseOutcome> {
  if (input.decisions.length === 0) throw new WritError('UNPROCESSABLE', 'a lease needs at least one allow decision');
  const keys = new Set<string>();
  const authority: DecisionClaims[] = [];
  // At or before the graph each decision's chain and owners are checked on (a takeover checks them again).
  const chainsCheckedAt = ctx.graph.latest.revision;
  for (const token of input.decisions) {
    const claims = await verifyDecisionFor(ctx, caller, token);
    // No lease for state this Writ cannot write (e.g. a staging decision where only production is routed).
    ctx.upstreams.checkLeasable(claims.resource, claims.environment);
    authority.push(claims);
    const needed = coordinationKeys(claims.resource, claims.fields, claims.obligations);
    if (needed.length === 0) throw new WritError('UNPROCESSABLE', noLeaseNeeded(claims));
    for (const k of needed) keys.add(k);
  }
  const principal = (await ctx.graph.current()).principal(caller);
  if (!principal) throw new WritError('UNKNOWN_PRINCIPAL', `no principal ${caller}`);
  const now = ctx.clock.now();
  const preemptable = new Set<string>([caller]);
  let preempt = false;
  // Per environment, the incidents that let this acquisition preempt there (checked again when it commits).
  let incidents = new Map<string, string[]>();
  // Per holder checked, the preempts edges that allow taking its lease over (checked again when it commits).
  const grounds = new Map<string, { edges: Edge[]; revision: number }>();
  if (input.preempt) {
    incidents = await incidentsCounting(ctx, environmentsOf(authority));
    requireIncidents(incidents, environmentsOf(authority), 'the decisions presented are for');
    // The key and the keys of its family it conflicts with: a takeover of the key takes their leases over too.
    for (const rec of await overlappingRecords(ctx, [...keys])) {
      const key = rec.key;
      if (rec.state === 'HELD' && rec.holderIdentity && rec.holderIdentity !== caller) {
        const allowedBy = await preemptsGrounds(ctx, caller, rec.holderIdentity, now);
        if (allowedBy.edges.length === 0) throw new WritError('FORBIDDEN', `${caller} has no preempts edge over ${rec.holderIdentity}, who holds ${key}`);
        if (!grounds.has(rec.holderIdentity)) grounds.set(rec.holderIdentity, allowedBy);
        // Keys are not per environment: the lease taken over must be in an environment with an incident too.
        const held = rec.leaseId === null ? undefined : await ctx.store.read((tx) => tx.leaseAuthority.get(rec.leaseId!));
        const heldIn = environmentsOf(held?.decisions ?? []).filter((e) => !incidents.has(e));
        for (const [e, ids] of await incidentsCounting(ctx, heldIn)) incidents.set(e, ids);
        requireIncidents(incidents, environmentsOf(held?.decisions ?? []), `${rec.holderIdentity} holds ${key} with decisions for`);
        preemptable.add(rec.holderIdentity);
        preempt = true;
      }
    }
  }
  // The graph events since the checks, read in the acquiring transaction (by `check`).
  let sinceCheck: RecordedGraphEvent[] = [];
  const grant = await ctx.leases.acquire({
    resources: [...keys],
    holder: caller,
    priority: principal.priority,
    ttlMs: input.ttl_ms ?? ctx.config.lease.defaultTtlMs,
    ...(input.wait_ms !== undefined ? { waitMs: input.wait_ms } : {}),
    // The takeover itself is conditional on the holders checked here: if another holder took a key in
    // between, the acquisition is refused (RESOURCE_BUSY) instead of preempting someone unchecked.
    // Only a key held by someone the caller may preempt is taken over; otherwise this is an ordinary
    // acquisition that respects the wait queue (preempting nobody must not jump the queue).
    ...(preempt ? { preempt: true, preemptable: [...preemptable] } : {}),
    ...(input.token !== undefined ? { token: input.token } : {}),
    ...(callerGone ? { signal: callerGone } : {}),
    // Every acquisition, not only a takeover: the chains and owners of the decisions presented were
    // checked on this replica's graph, which may not have folded in a revocation or an ownership change
    // another replica committed a moment ago. The graph events since the checks (and since the
    // preemption was checked) are read beside the acquisition, under the graph log's shared lock (a
    // change racing it waits for its commit). Same message: no round trip more.
    check: async (tx) => {
      sinceCheck = await graphEventsSinceCheck(tx, Math.min(chainsCheckedAt, ...[...grounds.values()].map((g) => g.revision)));
      const graph = ctx.graph.latest;
      // A waiter's turn may come long after its caller authenticated: a key replaced or a principal
      // revoked meanwhile refuses the grant (the queue moves on to the next waiter).
      if (authenticated) checkCallerStillValid(authenticated, graph, sinceCheck);
      for (const claims of authority) {
        checkNotRevokedSince(sinceCheck, claims, principalsOfChain(graph, claims));
        checkOwnersUnchangedSince(graph, sinceCheck, claims, ctx.clock.now());
      }
    },
    alsoCommit: async (tx, leaseId, preempted) => {
      if (preempted.length > 0) {
        // An incident resolved (or ended) since it was counted preempts nothing: the takeover rolls back.
        // Read under a shared lock: an incident resolved on another replica before this commits would
        // otherwise go unseen (READ COMMITTED); its resolve now waits for this takeover to commit.
        // So is one whose declarer was revoked since it was counted (the graph events read by the check).
        const live = stillActive(incidents, await tx.incidents.active(ctx.clock.now(), { lock: 'share' }), revokedPrincipals(sinceCheck));
        requireIncidents(live, [...incidents.keys()], 'the takeover needs');
        // What was really taken over, read in this transaction: a lease checked above may have ended and
        // its holder taken the key again, with decisions for another environment, before this commit.
        for (const p of new Map(preempted.map((x) => [x.lease_id, x])).values()) {
          const held = await tx.leaseAuthority.get(p.lease_id);
          if (!held) throw new WritError('NO_INCIDENT', `${p.holder} holds ${p.key} under lease ${p.lease_id}, whose decisions Writ has no record of: it is not taken over`, { environments: [] });
          requireIncidents(live, environmentsOf(held.decisions), `${p.holder} holds ${p.key} with decisions for`);
        }
        // The graph events the check read in this transaction, under the lock it still holds.
        checkPreemptsStillHold(sinceCheck, caller, grounds, preempted, ctx.clock.now());
      }
      await spend(tx);
      await tx.leaseAuthority.record(leaseId, caller, authority, now);
    },
  });
  // A replay took nothing, so no transaction spent the caller's assertion: spend it before answering (a
  // replayed assertion is refused, never answered with the lease).
  if (grant.replayed) await ctx.store.readWrite(spend);
  // A literal, not `{ ...grant, keys, holder }`: see test/architecture/spread-then-add.test.ts.
  return {
    lease_id: grant.lease_id, token: grant.token, epochs: grant.epochs, expires_at: grant.expires_at, preempted: grant.preempted,
    keys: Object.keys(grant.epochs).sort(), holder: caller, replayed: grant.replayed,
  };
}

/**
 * The records of each of `keys` and of the keys of its family it conflicts with (src/wire/key-family.ts):
 * a field key's resource key, or a resource key's fields' keys (one range read of the key index).
 */
async function overlappingRecords(ctx: WritContext, keys: string[]): Promise<LeaseRecord[]> {
  const records: (LeaseRecord | undefined)[] = [];
  for (const key of keys) {
    records.push(await ctx.leases.describe(key));
    const root = keyRoot(key);
    if (root === key) records.push(...(await ctx.leases.list({ resource: key })).filter((r) => r.key !== key));
    else records.push(await ctx.leases.describe(root));
  }
  return records.filter((r): r is LeaseRecord => r !== undefined);
}

function environmentsOf(decisions: readonly DecisionClaims[]): string[] {
  return [...new Set(decisions.map((d) => d.environment))].sort();
}

/** NO_INCIDENT unless every one of `environments` has an incident that counts there. */
function requireIncidents(incidents: ReadonlyMap<string, string[]>, environments: readonly string[], what: string): void {
  const without = environments.filter((e) => (incidents.get(e) ?? []).length === 0);
  if (without.length === 0) return;
  throw new WritError('NO_INCIDENT', `preemption is only possible during an active incident declared for the environment of the lease: ${what} ${environments.join(', ')}, `
    + `and no incident is active in ${without.join(', ')}`, { environments: without });
}

function stillActive(incidents: ReadonlyMap<string, string[]>, active: readonly { id: string; declared_by: string }[], revokedSince: ReadonlySet<string>): Map<string, string[]> {
  const live = new Set(active.filter((i) => !revokedSince.has(i.declared_by)).map((i) => i.id));
  return new Map([...incidents].map(([e, ids]) => [e, ids.filter((id) => live.has(id))]));
}

/** The principals these graph events revoke. */
function revokedPrincipals(events: readonly RecordedGraphEvent[]): Set<string> {
  const out = new Set<string>();
  for (const { event } of events) if (event.type === 'principal.revoked') out.add(event.id);
  return out;
}

/** Why a decision takes no lease, naming each written field's class, and what to do instead. */
function noLeaseNeeded(claims: DecisionClaims): string {
  const { resource_class: resourceClass, field_classes: fieldClasses, version_required: versionRequired } = claims.obligations;
  const classes = claims.fields.length === 0
    ? `${claims.resource} is ${resourceClass}`
    : claims.fields.map((f) => `${claims.resource}#${f} is ${Object.hasOwn(fieldClasses, f) ? fieldClasses[f] : resourceClass}`).join(', ');
  return `no lease to take: ${classes} (the decision's obligations say lease_required: false). `
    + `Send the write straight to POST /v1/actions with its decision and no lease headers${versionRequired ? ', with expected_version (the version you read)' : ''}; `
    + 'the SDK\'s withLease does this by itself.';
}

/** A renewal's check met a decision of the lease made on a graph newer than this replica's (renewLease catches up and checks again). */
class GraphBehindDecision extends Error {
  constructor(readonly revision: number) {
    super(`this replica's graph is behind graph revision ${revision}, a decision of the lease was made on`);
  }
}

/**
 * The check a renewal or release makes in its own transaction, beside the lease statement: the lease
 * is the caller's (LEASE_TOKEN_MISMATCH otherwise), and, for a renewal, the authority it was taken
 * with still holds in `graph` and in the graph events the store has since: no chain edge or principal
 * revoked, the owners of its state unchanged (else `revoked` is told the error, which is thrown too).
 */
function authorityCheck(ctx: WritContext, caller: string, leaseId: string, graph?: AuthorityGraph, revoked?: (e: unknown) => void, mayCatchUp = false) {
  return async (tx: StoreTx): Promise<void> => {
    if (!graph) {
      const holder = await tx.leaseAuthority.holderOf(leaseId);
      if (holder !== undefined && holder !== caller) throw new WritError('LEASE_TOKEN_MISMATCH', `lease ${leaseId} is not ${caller}'s`);
      return;
    }
    // This replica's graph may not have folded in a revocation or an ownership change another replica committed a moment ago:
    // the events since it are read from the store beside the authority record, under the graph log's
    // shared lock (a revocation racing the renewal waits for its commit). Same message: no round trip more.
    const since = graph.revision;
    const [lease, , events] = await Promise.all([tx.leaseAuthority.get(leaseId), tx.graph.head({ lock: 'share' }), tx.graph.read(since)]);
    if (!lease) return;
    if (lease.holder !== caller) throw new WritError('LEASE_TOKEN_MISMATCH', `lease ${leaseId} is not ${caller}'s`);
    // A decision made on another replica, on a graph this one has not been told of yet: judged on this
    // older graph its chain or owners would seem changed, and the lease would end. Judged again once caught up.
    const newest = Math.max(...lease.decisions.map((c) => c.graph_revision));
    if (mayCatchUp && newest > graph.revision) throw new GraphBehindDecision(newest);
    try {
      for (const claims of lease.decisions) {
        checkAuthorityStillValid(graph, claims, ctx.clock.now());
        checkNotRevokedSince(events, claims, principalsOfChain(graph, claims));
        checkOwnersUnchangedSince(graph, events, claims, ctx.clock.now());
      }
    } catch (e) {
      revoked?.(e);
      throw e;
    }
  };
}

/**
 * Renewal keeps a lease only while its holder still has the authority it was taken with: a revoked
 * chain (or owner change) ends the lease at the next renewal instead of letting it lock the resource
 * for as long as someone keeps renewing. Only the holder renews. The authority is read in the
 * renewing transaction, beside the renewal (which it rolls back when it refuses).
 */
export async function renewLease(ctx: WritContext, who: string | AuthenticatedCaller, leaseId: string, token: string, ttlMs?: number) {
  return spendingAssertion(ctx, who, async (caller, spend, spentWith) => {
    let graph = await ctx.graph.current();
    let revocation: unknown;
    const renew = (mayCatchUp: boolean) => ctx.leases.renew(leaseId, token, ttlMs, { alsoCommit: spend, check: authorityCheck(ctx, caller, leaseId, graph, (e) => (revocation = e), mayCatchUp) });
    try {
      try {
        return await renew(true);
      } catch (e) {
        if (!(e instanceof GraphBehindDecision)) throw e;
        // Rolled back, nothing changed: once more on the graph caught up to the lease's decisions.
        graph = await ctx.graph.atLeast(e.revision);
        return await renew(false);
      }
    } catch (e) {
      if (revocation === undefined || e !== revocation) throw e;
      // The token proves the caller holds it: give the keys back (spending the assertion with that
      // release) before refusing.
      await ctx.leases.release(leaseId, token, { alsoCommit: spend }).then(spentWith, () => undefined);
      throw e;
    }
  });
}

export async function releaseLease(ctx: WritContext, who: string | AuthenticatedCaller, leaseId: string, token: string) {
  return spendingAssertion(ctx, who, (caller, spend) => ctx.leases.release(leaseId, token, { alsoCommit: spend, check: authorityCheck(ctx, caller, leaseId) }));
}

/** What GET /v1/leases and writ lease ls ask for: every filter narrows; `after` and `limit` page the list. */
export interface LeaseListQuery {
  /** That key only. */
  key?: string;
  /** The resource's key and its fields' keys (resource#field). */
  resource?: string;
  holder?: string;
  /** HELD: only the keys held now, read as such (not paged: bounded by the live leases, not by the keys ever used). */
  state?: 'HELD';
  /** The `next` of the previous page: the last key it gave. */
  after?: string;
  /** At most this many records, from 1 to LEASE_PAGE.maxLimit (default LEASE_PAGE.defaultLimit). */
  limit?: number;
}

export interface LeaseListPage {
  leases: LeaseRecord[];
  /** Pass as `after` for the next page; null on the last (and always with state HELD). */
  next: string | null;
}

/**
 * Lease records in key order, a page at a time: one range of the key index after `after`, so a page
 * costs the same with a million keys ever leased as with ten. With `state: 'HELD'` only the keys held
 * now, read as such (never every key ever leased), then narrowed to the key, resource and holder asked;
 * not paged (UNPROCESSABLE with `after` or `limit`).
 */
export async function listLeases(ctx: WritContext, query: LeaseListQuery = {}): Promise<LeaseListPage> {
  const { state, after, limit, ...narrow } = query;
  if (state === 'HELD') {
    if (after !== undefined || limit !== undefined) {
      throw new WritError('UNPROCESSABLE', 'the keys held now (state HELD) come in one answer, not in pages: leave out `after` and `limit`');
    }
    const { key, resource, holder } = narrow;
    const held = (await ctx.leases.held()).filter((r) => (key === undefined || r.key === key)
      && (resource === undefined || r.key === resource || r.key.startsWith(`${resource}#`)) && (holder === undefined || r.holderIdentity === holder));
    return { leases: held, next: null };
  }
  const n = limit ?? LEASE_PAGE.defaultLimit;
  if (!Number.isSafeInteger(n) || n < 1 || n > LEASE_PAGE.maxLimit) throw new WritError('UNPROCESSABLE', `a page of leases has from 1 to ${LEASE_PAGE.maxLimit} records, not ${String(n)}`);
  // One more than the page, to know whether there is a next one.
  const rows = await ctx.leases.list(Object.assign({}, narrow, after !== undefined ? { after } : {}, { limit: n + 1 }));
  const page = rows.slice(0, n);
  return { leases: page, next: rows.length > n ? page[page.length - 1]!.key : null };
}

/** The wait queues: every key with live waiters, each in service order (governed priority, then age). */
export function waitQueues(ctx: WritContext): Promise<{ key: string; waiters: WaiterRow[] }[]> {
  return ctx.leases.queues();
}
