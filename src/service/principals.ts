import { WritError } from '../errors.js';
import { isReservedNodeId } from '../graph/index.js';
import { GOVERNANCE_ID, type Principal, type PrincipalKind, type PublicJwk } from '../graph/model.js';
import { commitGraphChange, liveGraphWriter, type GraphWriter } from './graph-changes.js';
import type { WritContext } from './context.js';
import { checkId, checkPublicKeys, checkReason, sameJson } from './validate.js';

export interface PrincipalInput {
  id: string;
  kind: Exclude<PrincipalKind, 'governance'>;
  priority_class?: string;
  attributes?: Record<string, unknown>;
  keys: PublicJwk[];
}

const DEFAULT_CLASS: Record<Exclude<PrincipalKind, 'governance'>, string> = {
  agent: 'agent',
  human: 'human',
  service: 'service',
  control_plane: 'control',
};

export function requireGovernance(caller: string, act: string): void {
  if (caller !== GOVERNANCE_ID) throw new WritError('FORBIDDEN', `only governance may ${act}; the caller is ${caller}`);
}

export async function getPrincipal(ctx: WritContext, id: string): Promise<Principal> {
  const p = (await ctx.graph.current()).principal(id);
  if (!p) throw new WritError('UNKNOWN_PRINCIPAL', `no principal "${id}"`);
  return p;
}

/** Registers a principal. Idempotent: registering the identical principal again changes nothing. */
export async function registerPrincipal(ctx: WritContext, caller: string, input: PrincipalInput, writer: GraphWriter = liveGraphWriter(ctx, caller)): Promise<{ principal: Principal; created: boolean; graph_revision: number }> {
  requireGovernance(caller, 'register principals');
  checkId(input.id, 'principal id');
  if (input.id === GOVERNANCE_ID || isReservedNodeId(input.id)) {
    throw new WritError('UNPROCESSABLE', `"${input.id}" is reserved`);
  }
  const priorityClass = input.priority_class ?? DEFAULT_CLASS[input.kind];
  const priority = ctx.config.priorities[priorityClass];
  if (priority === undefined) {
    throw new WritError('UNPROCESSABLE', `unknown priority_class "${priorityClass}"; known: ${Object.keys(ctx.config.priorities).join(', ')}`);
  }
  const keys = checkPublicKeys(input.keys);
  let created = false;
  const revision = await writer.commit((graph, now) => {
    const existing = graph.principal(input.id);
    const wanted = { kind: input.kind, priority_class: priorityClass, attributes: input.attributes ?? {}, keys };
    if (existing) {
      const have = { kind: existing.kind, priority_class: existing.priority_class, attributes: existing.attributes, keys: existing.keys };
      if (sameJson(have, wanted)) return [];
      if (sameJson({ ...have, keys }, wanted)) return [{ type: 'principal.keys_set', id: input.id, keys }];
      throw new WritError('ALREADY_EXISTS', `principal "${input.id}" exists with different kind, class or attributes`);
    }
    created = true;
    return [{ type: 'principal.created', principal: { id: input.id, ...wanted, priority, created_at: now } }];
  });
  const principal = (await writer.current()).principal(input.id);
  if (!principal) throw new WritError('INTERNAL', `principal ${input.id} vanished after registration`);
  return { principal, created, graph_revision: revision };
}

/** Revokes a principal: every chain through it stops counting at once. */
export async function revokePrincipal(ctx: WritContext, caller: string, id: string, reason: string): Promise<{ principal: Principal; revoked: boolean; graph_revision: number }> {
  requireGovernance(caller, 'revoke principals');
  if (id === GOVERNANCE_ID) throw new WritError('UNPROCESSABLE', 'the governance root cannot be revoked');
  checkReason(reason, 'a revocation');
  let changed = false;
  const revision = await commitGraphChange(ctx, caller, (graph, now) => {
    const p = graph.principal(id);
    if (!p) throw new WritError('UNKNOWN_PRINCIPAL', `no principal "${id}"`);
    if (p.revoked_at !== null) return [];
    changed = true;
    return [{ type: 'principal.revoked', id, at: now, reason }];
  });
  return { principal: await getPrincipal(ctx, id), revoked: changed, graph_revision: revision };
}
