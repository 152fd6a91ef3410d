/**
 * A generated authority graph for impact analysis: governance grants to team leads (1%), leads delegate
 * to managers (10%), managers to agents (the rest; a fifth of the agents hold a second delegation from
 * another manager), each step narrower (fields, environments, risk, depth). Managers approve one of
 * their agents; one service owns every post. Deterministic (seeded), so runs compare.
 */
import { GOVERNANCE_ID, type Edge, type GraphEvent, type Scope } from '../src/graph/model.js';

export interface ImpactGraph {
  events: GraphEvent[];
  leads: string[];
  managers: string[];
  agents: string[];
  /** Grant and delegation edge ids by level. */
  grants: string[];
  leadDelegations: string[];
  agentDelegations: string[];
  /** Fields each agent holds through its first delegation. */
  agentFields: Map<string, string[]>;
}

const FIELDS = ['title', 'body', 'meta_description', 'tags', 'canonical'];

export function generateImpactGraph(principals: number, now: number): ImpactGraph {
  let seed = 0x1a2b3c;
  const random = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const subset = (xs: readonly string[], n: number) => [...xs].sort(() => random() - 0.5).slice(0, Math.max(1, Math.min(n, xs.length))).sort();

  const leadCount = Math.max(1, Math.round(principals * 0.01));
  const managerCount = Math.max(1, Math.round(principals * 0.1));
  const agentCount = principals - leadCount - managerCount - 1; // one owner service
  const events: GraphEvent[] = [];
  const principal = (id: string, kind: 'agent' | 'human' | 'service') =>
    events.push({ type: 'principal.created', principal: { id, kind, priority_class: kind === 'agent' ? 'agent' : 'human', priority: 10, attributes: {}, keys: [], created_at: now } });
  const edge = (e: Pick<Edge, 'id' | 'kind' | 'from' | 'to' | 'scope' | 'max_depth'>) =>
    events.push({ type: 'edge.created', edge: { ...e, creator: e.kind === 'delegate' ? e.from : GOVERNANCE_ID, reason: 'generated', created_at: now, not_before: null, expires_at: null } });
  const scope = (actions: string[], environments: string[], fields: string[], risk: number, resources = ['wp:post:*']): Scope => ({ actions, resources, environments, fields, constraints: { risk_max: risk } });

  const g: ImpactGraph = { events, leads: [], managers: [], agents: [], grants: [], leadDelegations: [], agentDelegations: [], agentFields: new Map() };
  principal('post-owner', 'service');
  edge({ id: 'o-posts', kind: 'owns', from: 'post-owner', to: 'wp:post:*', scope: scope(['*'], ['*'], ['*'], 0), max_depth: null });
  for (let i = 0; i < leadCount; i++) {
    const id = `lead-${i}`;
    principal(id, 'human');
    g.leads.push(id);
    g.grants.push(`g-${id}`);
    edge({ id: `g-${id}`, kind: 'grant', from: GOVERNANCE_ID, to: id, scope: scope(['update_post', 'read_post', 'publish_post'], ['production', 'staging'], ['*'], 2), max_depth: 2 });
  }
  const managerFields = new Map<string, string[]>();
  for (let i = 0; i < managerCount; i++) {
    const id = `manager-${i}`;
    const lead = g.leads[i % leadCount]!;
    const fields = subset(FIELDS, 3);
    principal(id, 'human');
    g.managers.push(id);
    managerFields.set(id, fields);
    g.leadDelegations.push(`d-${lead}-${id}`);
    edge({ id: `d-${lead}-${id}`, kind: 'delegate', from: lead, to: id, scope: scope(['update_post', 'read_post'], random() < 0.5 ? ['production'] : ['production', 'staging'], fields, 2), max_depth: 1 });
  }
  for (let i = 0; i < agentCount; i++) {
    const id = `agent-${i}`;
    const manager = g.managers[i % managerCount]!;
    const fields = subset(managerFields.get(manager)!, 1 + Math.floor(random() * 2));
    principal(id, 'agent');
    g.agents.push(id);
    g.agentFields.set(id, fields);
    g.agentDelegations.push(`d-${manager}-${id}`);
    edge({ id: `d-${manager}-${id}`, kind: 'delegate', from: manager, to: id, scope: scope(['update_post'], ['production'], fields, 1), max_depth: 0 });
    if (i < managerCount) edge({ id: `a-${manager}-${id}`, kind: 'approves', from: manager, to: id, scope: scope(['update_post'], ['production'], ['*'], 3), max_depth: null });
    if (random() < 0.2) {
      const other = g.managers[Math.floor(random() * managerCount)]!;
      if (other !== manager) {
        edge({ id: `d-${other}-${id}`, kind: 'delegate', from: other, to: id, scope: scope(['update_post'], ['production'], subset(managerFields.get(other)!, 1), 1), max_depth: 0 });
      }
    }
  }
  return g;
}
