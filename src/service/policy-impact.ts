/**
 * Policy impact: replay recent decisions against a candidate policy bundle before it is deployed, and
 * list every decision whose verdict would flip. Each decision's policy input is rebuilt from what was
 * recorded (the decision log's `input`, or a receipt's principal, action, resource and fields) and the
 * graph at the decision's revision; it is judged by the running bundle and by the candidate, and a
 * flip is where the two disagree. Also listed: the decisions the candidate fails on, and the live edges
 * its registry would no longer cover. Nothing is written.
 */
import { readFile } from 'node:fs/promises';
import { WritError } from '../errors.js';
import { approvalEdges, principalEnds, type AuthorityGraph } from '../graph/index.js';
import type { Edge, EdgeKind } from '../graph/model.js';
import type { DecisionLogEvent } from '../decision-log/index.js';
import { requestRisk } from '../policy/request-risk.js';
import type { DecisionInput, DecisionResult, PolicyData, PolicyEngine, RequestProperties, VerifiedApproval } from '../policy/types.js';
import type { Receipt } from '../audit/index.js';
import type { WritContext } from './context.js';
import { decisionInputFor, judgeChains } from './decide.js';
import { canonicalResource, checkEnvironment, checkFields, registryProblem, scopeAppliesInPart } from './resources.js';

/** The request of a replayed decision: the policy input's own request. */
export type ReplayedRequest = DecisionInput['request'];

/** A recorded decision as it is replayed. */
interface ReplayedDecision {
  decision_id: string;
  /** Where the decision was read from. */
  source: 'decision_log' | 'receipt';
  /** The receipt that carried it (source receipt). */
  receipt_id: string | null;
  at: number;
  graph_revision: number;
  request: ReplayedRequest;
}

export interface PolicyFlip extends ReplayedDecision {
  flip: 'allow→deny' | 'deny→allow';
  /** Why the candidate decides as it does: its reasons when it denies, the chain that allows when it allows. */
  reasons: string[];
  chain: string[];
}

/** A decision the running bundle judges and the candidate cannot: under it, the request would be answered INTERNAL. */
export interface PolicyFailure extends ReplayedDecision {
  /** Whether the running bundle allows it. */
  current: boolean;
  /** The candidate's error (Rego's message, e.g. `var assignment conflict`; or a request it refuses, such as an undeclared environment). */
  error: string;
  /** The code it would be answered with (INTERNAL for a failing rule; UNPROCESSABLE for a refused request). */
  code: string;
}

export interface StrandedEdge {
  edge_id: string;
  kind: EdgeKind;
  from: string;
  to: string;
  /** Why the candidate would not apply it (as an edge written under the candidate would be refused). */
  problem: string;
  /**
   * Whether it still counts under the candidate for the rest of its scope (every dimension keeps a value
   * the candidate has: environments `[production, staging]` under a candidate without staging still grant
   * in production), or for nothing at all.
   */
  counts_in_part: boolean;
}

export interface SkippedDecision {
  decision_id: string | null;
  reason: string;
}

export interface PolicyImpactReport {
  source: 'decision_log' | 'receipts';
  current_revision: string;
  candidate_revision: string;
  /** Decisions replayed against both bundles. */
  replayed: number;
  flips: PolicyFlip[];
  /** Decisions the candidate fails on (an error in the policy that only some inputs reach). */
  failures: PolicyFailure[];
  /**
   * Edges that count now or later (their principals not revoked) whose scope the candidate's registry would no longer cover (an action taken out of the
   * catalogue, a resource class removed): they would stay in the graph and count for less (`counts_in_part`) or nothing. Edges the running
   * bundle does not cover either are not listed (the candidate did not strand them).
   */
  stranded_edges: StrandedEdge[];
  /**
   * Decision log only: replays whose verdict under the running bundle differs from the recorded one
   * (the policy changed since, or the decision relied on something not recorded); listed, not hidden.
   */
  not_reproduced: { decision_id: string; recorded: boolean; current: boolean; recorded_revision: string | null }[];
  skipped: SkippedDecision[];
  /**
   * The most recent of the decisions read for replay that records its policy revision: what the service ran
   * then. When it is not `current_revision` (the live bundle of this command's bundle folder), the service
   * may run another bundle than the one called current here: a rebuild it refused (GET /readyz,
   * `policy_refused`), another folder.
   */
  latest_recorded: { decision_id: string; at: number; revision: string } | null;
}

export interface PolicyImpactOptions {
  /** A decision log file (JSON lines) to read; default: the configured one. Without either, receipts are used. */
  decisionLogFile?: string | null;
  /** How many of the most recent decisions to replay. Default 1000. */
  limit?: number;
}

interface Replay extends ReplayedDecision {
  properties: RequestProperties;
  context: Record<string, unknown>;
  approvedBy: string | null;
  recorded: boolean | null;
  recordedRevision: string | null;
}

export async function policyImpact(ctx: WritContext, candidate: PolicyEngine, options: PolicyImpactOptions = {}): Promise<PolicyImpactReport> {
  const limit = options.limit ?? 1000;
  if (!Number.isInteger(limit) || limit < 1) throw new WritError('UNPROCESSABLE', `the number of decisions to replay must be a positive integer, got ${limit}`);
  const file = options.decisionLogFile === undefined ? ctx.config.decisionLog.file : options.decisionLogFile;
  const skipped: SkippedDecision[] = [];
  const replays = await recordedDecisions(ctx, file, limit, skipped);
  let latest: PolicyImpactReport['latest_recorded'] = null;
  for (const r of replays) {
    if (r.recordedRevision !== null && (latest === null || r.at >= latest.at)) latest = { decision_id: r.decision_id, at: r.at, revision: r.recordedRevision };
  }

  const graphAt = graphsByRevision(ctx);
  const flips: PolicyFlip[] = [];
  const failures: PolicyFailure[] = [];
  const notReproduced: PolicyImpactReport['not_reproduced'] = [];
  let replayed = 0;
  for (const r of replays) {
    const graph = await graphAt(r, skipped);
    if (graph === null) continue;
    let current: Judged;
    let next: Judged;
    try {
      current = judgeReplay(ctx.policy, graph, r);
    } catch (e) {
      if (!(e instanceof WritError)) throw e;
      skipped.push({ decision_id: r.decision_id, reason: `${e.code}: ${e.message}` });
      continue;
    }
    replayed++;
    if (r.recorded !== null && r.recorded !== current.result.allow) {
      notReproduced.push({ decision_id: r.decision_id, recorded: r.recorded, current: current.result.allow, recorded_revision: r.recordedRevision });
    }
    try {
      next = judgeReplay(candidate, graph, r);
    } catch (e) {
      if (!(e instanceof WritError)) throw e;
      failures.push({ ...replayedDecision(r), current: current.result.allow, error: e.message, code: e.code });
      continue;
    }
    if (current.result.allow === next.result.allow) continue;
    flips.push({
      ...replayedDecision(r),
      flip: current.result.allow ? 'allow→deny' : 'deny→allow',
      reasons: next.result.allow ? [`the candidate allows it through chain ${next.chain.join(' > ')}`] : next.result.reasons,
      chain: next.result.allow ? next.chain : current.chain,
    });
  }
  const stranded = strandedEdges(await ctx.graph.current(), ctx.policy.data, candidate.data, ctx.clock.now());
  return {
    source: file !== null ? 'decision_log' : 'receipts',
    current_revision: ctx.policy.revision,
    candidate_revision: candidate.revision,
    replayed,
    flips,
    failures,
    stranded_edges: stranded,
    not_reproduced: notReproduced,
    skipped,
    latest_recorded: latest,
  };
}

/** A decision `engine` cannot judge: the code and message the request would be answered with. */
export interface RecentDecisionFailure extends ReplayedDecision {
  code: string;
  error: string;
}

/** Whether `engine` judges what was asked lately (recentDecisionFailures). */
export interface RecentDecisionsCheck {
  revision: string;
  source: 'decision_log' | 'receipts';
  /** Decisions judged (or failed on): those read, less those whose graph could not be rebuilt. */
  checked: number;
  failures: RecentDecisionFailure[];
}

/**
 * The last `limit` recorded decisions (read as policyImpact reads them: the configured decision log, else
 * the receipts) that `engine` fails on, replayed as policyImpact replays them. What a running service
 * asks of a rebuilt bundle before it takes it (RELOAD_CHECK_INPUTS), asked of a bundle a command judges
 * with: one failing here is one a server refuses (`policy_refused`), or answers those requests INTERNAL.
 */
export async function recentDecisionFailures(ctx: WritContext, engine: PolicyEngine, limit: number): Promise<RecentDecisionsCheck> {
  const file = ctx.config.decisionLog.file;
  const skipped: SkippedDecision[] = [];
  const graphAt = graphsByRevision(ctx);
  const failures: RecentDecisionFailure[] = [];
  let checked = 0;
  for (const r of await recordedDecisions(ctx, file, limit, skipped)) {
    const graph = await graphAt(r, skipped);
    if (graph === null) continue;
    checked++;
    try {
      judgeReplay(engine, graph, r);
    } catch (e) {
      if (!(e instanceof WritError)) throw e;
      failures.push({ ...replayedDecision(r), code: e.code, error: e.message });
    }
  }
  return { revision: engine.revision, source: file !== null ? 'decision_log' : 'receipts', checked, failures };
}

/** The last `limit` recorded decisions: from the decision log `file`, or the receipts when it is null. */
function recordedDecisions(ctx: WritContext, file: string | null, limit: number, skipped: SkippedDecision[]): Promise<Replay[]> {
  return file !== null ? fromDecisionLog(file, limit, skipped) : fromReceipts(ctx, limit, skipped);
}

/** The graph at a replayed decision's revision, each revision rebuilt once; null (the decision skipped, saying why) when it cannot be. */
function graphsByRevision(ctx: WritContext): (r: Replay, skipped: SkippedDecision[]) => Promise<AuthorityGraph | null> {
  const graphs = new Map<number, AuthorityGraph>();
  return async (r, skipped) => {
    let graph = graphs.get(r.graph_revision);
    if (!graph) {
      try {
        graph = await ctx.graph.atRevision(r.graph_revision);
      } catch (e) {
        if (!(e instanceof WritError)) throw e;
        skipped.push({ decision_id: r.decision_id, reason: e.message });
        return null;
      }
      graphs.set(r.graph_revision, graph);
    }
    return graph;
  };
}

interface Judged {
  result: DecisionResult;
  chain: string[];
}

/** `engine`'s verdict on a replayed decision, as decide judges it; throws the WritError the request would be answered with. */
function judgeReplay(engine: PolicyEngine, graph: AuthorityGraph, r: Replay): Judged {
  // As decide judges it: an environment the policy does not declare (UNPROCESSABLE) and a key no
  // resource class has (UNKNOWN_RESOURCE) are refused before any chain; an alias is rewritten.
  checkEnvironment(engine.data, r.request.environment, 'environment');
  const request = { ...r.request, resource: canonicalResource(engine.data, r.request.resource) };
  checkFields(engine.data, request.resource, request.fields, 'fields');
  const approval: VerifiedApproval | null = r.approvedBy === null ? null : { by: r.approvedBy, edges: approvalEdges(graph, r.approvedBy, request.principal, r.at) };
  const chainRequest = { ...request, risk: requestRisk(engine.data, request.action, request.risk) };
  const { input, result } = judgeChains(engine, graph, chainRequest, r.at, 'decide', (chains) =>
    decisionInputFor(graph, request, chains, r.at, { approval, properties: r.properties, context: r.context }),
  );
  return { result, chain: result.chain_index === null ? [] : input.chains[result.chain_index]!.edges.map((e) => e.id) };
}

function replayedDecision(r: Replay): ReplayedDecision {
  return { decision_id: r.decision_id, source: r.source, receipt_id: r.receipt_id, at: r.at, graph_revision: r.graph_revision, request: r.request };
}

/**
 * Whether an edge counts now or will (not revoked, not expired, a `not_before` still ahead is fine) between
 * principals that are not revoked (an ownership's `to` is managed state, not a principal).
 */
function countsNowOrLater(graph: AuthorityGraph, edge: Edge, now: number): boolean {
  return edge.revoked_at === null && (edge.expires_at === null || now < edge.expires_at) && principalEnds(edge).every((id) => graph.principal(id)?.revoked_at === null);
}

/** The edges that count now or later (countsNowOrLater) whose scope `current`'s registry covers and `candidate`'s does not (see checkScopeApplies). */
function strandedEdges(graph: AuthorityGraph, current: PolicyData, candidate: PolicyData, now: number): StrandedEdge[] {
  const out: StrandedEdge[] = [];
  for (const edge of graph.edges()) {
    if (!countsNowOrLater(graph, edge, now)) continue;
    const why = registryProblem(candidate, edge);
    if (why !== null && registryProblem(current, edge) === null) {
      out.push({ edge_id: edge.id, kind: edge.kind, from: edge.from, to: edge.to, problem: why, counts_in_part: scopeAppliesInPart(candidate, edge.kind, edge.scope) });
    }
  }
  return out.sort((a, b) => a.edge_id.localeCompare(b.edge_id));
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The last `limit` decisions of a JSON-lines decision log (OPA's event shape, as Writ writes it). */
async function fromDecisionLog(file: string, limit: number, skipped: SkippedDecision[]): Promise<Replay[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new WritError('UNPROCESSABLE', `cannot read the decision log ${file}: ${(e as Error).message}`);
  }
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const out: Replay[] = [];
  for (const [i, line] of lines.slice(-limit).entries()) {
    let event: DecisionLogEvent;
    try {
      event = JSON.parse(line) as DecisionLogEvent;
    } catch {
      skipped.push({ decision_id: null, reason: `line ${lines.length - Math.min(limit, lines.length) + i + 1} of ${file} is not JSON` });
      continue;
    }
    const req = isObject(event.input) ? event.input.request : undefined;
    const id = typeof event.decision_id === 'string' ? event.decision_id : null;
    if (!isObject(req) || typeof req.principal !== 'string' || typeof req.action !== 'string' || typeof req.resource !== 'string'
      || typeof req.environment !== 'string' || !Array.isArray(req.fields) || !isObject(event.writ) || typeof event.writ.graph_revision !== 'number') {
      skipped.push({ decision_id: id, reason: 'the event lacks the request or the graph revision (masked, or not written by Writ)' });
      continue;
    }
    const at = Date.parse(event.timestamp);
    if (id === null || Number.isNaN(at)) {
      skipped.push({ decision_id: id, reason: 'the event lacks a decision id or a timestamp' });
      continue;
    }
    const input = event.input as Record<string, unknown>;
    const approval = isObject(input.approval) && typeof input.approval.by === 'string' ? input.approval.by : null;
    const properties = isObject(input.properties) ? (input.properties as Partial<RequestProperties>) : {};
    out.push({
      decision_id: id,
      source: 'decision_log',
      receipt_id: null,
      at,
      graph_revision: event.writ.graph_revision,
      request: {
        principal: req.principal, action: req.action, resource: req.resource, environment: req.environment,
        fields: (req.fields as unknown[]).map(String), risk: typeof req.risk === 'number' ? req.risk : null,
      },
      properties: { subject: {}, resource: {}, action: {}, ...properties },
      context: isObject(input.context) ? input.context : {},
      approvedBy: approval,
      recorded: isObject(event.result) && typeof event.result.allow === 'boolean' ? event.result.allow : null,
      recordedRevision: event.bundles?.writ?.revision ?? null,
    });
  }
  return out;
}

/**
 * The decisions of the last `limit` receipts that carry one. A receipt records principal, action,
 * resource, fields, graph revision and time, not the environment nor the caller's declared risk,
 * properties or approval: the environment is the one an upstream route holds the key in (a write only
 * reaches an upstream there); when several environments hold it, the decision is skipped as ambiguous.
 */
async function fromReceipts(ctx: WritContext, limit: number, skipped: SkippedDecision[]): Promise<Replay[]> {
  // Newest first, until `limit` carry a decision (a command that checks the last 32 reads no more than it needs); then oldest first.
  const recent: Receipt[] = [];
  let before: number | undefined;
  while (recent.length < limit) {
    const page = await ctx.receipts.query({ limit: 1000, newestFirst: true, ...(before !== undefined ? { before } : {}) });
    for (const r of page.receipts) {
      if (r.decision_id !== null && recent.length < limit) recent.push(r);
    }
    if (page.next === null) break;
    before = page.next;
  }
  recent.reverse();
  const seen = new Set<string>();
  const out: Replay[] = [];
  for (const r of recent) {
    const decisionId = r.decision_id!;
    if (seen.has(decisionId)) continue;
    seen.add(decisionId);
    if (r.graph_revision === null) {
      skipped.push({ decision_id: decisionId, reason: `receipt ${r.receipt_id} records no graph revision` });
      continue;
    }
    const environments = ctx.upstreams.environmentsOf(r.resource_key);
    if (environments.length !== 1) {
      skipped.push({ decision_id: decisionId, reason: `receipt ${r.receipt_id} does not record the environment, and ${environments.length === 0 ? 'no upstream route holds' : `routes in ${environments.join(', ')} hold`} ${r.resource_key}` });
      continue;
    }
    out.push({
      decision_id: decisionId,
      source: 'receipt',
      receipt_id: r.receipt_id,
      at: r.created_at,
      graph_revision: r.graph_revision,
      request: { principal: r.principal, action: r.action, resource: r.resource_key, environment: environments[0]!, fields: [...r.fields], risk: null },
      properties: { subject: {}, resource: {}, action: {} },
      context: {},
      approvedBy: null,
      recorded: null,
      recordedRevision: r.policy_revision,
    });
  }
  return out;
}
