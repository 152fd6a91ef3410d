import { ERROR_CATALOGUE, WritError, isWritError, type ErrorCode } from '../errors.js';
import { callerOf, checkDecisionBinding, decisionSpendRefused, type AuthenticatedCaller, type DecisionClaims } from '../decision/index.js';
import { requestHash, type PresentedLease, type Receipt, type ReceiptError, type ReceiptIntent } from '../audit/index.js';
import { checkAuthorityStillValid, checkNotRevokedSince, checkOwnersUnchangedSince, coordinationKeys, parseFencingHeader, principalsOfChain, type UpstreamRoute } from '../gateway/index.js';
import type { AuthorityGraph } from '../graph/index.js';
import { leaseIdOfToken } from '../lease/token.js';
import type { StoreTx } from '../store/contract.js';
import type { WritContext } from './context.js';
import { canonicalResource, checkFieldSpelling } from './resources.js';
import { verifyPresentedDecision } from './presented-decision.js';

/** A leased write is not forwarded with less lease than this left: it would only time out as PENDING. */
const MIN_LEASE_LEFT_MS = 100;
/** Below this much of the upstream timeout left since the receipt's creation, a write is not forwarded. */
const MIN_FORWARD_MS = 100;

/** The body of POST /v1/actions. */
export interface ActionInput {
  action: string;
  resource: string;
  environment?: string;
  fields: string[];
  /** New values of `fields` (exactly those). */
  payload: Record<string, unknown>;
  /** The resource version the caller read; required when the resource class asks for it. */
  expected_version?: number;
}

/** The Writ-* headers of a write. */
export interface ActionCredentials {
  decision?: string | undefined;
  leaseToken?: string | undefined;
  leaseId?: string | undefined;
  fencingEpoch?: string | undefined;
  idempotencyKey?: string | undefined;
}

export interface ActionOutcome {
  receipt: Receipt;
  /** True when an Idempotency-Key retry returned the first receipt without a second upstream call. */
  replayed: boolean;
  /** Where a forwarded write's time went (absent on an idempotent replay, which forwards nothing). */
  timings?: ActionTimings;
}

/**
 * Milliseconds spent in each step of a forwarded write, from the monotonic clock (`performance.now()`,
 * not the injected wall clock). The HTTP layer returns them as `Server-Timing`, so an agent or an
 * operator can tell Writ's own time (checks and the two commits) from the upstream's.
 */
export interface ActionTimings {
  /** Everything before the intent: the idempotency lookup, the decision and its binding, the authority
   *  watermark, leases and fencing epochs, the route. */
  checks: number;
  /** The intent's commit, durable before the forward (with the assertion's and decision's spend). */
  intent: number;
  /** From the forward to the upstream's answer. */
  upstream: number;
  /** The settlement's commit, durable before the answer. */
  settle: number;
}

/** What the first step learns about a write: its canonical form and its hash. */
interface IdentifiedWrite {
  caller: string;
  resource: string;
  fields: string[];
  hash: string;
}

/** What the checks let through: the verified decision, the fence of every coordination key, the route. */
interface CheckedWrite {
  claims: DecisionClaims;
  /** The lease the write is fenced by (the one that expires first), if any key needed one. */
  fence: { lease_id: string; epoch: number; expires_at: number } | undefined;
  /** The epoch Writ checked for each coordination key: exactly what goes upstream. */
  fenced: Record<string, number>;
  route: UpstreamRoute;
  /** The principals the decision's authority rests on, re-checked against the store at the intent. */
  principals: string[];
  /** This process's graph the checks ran on (live: it may have moved on by the intent). */
  graph: AuthorityGraph;
}

/**
 * The enforcement point: the only way a write reaches the upstream. In order: identify the request
 * (and answer an Idempotency-Key retry from its first receipt), check it (the decision's signature,
 * audience, expiry and binding to exactly this request; the authority watermark; the lease and
 * fencing epoch of every coordination key; the version precondition; the route), record the intent
 * (one transaction: the assertion and the decision spent, revocations re-checked against the store),
 * forward, and settle the receipt. A refusal changes neither the upstream nor the leases, and is
 * itself recorded as a REJECTED receipt.
 */
export async function performAction(ctx: WritContext, who: string | AuthenticatedCaller, input: ActionInput, creds: ActionCredentials): Promise<ActionOutcome> {
  // An assertion verified but not yet spent is spent here, in the first transaction that records
  // what this request did (its intent or its rejection): one commit per write fewer. `spend` throws
  // UNAUTHENTICATED (replayed) when a concurrent request spent it first.
  const { principal: caller, spend } = callerOf(who, ctx.replay, () => ctx.clock.now());
  const started = performance.now();
  let write: IdentifiedWrite;
  let first: Receipt | null;
  try {
    write = identifyWrite(ctx, caller, input);
    // IDEMPOTENCY_MISMATCH (the key names another request) is thrown from here.
    first = creds.idempotencyKey ? await ctx.receipts.findReplay(caller, creds.idempotencyKey, write.hash) : null;
  } catch (e) {
    // Not a write anyone could take for one (no receipt), but the assertion is used up all the same.
    await ctx.store.readWrite(spend);
    throw e;
  }
  if (first) {
    await ctx.store.readWrite(spend);
    return replayOf(first);
  }

  let claims: DecisionClaims | undefined;
  const refuse = (e: unknown) => recordRefusal(ctx, write, input, creds, claims, spend, e);
  let checked: CheckedWrite;
  try {
    checked = await checkWrite(ctx, write, input, creds, (c) => (claims = c));
  } catch (e) {
    throw await refuse(e);
  }

  const intentAt = performance.now();
  let pending: Receipt;
  try {
    pending = await recordIntent(ctx, write, input, creds, checked, spend);
  } catch (e) {
    throw await refuse(e);
  }
  if (pending.replayed) return replayOf(pending);

  const forwardedAt = performance.now();
  const outcome = await forwardAndSettle(ctx, write, input, checked, pending);
  const settledAt = performance.now();
  // The new key before the spread: see test/architecture/spread-then-add.test.ts.
  return {
    timings: { checks: intentAt - started, intent: forwardedAt - intentAt, upstream: outcome.answeredAt - forwardedAt, settle: settledAt - outcome.answeredAt },
    ...outcome,
  };
}

/** The canonical resource, the field set, and the hash an Idempotency-Key is bound to. */
function identifyWrite(ctx: WritContext, caller: string, input: ActionInput): IdentifiedWrite {
  const fields = [...new Set(input.fields)].sort();
  const resource = canonicalResource(ctx.policy.data, input.resource);
  checkFieldSpelling(fields, 'fields');
  const payloadFields = Object.keys(input.payload).sort();
  if (payloadFields.join('\n') !== fields.join('\n')) {
    throw new WritError('UNPROCESSABLE', `payload must carry exactly the fields named in fields [${fields.join(', ')}], got [${payloadFields.join(', ')}]`);
  }
  const hash = requestHash({ principal: caller, action: input.action, resource, environment: input.environment ?? null, fields, payload: input.payload, expected_version: input.expected_version ?? null });
  return { caller, resource, fields, hash };
}

/** Every check before the intent; `onClaims` hands the verified decision to the refusal's receipt. */
async function checkWrite(ctx: WritContext, w: IdentifiedWrite, input: ActionInput, creds: ActionCredentials, onClaims: (c: DecisionClaims) => void): Promise<CheckedWrite> {
  if (!creds.decision) throw new WritError('DECISION_INVALID', 'the Writ-Decision header is missing; ask POST /v1/decisions first');
  const now = ctx.clock.now();
  const claims = await verifyPresentedDecision(ctx, creds.decision, now);
  onClaims(claims);
  checkDecisionBinding(claims, { principal: w.caller, action: input.action, resource: w.resource, environment: input.environment ?? claims.environment, fields: w.fields });
  const graph = await ctx.graph.atLeast(claims.graph_revision);
  checkAuthorityStillValid(graph, claims, now);
  if (claims.obligations.version_required && input.expected_version === undefined) {
    throw new WritError('VERSION_REQUIRED', `${w.resource} is ${claims.obligations.resource_class}: send expected_version (the version you read)`);
  }
  const { fence, fenced } = await checkFences(ctx, w, claims, creds);
  if (fence && fence.expires_at - ctx.clock.now() < MIN_LEASE_LEFT_MS) {
    throw new WritError('LEASE_EXPIRED', `the lease on ${Object.keys(fenced).join(', ')} has less than ${MIN_LEASE_LEFT_MS} ms left; renew it before writing`);
  }
  // The decision's environment picks the upstream: a staging decision never reaches production state.
  const route = ctx.upstreams.route(w.resource, claims.environment);
  return { claims, fence, fenced, route, principals: principalsOfChain(graph, claims), graph };
}

/** The lease and fencing epoch of every coordination key the decision names. */
async function checkFences(ctx: WritContext, w: IdentifiedWrite, claims: DecisionClaims, creds: ActionCredentials): Promise<Pick<CheckedWrite, 'fence' | 'fenced'>> {
  const keys = coordinationKeys(w.resource, w.fields, claims.obligations);
  const fenced: Record<string, number> = {};
  let fence: CheckedWrite['fence'];
  if (keys.length === 0) return { fence, fenced };
  if (!creds.leaseToken) throw new WritError('LEASE_REQUIRED', `writing ${w.resource} [${w.fields.join(', ')}] needs a lease on ${keys.join(', ')}`, { keys });
  const fencing = parseFencingHeader(creds.fencingEpoch, keys);
  if (!fencing) throw new WritError('STALE_FENCING_EPOCH', `the Writ-Fencing-Epoch header is missing; send the epoch of ${keys.join(', ')} from your lease`);
  for (const key of keys) {
    const epoch = fencing.get(key);
    if (epoch === undefined) throw new WritError('STALE_FENCING_EPOCH', `no fencing epoch given for ${key}`);
    const check = await ctx.leases.validateFence({ key, token: creds.leaseToken, epoch, principal: w.caller, now: ctx.clock.now(), ...(creds.leaseId ? { lease_id: creds.leaseId } : {}) });
    fenced[key] = check.epoch;
    if (!fence || check.expires_at < fence.expires_at) fence = { lease_id: check.lease_id, epoch: check.epoch, expires_at: check.expires_at };
  }
  return { fence, fenced };
}

/**
 * One transaction, one sync: the assertion and the decision are spent exactly when the intent is on
 * record (a concurrent retry under the same Idempotency-Key spends nothing), and no edge or principal
 * of the chain was revoked in the store since the decision, nor the owners of the written state
 * changed, whichever replica changed them, before the intent commits (a change racing it commits after
 * it). On
 * PostgreSQL two round trips: the assertion's spend, the intent's append (one statement), the graph
 * log's shared lock and the graph re-read in one message; the decision's spend with the COMMIT. The settlement is one more (ReceiptLog.complete).
 */
async function recordIntent(ctx: WritContext, w: IdentifiedWrite, input: ActionInput, creds: ActionCredentials, c: CheckedWrite, spend: (tx: StoreTx) => Promise<void>): Promise<Receipt> {
  const { claims, fence } = c;
  const intent: ReceiptIntent = {
    principal: w.caller, action: input.action, resource_key: w.resource, fields: w.fields,
    owners: [...new Set(Object.values(claims.owners).filter((o): o is string => o !== null))].sort(),
    authority_epoch: claims.graph_revision, ownership_epoch: claims.graph_revision,
    decision_id: claims.decision_id, policy_revision: claims.policy_revision, graph_revision: claims.graph_revision,
    chain: claims.chain, lease_id: fence?.lease_id ?? null, lease_epoch: fence?.epoch ?? null,
    expected_version: input.expected_version ?? null, idempotency_key: creds.idempotencyKey ?? null, request_hash: w.hash,
  };
  return ctx.store.readWrite(async (tx) => {
    // The spends' outcomes are known at the commit (a replay fails the transaction); the graph is
    // re-read in the same message as the intent's first statement (asked together), after it in order,
    // under the graph log's shared lock taken just before it: the read sees every revocation committed
    // before, and a revocation not yet committed waits for this intent's commit (a plain read would let
    // one commit in between, and the write would land through authority revoked before its intent).
    // The read starts at this process's graph when that is behind the decision (made on another
    // replica): the owners are judged on that graph with every event it lacks folded in.
    await spend(tx);
    const from = Math.min(claims.graph_revision, c.graph.revision);
    const [recorded, , events] = await Promise.all([ctx.receipts.recordIntent(intent, tx), tx.graph.head({ lock: 'share' }), tx.graph.read(from)]);
    if (recorded.replayed) return recorded;
    checkNotRevokedSince(from === claims.graph_revision ? events : events.filter((e) => e.revision > claims.graph_revision), claims, c.principals);
    checkOwnersUnchangedSince(c.graph, events, claims, ctx.clock.now());
    // Checked again at the commit: a decision spent after it expired could be spent twice.
    const now = ctx.clock.now();
    if (now >= claims.expires_at) throw new WritError('DECISION_EXPIRED', `decision ${claims.decision_id} expired before the write was recorded`);
    await tx.singleUse.spendOrRefuse('decision', claims.decision_id, claims.expires_at, now, (why) =>
      decisionSpendRefused(why, claims.decision_id, claims.expires_at, now, `decision ${claims.decision_id} was already used for a write; a decision authorizes one write`));
    return recorded;
  });
}

/** The refusals for a lease reason: their receipts say what lease the write presented. */
const LEASE_REFUSALS: ReadonlySet<string> = new Set<ErrorCode>(['LEASE_REQUIRED', 'LEASE_EXPIRED', 'LEASE_TOKEN_MISMATCH', 'LEASE_PREEMPTED', 'STALE_FENCING_EPOCH']);
/** What a lease id looks like (`lease_` and base64url): a Writ-Lease-Id of another shape is not recorded (it may be a token sent in the wrong header). */
const LEASE_ID_SHAPE = /^lease_[A-Za-z0-9_-]{1,64}$/;

/**
 * A refusal is on the record too: one REJECTED receipt with whatever was known, in the transaction
 * that spends the assertion (unless the assertion was a replay). Returns the error to throw.
 */
async function recordRefusal(ctx: WritContext, w: IdentifiedWrite, input: ActionInput, creds: ActionCredentials, claims: DecisionClaims | undefined, spend: (tx: StoreTx) => Promise<void>, e: unknown): Promise<unknown> {
  if (!isWritError(e)) {
    // Not a refusal but a failure (the store, a bug): no receipt, but the assertion is used up.
    await ctx.store.readWrite(spend).catch(() => undefined);
    return e;
  }
  try {
    // What the receipt and the answer add to the refusal is read from the store, best effort: when it cannot
    // be read (a damaged receipt of that decision, say) the refusal is recorded and answered without it.
    let refusal: WritError = e;
    let presented: PresentedLease | null = null;
    if (claims && LEASE_REFUSALS.has(e.code)) presented = await presentedLease(ctx, w, claims, creds).catch(() => null);
    if (claims && e.code === 'DECISION_REPLAYED') refusal = await namingFirstUse(ctx, w, claims, e).catch(() => e);
    const rejection = await ctx.store.readWrite(async (tx) => {
      await spend(tx);
      return ctx.receipts.recordRejection({
        principal: w.caller, action: input.action, resource_key: w.resource, fields: w.fields, request_hash: w.hash,
        decision_id: claims?.decision_id ?? expiredDecisionId(refusal), policy_revision: claims?.policy_revision ?? null, graph_revision: claims?.graph_revision ?? null,
        chain: claims?.chain ?? [], expected_version: input.expected_version ?? null,
        error: refusalOf(refusal), presented_lease: presented,
      }, tx);
    });
    return new WritError(refusal.code, refusal.message, Object.assign({}, refusal.details, { receipt_id: rejection.receipt_id }));
  } catch (spent) {
    return spent;
  }
}

/** The id of a decision refused as expired (authentic: its signature was checked first), which then gave no claims. */
function expiredDecisionId(e: WritError): string | null {
  const id = e.code === 'DECISION_EXPIRED' ? e.details?.decision_id : undefined;
  return typeof id === 'string' ? id : null;
}

/** The refusal as its receipt keeps it: the code and message, and for DECISION_REPLAYED the receipt of the write that used the decision (when named). */
function refusalOf(e: WritError): ReceiptError {
  const usedBy = e.code === 'DECISION_REPLAYED' ? e.details?.used_by_receipt_id : undefined;
  return typeof usedBy === 'string' ? { code: e.code, message: e.message, used_by_receipt_id: usedBy } : { code: e.code, message: e.message };
}

/**
 * The lease a write refused for a lease reason presented: the lease id (Writ-Lease-Id, else the id its
 * token names; never the token nor its hash), the fencing epoch given for each key, and each key's
 * epoch, holder and lease as the store has them now, just after the refusal.
 */
async function presentedLease(ctx: WritContext, w: IdentifiedWrite, claims: DecisionClaims, creds: ActionCredentials): Promise<PresentedLease> {
  const keys = coordinationKeys(w.resource, w.fields, claims.obligations);
  let epochs: Map<string, number> | null = null;
  try {
    epochs = parseFencingHeader(creds.fencingEpoch, keys);
  } catch {
    // Unreadable (a refusal of its own, MALFORMED_REQUEST, when the lease checks get that far): none given.
  }
  const tokenLeaseId = creds.leaseToken ? leaseIdOfToken(creds.leaseToken) : null;
  const headerLeaseId = creds.leaseId !== undefined && LEASE_ID_SHAPE.test(creds.leaseId) ? creds.leaseId : null;
  const records = await Promise.all(keys.map((key) => ctx.leases.describe(key)));
  return {
    lease_id: headerLeaseId ?? tokenLeaseId,
    token_lease_id: tokenLeaseId,
    keys: keys.map((key, i) => {
      const r = records[i];
      return { key, presented_epoch: epochs?.get(key) ?? null, current_epoch: r?.epoch ?? 0, holder: r?.holderIdentity ?? null, lease_id: r?.leaseId ?? null, state: r?.state ?? 'FREE' };
    }),
  };
}

/**
 * DECISION_REPLAYED naming the receipt of the write that used the decision (its intent spent it), when
 * the log still holds it. Only the caller's own receipts are searched: a decision is bound to one
 * principal, so the write that used it was the caller's, which the caller may read; nothing of anyone
 * else's is told.
 */
async function namingFirstUse(ctx: WritContext, w: IdentifiedWrite, claims: DecisionClaims, e: WritError): Promise<WritError> {
  let after: number | undefined;
  for (;;) {
    const page = await ctx.receipts.query({ decision_id: claims.decision_id, principal: w.caller, ...(after !== undefined ? { after } : {}) });
    const used = page.receipts.find((r) => r.status !== 'REJECTED');
    if (used) {
      return new WritError('DECISION_REPLAYED', `decision ${claims.decision_id} was already used for a write, receipt ${used.receipt_id}; a decision authorizes one write`, Object.assign({}, e.details, { used_by_receipt_id: used.receipt_id }));
    }
    if (page.next === null) return e;
    after = page.next;
  }
}

/** Forwards the write (only the epochs Writ checked go upstream: its second fence) and settles the receipt. */
async function forwardAndSettle(ctx: WritContext, w: IdentifiedWrite, input: ActionInput, c: CheckedWrite, pending: Receipt): Promise<{ receipt: Receipt; replayed: false; answeredAt: number }> {
  const { fence, fenced, route } = c;
  // A leased write may not outlive its lease. Nor may any write outlive its receipt's creation plus the
  // upstream timeout, however long the intent took to become durable: the reconciliation sweep asks the
  // upstream about a PENDING receipt once it is twice that timeout old, and by then the upstream must
  // refuse the write for good (its Writ-Deadline has passed).
  const sentAt = ctx.clock.now();
  const sinceIntentMs = pending.created_at + route.timeoutMs - sentAt;
  if (sinceIntentMs < MIN_FORWARD_MS) {
    // Nothing is sent (with so little time left it would only time out): the receipt says so. Its key is
    // spent on this answer, as on any settled receipt: the write is retried with a new Idempotency-Key.
    const why = `the write's intent took ${sentAt - pending.created_at} ms to become durable, leaving less than ${MIN_FORWARD_MS} ms of the upstream timeout (${route.timeoutMs} ms): it was not forwarded; retry with a new Idempotency-Key`;
    await ctx.receipts.complete(pending.receipt_id, { status: 'FAILED', error: { code: 'OVERLOADED', message: why } });
    throw new WritError('OVERLOADED', why, { receipt_id: pending.receipt_id, receipt_status: 'FAILED', retry_after_ms: 1000 });
  }
  const timeoutMs = Math.min(route.timeoutMs, sinceIntentMs, fence ? fence.expires_at - sentAt : Infinity);
  const result = await route.client.write(w.resource, {
    fields: input.payload,
    expectedVersion: input.expected_version ?? 0,
    fencing: fence ? fenced : null,
    principal: w.caller,
    receiptId: pending.receipt_id,
    timeoutMs: Math.max(1, timeoutMs),
    deadline: sentAt + Math.max(1, timeoutMs),
  });
  const answeredAt = performance.now();
  switch (result.kind) {
    case 'applied': {
      // `complete` is first-settlement-wins: if a reconciliation sweep settled this receipt first, the
      // log's answer is returned as it stands (a FAILED one then says the log and upstream disagree).
      let receipt: Receipt;
      try {
        receipt = await ctx.receipts.complete(pending.receipt_id, { status: 'COMPLETED', final_version: result.version, upstream_status: result.status });
      } catch (e) {
        // The store cannot write (disk full, busy): the write is in the upstream, its receipt PENDING until
        // the sweep settles it from the upstream's record. Not acknowledged, and not "nothing changed" either.
        const why = e instanceof Error ? e.message : String(e);
        throw new WritError('OVERLOADED', `the upstream applied the write at version ${result.version}, but its receipt could not be settled (${why}); receipt ${pending.receipt_id} stays PENDING and is reconciled from the upstream's record`, {
          receipt_id: pending.receipt_id, receipt_status: 'PENDING', retry_after_ms: 5000,
        });
      }
      if (receipt.status !== 'COMPLETED') {
        throw new WritError('UPSTREAM_FAILED', `the upstream applied the write at version ${result.version}, but receipt ${receipt.receipt_id} was already settled ${receipt.status} by reconciliation`, { receipt_id: receipt.receipt_id });
      }
      return { receipt, replayed: false, answeredAt };
    }
    case 'conflict': {
      await ctx.receipts.complete(pending.receipt_id, {
        status: 'FAILED', upstream_status: result.status,
        error: { code: 'VERSION_CONFLICT', message: `expected version ${input.expected_version ?? 0}, the upstream is at ${result.currentVersion}` },
        conflicts: [{ kind: 'version', expected: input.expected_version ?? 0, actual: result.currentVersion }],
      });
      throw new WritError('VERSION_CONFLICT', `${w.resource} changed since version ${input.expected_version ?? 0} (now ${result.currentVersion}${result.changedFields?.length ? `; changed: ${result.changedFields.join(', ')}` : ''}); re-read and retry`, {
        receipt_id: pending.receipt_id, current_version: result.currentVersion,
      });
    }
    case 'stale_epoch': {
      await ctx.receipts.complete(pending.receipt_id, {
        status: 'FAILED', upstream_status: result.status,
        error: { code: 'STALE_FENCING_EPOCH', message: `the upstream has seen fencing epoch ${result.highestEpoch}` },
        conflicts: [{ kind: 'fencing_epoch', expected: fence?.epoch, actual: result.highestEpoch }],
      });
      throw new WritError('STALE_FENCING_EPOCH', `the upstream refused the fencing epoch (it has seen ${result.highestEpoch})`, { receipt_id: pending.receipt_id });
    }
    case 'refused':
      await ctx.receipts.complete(pending.receipt_id, { status: 'FAILED', upstream_status: result.status, error: { code: 'UPSTREAM_FAILED', message: result.message } });
      throw new WritError('UPSTREAM_FAILED', `the upstream refused the write (${result.status}${result.code ? ` ${result.code}` : ''}): ${result.message}`, { receipt_id: pending.receipt_id });
    case 'server_error':
      // A 5xx is no verdict (a proxy's 502 or a crash after the commit may follow an applied write):
      // the receipt stays PENDING and is settled from the upstream's own record once the deadline has passed.
      throw new WritError('UPSTREAM_FAILED', `the upstream failed (${result.status}): ${result.message}; whether it applied the write is unknown, receipt ${pending.receipt_id} stays PENDING until reconciled`, {
        receipt_id: pending.receipt_id, receipt_status: 'PENDING',
      });
    case 'timeout':
    case 'network_error':
      if (result.maybeApplied) {
        // Unknown outcome: the receipt stays PENDING and is reconciled against the upstream by receipt id.
        throw new WritError('UPSTREAM_TIMEOUT', `the upstream did not answer (${result.message}); receipt ${pending.receipt_id} stays PENDING until reconciled`, { receipt_id: pending.receipt_id });
      }
      await ctx.receipts.complete(pending.receipt_id, { status: 'FAILED', error: { code: 'UPSTREAM_FAILED', message: result.message } });
      throw new WritError('UPSTREAM_FAILED', `the upstream could not be reached: ${result.message}`, { receipt_id: pending.receipt_id });
  }
}

/**
 * An Idempotency-Key retry answers as the first attempt did: a COMPLETED or PENDING receipt comes back
 * (the HTTP layer says 200 or 202), a FAILED one is the same refusal again, never a success.
 */
function replayOf(first: Receipt): ActionOutcome {
  if (first.status === 'FAILED' && first.error) {
    const code = first.error.code as ErrorCode;
    throw new WritError(code in ERROR_CATALOGUE ? code : 'UPSTREAM_FAILED', `${first.error.message} (replayed answer of receipt ${first.receipt_id})`, { receipt_id: first.receipt_id, receipt_status: 'FAILED', replayed: true });
  }
  return { receipt: first, replayed: true };
}
