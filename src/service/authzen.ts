/**
 * The OpenID AuthZEN Authorization API 1.0 front door, transport-free. Every evaluation is a call of
 * `decide` — the same use case as POST /v1/decisions, so the same judgement, signature and decision
 * log event — after a fixed mapping:
 *
 *   subject.id            principal id        subject.type   its kind (a mismatch is refused)
 *   resource.id           canonical key or registered alias
 *   resource.type         the key's prefix (all segments but the last: `wp:post`; a mismatch is refused)
 *   resource.properties   `environment` (required) and `fields` (optional) of the decision
 *   action.name           the action
 *   context               the decision context (`risk`, `approval`, `reason`, and anything else)
 *   *.properties          reach the policy as `input.properties.{subject,resource,action}`
 */
import { ERROR_CATALOGUE, WritError } from '../errors.js';
import { toWireTimeOrNull } from '../wire/time.js';
import type {
  AuthzenDecision,
  AuthzenEvaluationRequest,
  AuthzenEvaluationsRequest,
  AuthzenEvaluationsResponse,
  EvaluationsSemantic,
} from '../wire/authzen.js';
import { checkMayAskAbout } from './ask-about.js';
import type { WritContext } from './context.js';
import { decide, type DecisionRequestInput } from './decide.js';
import { checkEnvironment, checkFields, checkResourceType } from './resources.js';
import type { PolicyData } from '../policy/types.js';

export const malformed = (message: string) => new WritError('MALFORMED_REQUEST', message);

/** The principal `subject.id` names, whose kind `subject.type` must be. */
export async function subjectPrincipal(ctx: WritContext, subject: { type: string; id: string }): Promise<string> {
  const principal = (await ctx.graph.current()).principal(subject.id);
  if (!principal) throw new WritError('UNKNOWN_PRINCIPAL', `no principal "${subject.id}"`);
  if (subject.type !== principal.kind) throw malformed(`subject.type "${subject.type}" is not the kind of ${principal.id} ("${principal.kind}")`);
  return principal.id;
}

/**
 * `resource.properties.environment` (required when `required`; one the policy declares, where it
 * declares them) and `.fields` (a list of names), checked.
 */
export function environmentAndFields(data: PolicyData, props: Record<string, unknown> | undefined, required: boolean): { environment?: string; fields?: string[] } {
  const { environment, fields } = props ?? {};
  if (environment === undefined && required) throw malformed('resource.properties.environment is required: the environment the decision is for (e.g. "production")');
  if (environment !== undefined && (typeof environment !== 'string' || environment === '')) throw malformed('resource.properties.environment must be an environment name');
  if (environment !== undefined) checkEnvironment(data, environment, 'resource.properties.environment');
  if (fields !== undefined && !(Array.isArray(fields) && fields.every((f) => typeof f === 'string' && f !== ''))) throw malformed('resource.properties.fields must be a list of field names');
  const checked: { environment?: string; fields?: string[] } = {};
  if (environment !== undefined) checked.environment = environment;
  if (fields !== undefined) checked.fields = fields as string[];
  return checked;
}

/** The v1 decision request an AuthZEN evaluation maps to, for principal `subject.id`. */
export async function toDecisionRequest(ctx: WritContext, e: AuthzenEvaluationRequest): Promise<{ principal: string; body: DecisionRequestInput }> {
  const principal = await subjectPrincipal(ctx, e.subject);
  const { environment, fields } = environmentAndFields(ctx.policy.data, e.resource.properties, true);
  const canonical = checkResourceType(ctx.policy.data, e.resource.id, e.resource.type);
  if (fields) checkFields(ctx.policy.data, canonical, fields, 'resource.properties.fields');
  return {
    principal,
    body: {
      action: e.action.name,
      resource: canonical,
      environment: environment!,
      ...(fields ? { fields } : {}),
      context: (e.context ?? {}) as DecisionRequestInput['context'],
      properties: { subject: e.subject.properties ?? {}, resource: e.resource.properties ?? {}, action: e.action.properties ?? {} },
    },
  };
}

/** POST /access/v1/evaluation: one decision, asked by `caller` (the authenticated assertion's principal). */
export async function evaluateAccess(ctx: WritContext, caller: string, e: AuthzenEvaluationRequest, from?: string): Promise<AuthzenDecision> {
  // Who may ask comes first: a caller that may not ask about others learns nothing about them, not even
  // whether they exist. The environment is checked before (it tells nothing about them), so that a
  // misspelt one is named as such, not taken for a question the caller may not ask. So are the fields.
  const { environment, fields } = environmentAndFields(ctx.policy.data, e.resource.properties, false);
  if (fields) checkFields(ctx.policy.data, checkResourceType(ctx.policy.data, e.resource.id, e.resource.type), fields, 'resource.properties.fields');
  await checkMayAskAbout(ctx, caller, e.subject.id, environment);
  const { principal, body } = await toDecisionRequest(ctx, e);
  const d = await decide(ctx, principal, body, { via: 'authzen', askedBy: caller, ...(from !== undefined ? { requestedBy: from } : {}) });
  const common = { decision_id: d.decision_id, obligations: d.obligations, policy_revision: d.policy_revision, graph_revision: d.graph_revision };
  // Object.assign onto the literal, not `{ ...common, token, … }`: see test/architecture/spread-then-add.test.ts.
  if (d.allow) return { decision: true, context: Object.assign(common, { token: d.token, expires_at: toWireTimeOrNull(d.expires_at), chain: d.chain }) };
  return {
    decision: false,
    context: Object.assign(common, {
      reason_admin: { '403': d.reasons.join('; ') },
      reason_user: {
        '403': d.approval_missing
          ? `Needs an approval: ${d.action} on ${d.resource}. Ask an approver to sign one for decision ${d.decision_id}.`
          : `Not allowed: ${d.action} on ${d.resource}. Ask an administrator about decision ${d.decision_id}.`,
      },
      reasons: d.reasons,
      approval_missing: d.approval_missing,
    }),
  };
}

const SEMANTICS: readonly EvaluationsSemantic[] = ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'];

/**
 * POST /access/v1/evaluations: top-level subject/action/resource/context are defaults each item may
 * override (wholesale). Items are judged in order; a failing item is `decision: false` with
 * `context.error`. `deny_on_first_deny` stops after the first false, `permit_on_first_permit` after
 * the first true. Without items it answers as the single evaluation does.
 */
export async function evaluateAccessBatch(ctx: WritContext, caller: string, req: AuthzenEvaluationsRequest, from?: string): Promise<AuthzenEvaluationsResponse | AuthzenDecision> {
  const semantic = req.options?.evaluations_semantic ?? 'execute_all';
  if (!SEMANTICS.includes(semantic)) throw malformed(`options.evaluations_semantic must be one of ${SEMANTICS.join(', ')}, got "${String(semantic)}"`);
  const items = req.evaluations ?? [];
  if (items.length === 0) {
    if (!req.subject || !req.action || !req.resource) throw malformed('subject, action and resource are required (at the top level, or in every item of evaluations)');
    return evaluateAccess(ctx, caller, { subject: req.subject, action: req.action, resource: req.resource, ...(req.context ? { context: req.context } : {}) }, from);
  }
  const merged = items.map((item, i) => {
    const e = { subject: item.subject ?? req.subject, action: item.action ?? req.action, resource: item.resource ?? req.resource, context: item.context ?? req.context };
    for (const key of ['subject', 'action', 'resource'] as const) {
      if (!e[key]) throw malformed(`evaluations[${i}] has no ${key} and there is no top-level default`);
    }
    return e as AuthzenEvaluationRequest;
  });
  const evaluations: AuthzenDecision[] = [];
  for (const e of merged) {
    let d: AuthzenDecision;
    try {
      d = await evaluateAccess(ctx, caller, e, from);
    } catch (err) {
      if (!(err instanceof WritError) || err.code === 'INTERNAL') throw err;
      d = { decision: false, context: { error: { status: ERROR_CATALOGUE[err.code].status, code: err.code, message: err.message } } };
    }
    evaluations.push(d);
    if (semantic === 'deny_on_first_deny' && !d.decision) break;
    if (semantic === 'permit_on_first_permit' && d.decision) break;
  }
  return { evaluations };
}
