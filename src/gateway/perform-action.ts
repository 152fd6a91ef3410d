import { ERROR_CATALOGUE, WritError, isWritError, type ErrorCode } from '../errors.js';
import { callerOf, checkDecisionBinding, verifyDecision, type AuthenticatedCaller, type DecisionClaims } from '../decision/index.js';
import { requestHash, type Receipt, type ReceiptIntent } from '../audit/index.js';
import type { WritContext } from '../service/context.js';
import { canonicalResource } from '../service/resources.js';
import { checkAuthorityStillValid } from './authority-watermark.js';
import { coordinationKeys, parseFencingHeader } from './coordination-keys.js';
import type { UpstreamRoute } from './upstream-router.js';

/** A leased write is not forwarded with less lease than this left: it would only time out as PENDING. */
const MIN_LEASE_LEFT_MS = 100;

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

/**
 * The enforcement point: the only way a write reaches the upstream. In order: the decision (signature,
 * audience, expiry, bound to exactly this request), the authority watermark (no edge of its chain
 * revoked since, owners unchanged), the lease and fencing epoch of every coordination key, the version
 * precondition, one use per decision; then an intent receipt, the forward, and the settled receipt.
 * A refusal changes neither the upstream nor the leases, and is itself recorded as a REJECTED receipt.
 */
export async function performAction(ctx: WritContext, who: string | AuthenticatedCaller, input: ActionInput, creds: ActionCredentials): Promise<ActionOutcome> {
  // An assertion verified but not yet spent is spent here, in the first transaction that records
  // what this request did (its intent or its rejection): one commit per write fewer. `spend` throws
  // UNAUTHENTICATED (replayed) when a concurrent request spent it first.
  const { principal: caller, spend } = callerOf(who, ctx.replay, () => ctx.clock.now());
  const started = performance.now();
  const fields = [...new Set(input.fields)].sort();
  let resource: string;
  let hash: string;
  let first: Receipt | null = null;
  try {
    resource = canonicalResource(ctx.policy.data, input.resource);
    const payloadFields = Object.keys(input.payload).sort();
    if (payloadFields.join('\n') !== fields.join('\n')) {
      throw new WritError('UNPROCESSABLE', `payload must carry exactly the fields named in fields [${fields.join(', ')}], got [${payloadFields.join(', ')}]`);
    }
    hash = requestHash({ principal: caller, action: input.action, resource, environment: input.environment ?? null, fields, payload: input.payload, expected_version: input.expected_version ?? null });
    // IDEMPOTENCY_MISMATCH (the key names another request) is thrown from here.
    if (creds.idempotencyKey) first = ctx.receipts.findReplay(caller, creds.idempotencyKey, hash);
  } catch (e) {
    // Not a write anyone could take for one (no receipt), but the assertion is used up all the same.
    spend();
    throw e;
  }
  if (first) {
    spend();
    return replayOf(first);
  }

  let claims: DecisionClaims | undefined;
  /** A refusal is on the record too: one REJECTED receipt with whatever was known (unless the assertion was a replay). */
  const refuse = (e: unknown): unknown => {
    if (!isWritError(e)) {
      // Not a refusal but a failure (the store, a bug): no receipt, but the assertion is used up.
      try {
        spend();
      } catch {
        // already spent: the failure is still the answer
      }
      return e;
    }
    try {
      const rejection = ctx.atomically(() => {
        spend();
        return ctx.receipts.recordRejection({
          principal: caller, action: input.action, resource_key: resource, fields, request_hash: hash,
          decision_id: claims?.decision_id ?? null, policy_revision: claims?.policy_revision ?? null, graph_revision: claims?.graph_revision ?? null,
          chain: claims?.chain ?? [], expected_version: input.expected_version ?? null,
          error: { code: e.code, message: e.message },
        });
      });
      return new WritError(e.code, e.message, { ...(e.details ?? {}), receipt_id: rejection.receipt_id });
    } catch (spent) {
      return spent;
    }
  };
  let fence: { lease_id: string; epoch: number; expires_at: number } | undefined;
  const fenced: Record<string, number> = {};
  let route: UpstreamRoute | undefined;
  try {
    if (!creds.decision) throw new WritError('DECISION_INVALID', 'the Writ-Decision header is missing; ask POST /v1/decisions first');
    const now = ctx.clock.now();
    claims = await verifyDecision(creds.decision, { keys: ctx.keys, audience: ctx.config.gatewayAudience, now });
    checkDecisionBinding(claims, { principal: caller, action: input.action, resource, environment: input.environment ?? claims.environment, fields });
    checkAuthorityStillValid(ctx.graph.current(), claims, now);
    if (claims.obligations.version_required && input.expected_version === undefined) {
      throw new WritError('VERSION_REQUIRED', `${resource} is ${claims.obligations.resource_class}: send expected_version (the version you read)`);
    }
    const keys = coordinationKeys(resource, fields, claims.obligations);
    if (keys.length > 0) {
      if (!creds.leaseToken) throw new WritError('LEASE_REQUIRED', `writing ${resource} [${fields.join(', ')}] needs a lease on ${keys.join(', ')}`, { keys });
      const fencing = parseFencingHeader(creds.fencingEpoch, keys);
      if (!fencing) throw new WritError('STALE_FENCING_EPOCH', `the Writ-Fencing-Epoch header is missing; send the epoch of ${keys.join(', ')} from your lease`);
      for (const key of keys) {
        const epoch = fencing.get(key);
        if (epoch === undefined) throw new WritError('STALE_FENCING_EPOCH', `no fencing epoch given for ${key}`);
        const check = await ctx.leases.validateFence({ key, token: creds.leaseToken, epoch, principal: caller, now: ctx.clock.now(), ...(creds.leaseId ? { lease_id: creds.leaseId } : {}) });
        fenced[key] = check.epoch;
        if (!fence || check.expires_at < fence.expires_at) fence = { lease_id: check.lease_id, epoch: check.epoch, expires_at: check.expires_at };
      }
    }
    if (fence && fence.expires_at - ctx.clock.now() < MIN_LEASE_LEFT_MS) {
      throw new WritError('LEASE_EXPIRED', `the lease on ${Object.keys(fenced).join(', ')} has less than ${MIN_LEASE_LEFT_MS} ms left; renew it before writing`);
    }
    // The decision's environment picks the upstream: a staging decision never reaches production state.
    route = ctx.upstreams.route(resource, claims.environment);
  } catch (e) {
    throw refuse(e);
  }

  const intent: ReceiptIntent = {
    principal: caller, action: input.action, resource_key: resource, fields,
    owners: [...new Set(Object.values(claims.owners).filter((o): o is string => o !== null))].sort(),
    authority_epoch: claims.graph_revision, ownership_epoch: claims.graph_revision,
    decision_id: claims.decision_id, policy_revision: claims.policy_revision, graph_revision: claims.graph_revision,
    chain: claims.chain, lease_id: fence?.lease_id ?? null, lease_epoch: fence?.epoch ?? null,
    expected_version: input.expected_version ?? null, idempotency_key: creds.idempotencyKey ?? null, request_hash: hash,
  };
  // One transaction, one sync: the decision is spent exactly when the intent is on record (and a
  // concurrent retry under the same Idempotency-Key spends nothing).
  let pending: Receipt;
  const intentAt = performance.now();
  try {
    pending = ctx.atomically(() => {
      spend();
      const recorded = ctx.receipts.recordIntent(intent);
      if (recorded.replayed) return recorded;
      // Checked again at the commit: a decision spent after it expired could be spent twice.
      if (ctx.clock.now() >= claims.expires_at) throw new WritError('DECISION_EXPIRED', `decision ${claims.decision_id} expired before the write was recorded`);
      if (!ctx.replay.remember('decision', claims.decision_id, claims.expires_at, ctx.clock.now())) {
        throw new WritError('DECISION_REPLAYED', `decision ${claims.decision_id} was already used for a write; a decision authorizes one write`);
      }
      return recorded;
    });
  } catch (e) {
    throw refuse(e);
  }
  if (pending.replayed) return replayOf(pending);

  // Only the epochs Writ checked go upstream (its second fence), and a leased write may not outlive its lease.
  const forwardedAt = performance.now();
  const sentAt = ctx.clock.now();
  const timeoutMs = fence ? Math.min(route!.timeoutMs, fence.expires_at - sentAt) : route!.timeoutMs;
  const result = await route!.client.write(resource, {
    fields: input.payload,
    expectedVersion: input.expected_version ?? 0,
    fencing: fence ? fenced : null,
    principal: caller,
    receiptId: pending.receipt_id,
    timeoutMs: Math.max(1, timeoutMs),
    deadline: sentAt + Math.max(1, timeoutMs),
  });
  const answeredAt = performance.now();
  switch (result.kind) {
    case 'applied': {
      // `complete` is first-settlement-wins: if a reconciliation sweep settled this receipt first, the
      // log's answer is returned as it stands (a FAILED one then says the log and upstream disagree).
      const receipt = ctx.receipts.complete(pending.receipt_id, { status: 'COMPLETED', final_version: result.version, upstream_status: result.status });
      if (receipt.status !== 'COMPLETED') {
        throw new WritError('UPSTREAM_FAILED', `the upstream applied the write at version ${result.version}, but receipt ${receipt.receipt_id} was already settled ${receipt.status} by reconciliation`, { receipt_id: receipt.receipt_id });
      }
      const settledAt = performance.now();
      return {
        receipt,
        replayed: false,
        timings: { checks: intentAt - started, intent: forwardedAt - intentAt, upstream: answeredAt - forwardedAt, settle: settledAt - answeredAt },
      };
    }
    case 'conflict': {
      ctx.receipts.complete(pending.receipt_id, {
        status: 'FAILED', upstream_status: result.status,
        error: { code: 'VERSION_CONFLICT', message: `expected version ${input.expected_version ?? 0}, the upstream is at ${result.currentVersion}` },
        conflicts: [{ kind: 'version', expected: input.expected_version ?? 0, actual: result.currentVersion }],
      });
      throw new WritError('VERSION_CONFLICT', `${resource} changed since version ${input.expected_version ?? 0} (now ${result.currentVersion}${result.changedFields?.length ? `; changed: ${result.changedFields.join(', ')}` : ''}); re-read and retry`, {
        receipt_id: pending.receipt_id, current_version: result.currentVersion,
      });
    }
    case 'stale_epoch': {
      ctx.receipts.complete(pending.receipt_id, {
        status: 'FAILED', upstream_status: result.status,
        error: { code: 'STALE_FENCING_EPOCH', message: `the upstream has seen fencing epoch ${result.highestEpoch}` },
        conflicts: [{ kind: 'fencing_epoch', expected: fence?.epoch, actual: result.highestEpoch }],
      });
      throw new WritError('STALE_FENCING_EPOCH', `the upstream refused the fencing epoch (it has seen ${result.highestEpoch})`, { receipt_id: pending.receipt_id });
    }
    case 'refused':
      ctx.receipts.complete(pending.receipt_id, { status: 'FAILED', upstream_status: result.status, error: { code: 'UPSTREAM_FAILED', message: result.message } });
      throw new WritError('UPSTREAM_FAILED', `the upstream refused the write (${result.status}${result.code ? ` ${result.code}` : ''}): ${result.message}`, { receipt_id: pending.receipt_id });
    case 'timeout':
    case 'network_error':
      if (result.maybeApplied) {
        // Unknown outcome: the receipt stays PENDING and is reconciled against the upstream by receipt id.
        throw new WritError('UPSTREAM_TIMEOUT', `the upstream did not answer (${result.message}); receipt ${pending.receipt_id} stays PENDING until reconciled`, { receipt_id: pending.receipt_id });
      }
      ctx.receipts.complete(pending.receipt_id, { status: 'FAILED', error: { code: 'UPSTREAM_FAILED', message: result.message } });
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
    throw new WritError(code in ERROR_CATALOGUE ? code : 'UPSTREAM_FAILED', `${first.error.message} (replayed answer of receipt ${first.receipt_id})`, { receipt_id: first.receipt_id, replayed: true });
  }
  return { receipt: first, replayed: true };
}
