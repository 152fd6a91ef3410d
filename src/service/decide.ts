import { randomUUID } from 'node:crypto';
import { decodeJwt } from 'jose';
import { WritError } from '../errors.js';
import { releaseAssertion, signDecision, spendAssertion, verifyCallerAssertion, type AuthenticatedCaller, type DecisionClaims } from '../decision/index.js';
import { approvalEdges, principalsOf, resolveChains, resolveOwners, type AuthorityGraph, type ChainRequest } from '../graph/index.js';
import { GOVERNANCE_ID } from '../graph/model.js';
import { requestRisk } from '../policy/request-risk.js';
import type { CandidateChain, ChainVerdict, DecisionInput, DecisionResult, PolicyEdge, PolicyEngine, RequestProperties, VerifiedApproval } from '../policy/types.js';
import type { Decision, DecisionRequest, Explanation as WireExplanation } from '../wire/v1.js';
import type { WritContext } from './context.js';
import { canonicalResource, checkEnvironment, checkFields } from './resources.js';
import { decisionRecord } from './decision-record.js';

/**
 * What a front door asks: the v1 request, whose `context` may carry more than risk, approval and reason
 * (AuthZEN's free-form context), plus what the caller says about subject, resource and action
 * (AuthZEN `properties`). Both reach the policy input as `input.context` and `input.properties`.
 */
export interface DecisionRequestInput extends Omit<DecisionRequest, 'context'> {
  context?: DecisionRequest['context'] & Record<string, unknown>;
  properties?: Partial<RequestProperties>;
}

export interface DecideOptions {
  /** The front door that asked, for the decision log (default `v1`). */
  via?: 'v1' | 'authzen';
  /** The authenticated caller, when it asks about another principal (governance, an auditor). */
  askedBy?: string;
  /** The remote address of the request, for the decision log's `requested_by`. */
  requestedBy?: string;
  /**
   * The durable spend of the caller's assertion, queued but not awaited by the caller: the decision is
   * judged and signed without waiting for it (the group commit runs it at its next turn), and nothing
   * (answer, approval spend, log event) leaves before it has succeeded; if it fails, its error is the
   * answer.
   */
  spent?: Promise<void>;
}

/** A decision as the use case returns it: the v1 wire shape with times in ms (the HTTP layer renders them RFC 3339). */
export type DecisionOutcome = Omit<Decision, 'issued_at' | 'expires_at' | 'chain_edges'> & { issued_at: number; expires_at: number | null; chain_edges: PolicyEdge[] };

/** POST /v1/explain's answer inside Writ: the wire Explanation with each chain's edges as the policy saw them (ms times). */
export type Explanation = Omit<WireExplanation, 'chains'> & { chains: { edges: PolicyEdge[]; verdict: ChainVerdict }[] };

interface Judged {
  principal: string;
  request: { action: string; resource: string; environment: string; fields: string[] };
  graph: AuthorityGraph;
  input: DecisionInput;
  result: DecisionResult;
  now: number;
  /** The approval's assertion, verified and not yet spent (see settleApproval). */
  approvalAssertion: AuthenticatedCaller | null;
}

/** Explain-mode resolution for the reasons of a denial: enough for real graphs, bounded for hostile ones. */
const DENY_REASONS_BUDGET = { maxVisited: 2_000, maxChains: 8 };

/**
 * The policy's verdict on a request, always the one decide-mode resolution gives (the hot path's), and the
 * chains it was judged over. `build` makes the policy input around the chains.
 * - `decide`: the chains decide-mode resolution finds. A deny is judged again over the unpruned candidates
 *   (explain mode), for reasons an auditor can act on (the hot path pruned what cannot be on a valid chain:
 *   dead edges, a risk_max too low), within a small budget: a caller must not be able to make its denials
 *   expensive. When the budget runs out the hot path's reasons stand. The verdict stays the hot path's
 *   (fail closed).
 * - `explain`: every candidate, unpruned, for humans, when the policy's verdict on them is the hot path's;
 *   when it is not (chains that cannot be valid sort before a valid one and fill the 16 judged, or the
 *   unpruned search runs out of budget), the hot path's judgement, so that explain never says deny where
 *   a decision allows, nor the reverse.
 */
export function judgeChains(
  engine: PolicyEngine,
  graph: AuthorityGraph,
  request: ChainRequest,
  now: number,
  mode: 'decide' | 'explain',
  build: (chains: CandidateChain[]) => DecisionInput,
): { input: DecisionInput; result: DecisionResult } {
  const judge = (chains: CandidateChain[]) => {
    const input = build(chains);
    return { input, result: engine.decide(input) };
  };
  const decided = judge(resolveChains(graph, request, now, { mode: 'decide' }));
  if (mode === 'decide' && decided.result.allow) return decided;
  // The unpruned candidates: within a small budget for a decision's reasons, the whole one for explain.
  let unpruned: ReturnType<typeof judge> | null = null;
  try {
    unpruned = judge(resolveChains(graph, request, now, mode === 'decide' ? { mode: 'explain', budget: DENY_REASONS_BUDGET } : { mode: 'explain' }));
  } catch (e) {
    if (!(e instanceof WritError && e.code === 'BUDGET_EXCEEDED')) throw e;
  }
  return unpruned !== null && unpruned.result.allow === decided.result.allow ? unpruned : decided;
}

function normalizeFields(fields: string[] | undefined): string[] {
  return [...new Set(fields ?? [])].sort();
}

/**
 * An approval is an assertion signed by the approver (audience `<audience>:approval`, single use) that
 * names exactly this request's principal, action, resource and environment, and the fields it approves:
 * the request's fields must be among them, "*" covering every field and the whole resource as in a
 * scope (approving more than was asked is the approver's choice; a request touching a field the
 * approver did not name, or the whole resource, is not the request approved). An approval that
 * names no fields (signed before approvals bound them) is refused, not read as approving every field.
 * It is verified here and spent only by a decision that allows (see `decide`): a denied or explained
 * decision leaves it usable. A bad one is the request's problem (422), not the caller's authentication
 * failing.
 */
async function verifyApproval(ctx: WritContext, graph: AuthorityGraph, principal: string, req: Judged['request'], token: unknown, now: number): Promise<{ approval: VerifiedApproval; assertion: AuthenticatedCaller } | null> {
  if (token === undefined || token === null) return null;
  if (typeof token !== 'string') throw new WritError('UNPROCESSABLE', 'context.approval must be an approval assertion (a JWT string)');
  let a: { principal?: string; action?: string; resource?: string; environment?: string; fields?: unknown } | undefined;
  try {
    a = (decodeJwt(token) as { approve?: typeof a }).approve;
  } catch {
    throw new WritError('UNPROCESSABLE', 'context.approval is not a JWT');
  }
  if (!a) throw new WritError('UNPROCESSABLE', 'context.approval approves nothing (no "approve" claim: writ approve, or the SDK\'s createApprovalAssertion, makes one)');
  // Each difference named, the approval's value beside the request's: a misspelt environment or an
  // alias key shows at once.
  const asked: Record<string, string> = { principal, action: req.action, resource: req.resource, environment: req.environment };
  // The approval's claims are not verified yet: each is shown cut to 80 characters.
  const shown = (v: unknown) => {
    const text = JSON.stringify(v ?? null) ?? 'null';
    return text.length > 80 ? `${text.slice(0, 79)}…` : text;
  };
  const differ = Object.keys(asked).filter((k) => a![k as keyof typeof a] !== asked[k]).map((k) => `${k} ${shown(a![k as keyof typeof a])}, not ${JSON.stringify(asked[k])}`);
  const approved = a.fields;
  if (approved === undefined) {
    throw new WritError('UNPROCESSABLE', 'the approval names no fields (an approval binds the fields it approves; one without them, as an older writ approve or SDK signed, is refused rather than read as approving every field): '
      + 'ask the approver to sign it again naming them (writ approve --fields a,b; createApprovalAssertion approve.fields)');
  }
  if (!Array.isArray(approved) || !approved.every((f) => typeof f === 'string')) {
    throw new WritError('UNPROCESSABLE', `the approval's fields must be a list of field names, got ${shown(approved)}`);
  }
  // As a scope's fields: "*" covers every field and the whole resource (a request naming no fields).
  if (!approved.includes('*')) {
    if (req.fields.length === 0) differ.push(`fields ${shown(approved)}, not the whole resource (no fields listed), which needs ["*"]`);
    const notApproved = req.fields.filter((f) => !approved.includes(f));
    if (notApproved.length > 0) differ.push(`fields ${shown(notApproved)} not among those it approves, ${shown(approved)}`);
  }
  if (differ.length > 0) throw new WritError('UNPROCESSABLE', `the approval is for another request: ${differ.join('; ')}`);
  try {
    const auth = await verifyCallerAssertion(`Bearer ${token}`, {
      principal: (id) => graph.principal(id),
      replay: ctx.replay,
      now,
      audience: `${ctx.config.audience}:approval`,
      maxTtlMs: ctx.config.maxAssertionTtlMs,
    });
    return { approval: { by: auth.principal, edges: approvalEdges(graph, auth.principal, principal, now) }, assertion: auth };
  } catch (e) {
    throw approvalProblem(e);
  }
}

const approvalProblem = (e: unknown) =>
  e instanceof WritError && e.code === 'UNAUTHENTICATED' ? new WritError('UNPROCESSABLE', `the approval is not valid: ${e.message}`) : e;

/** An allowing decision spends the approval it was given (single use); otherwise it stays usable. */
async function settleApproval(ctx: WritContext, j: Judged, allowed: boolean): Promise<void> {
  const approval = j.approvalAssertion;
  if (!approval) return;
  if (!allowed) return releaseAssertion(ctx.replay, approval);
  try {
    await ctx.store.readWrite((tx) => spendAssertion(ctx.replay, tx, approval, ctx.clock.now()));
  } catch (e) {
    throw approvalProblem(e);
  }
}

/** The policy input for a request judged in `graph` at `now` over these candidate chains (a live decision, or a replayed one). */
export function decisionInputFor(
  graph: AuthorityGraph,
  request: DecisionInput['request'],
  chains: CandidateChain[],
  now: number,
  extra: { approval: VerifiedApproval | null; properties: RequestProperties; context: Record<string, unknown> },
): DecisionInput {
  return {
    now,
    request,
    principals: principalsOf(graph, chains, [request.principal, ...(extra.approval ? [extra.approval.by] : [])]),
    chains,
    owners: resolveOwners(graph, request.resource, request.fields, now),
    approval: extra.approval,
    properties: extra.properties,
    context: extra.context,
  };
}

async function judge(ctx: WritContext, principal: string, body: DecisionRequestInput, mode: 'decide' | 'explain'): Promise<Judged> {
  const now = ctx.clock.now();
  const graph = await ctx.graph.current();
  const caller = graph.principal(principal);
  if (!caller) throw new WritError('UNKNOWN_PRINCIPAL', `no principal "${principal}"`);
  checkEnvironment(ctx.policy.data, body.environment, 'environment');
  const request = {
    action: body.action,
    resource: canonicalResource(ctx.policy.data, body.resource),
    environment: body.environment,
    fields: normalizeFields(body.fields),
  };
  checkFields(ctx.policy.data, request.resource, request.fields, 'fields');
  const declaredRisk = body.context?.risk;
  if (declaredRisk !== undefined && (typeof declaredRisk !== 'number' || !Number.isInteger(declaredRisk) || declaredRisk < 0)) {
    throw new WritError('UNPROCESSABLE', 'context.risk must be a non-negative integer');
  }
  const verified = await verifyApproval(ctx, graph, principal, request, body.context?.approval, now);
  const approval = verified?.approval ?? null;
  const risk = (declaredRisk as number | undefined) ?? null;
  const chainRequest = { principal, ...request, risk: requestRisk(ctx.policy.data, request.action, risk) };
  try {
    const { approval: _assertion, ...context } = body.context ?? {};
    const properties: RequestProperties = { subject: {}, resource: {}, action: {}, ...body.properties };
    const build = (chains: CandidateChain[]): DecisionInput =>
      decisionInputFor(graph, { principal, ...request, risk }, chains, now, { approval, properties, context });
    const { input, result } = judgeChains(ctx.policy, graph, chainRequest, now, mode, build);
    return { principal, request, graph, input, result, now, approvalAssertion: verified?.assertion ?? null };
  } catch (e) {
    // Not judged: the approval stays usable.
    if (verified) releaseAssertion(ctx.replay, verified.assertion);
    throw e;
  }
}

function ownersOf(input: DecisionInput): Record<string, string | null> {
  return Object.fromEntries(input.owners.map((o) => [o.field, o.owner]));
}

/**
 * POST /v1/decisions (and every AuthZEN evaluation): may `caller` do this, here, now? An allow comes
 * back signed for the gateway. Every decision, allow or deny, becomes one decision log event.
 */
export async function decide(ctx: WritContext, caller: string, body: DecisionRequestInput, options: DecideOptions = {}): Promise<DecisionOutcome> {
  const started = process.hrtime.bigint();
  try {
    let j: Judged;
    try {
      j = await judge(ctx, caller, body, 'decide');
    } catch (e) {
      // Authentication answers first: a replayed assertion is refused as such.
      await options.spent;
      throw e;
    }
    const { result, input } = j;
    const chainEdges = result.allow && result.chain_index !== null ? input.chains[result.chain_index]!.edges : [];
    const outcome: DecisionOutcome = {
      decision_id: randomUUID(),
      allow: result.allow,
      principal: caller,
      ...j.request,
      reasons: result.reasons,
      approval_missing: result.approval_missing,
      obligations: result.obligations,
      risk: result.risk,
      chain: chainEdges.map((e) => e.id),
      chain_edges: chainEdges,
      owners: ownersOf(input),
      graph_revision: j.graph.revision,
      policy_revision: ctx.policy.revision,
      issued_at: j.now,
      expires_at: null,
      token: null,
    };
    if (result.allow) {
      outcome.expires_at = j.now + ctx.config.decisionTtlMs;
      const claims: DecisionClaims = {
        decision_id: outcome.decision_id,
        principal: caller,
        audience: ctx.config.gatewayAudience,
        action: outcome.action,
        resource: outcome.resource,
        environment: outcome.environment,
        fields: outcome.fields,
        chain: outcome.chain,
        owners: outcome.owners,
        graph_revision: outcome.graph_revision,
        policy_revision: outcome.policy_revision,
        obligations: outcome.obligations,
        risk: outcome.risk,
        issued_at: j.now,
        expires_at: outcome.expires_at,
      };
      outcome.token = await signDecision(ctx.keys, claims);
    }
    try {
      await options.spent;
    } catch (e) {
      if (j.approvalAssertion) releaseAssertion(ctx.replay, j.approvalAssertion);
      throw e;
    }
    await settleApproval(ctx, j, result.allow);
    const elapsed = process.hrtime.bigint() - started;
    ctx.observer.decision(result.allow ? 'allow' : 'deny', Number(elapsed) / 1e9);
    ctx.decisionLog.record(decisionRecord(outcome, input, result, { via: options.via ?? 'v1', askedBy: options.askedBy ?? caller, elapsedNs: Number(elapsed), requestedBy: options.requestedBy }));
    return outcome;
  } catch (e) {
    ctx.observer.decision('error', Number(process.hrtime.bigint() - started) / 1e9);
    throw e;
  }
}

/**
 * POST /v1/explain: every candidate chain with the verdict on each edge, for humans. A principal may
 * explain its own requests; governance may explain anyone's (auditors, `writ trace`).
 */
export async function explain(ctx: WritContext, caller: string, body: DecisionRequestInput & { principal?: string }): Promise<Explanation> {
  const subject = body.principal ?? caller;
  if (subject !== caller && caller !== GOVERNANCE_ID) {
    throw new WritError('FORBIDDEN', `${caller} may not explain decisions for ${subject}`);
  }
  const j = await judge(ctx, subject, body, 'explain');
  await settleApproval(ctx, j, false); // an explanation never uses the approval up
  return {
    principal: subject,
    request: j.request,
    allow: j.result.allow,
    reasons: j.result.reasons,
    approval_missing: j.result.approval_missing,
    risk: j.result.risk,
    obligations: j.result.obligations,
    owners: ownersOf(j.input),
    chains: j.input.chains.map((c, i) => ({ edges: c.edges, verdict: j.result.chains[i]! })),
    graph_revision: j.graph.revision,
    policy_revision: ctx.policy.revision,
  };
}
