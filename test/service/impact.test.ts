import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { analyseImpact, createDelegation, createGrant, registerPrincipal, type DelegationInput } from '../../src/service/index.js';
import { decideAndLease, decideLeaseWrite, decideOk } from '../support/agent.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { startHarness, type Harness } from '../support/harness.js';
import { generateImpactGraph } from '../../bench/impact-graph.js';

let h: Harness;

/** What a change to Writ's state would show: graph revision, lease tables, receipt log. */
async function state(h: Harness) {
  return {
    revision: (await h.ctx.graph.current()).revision,
    head: h.db.prepare('SELECT MAX(revision) AS r FROM graph_events').get(),
    keys: h.db.prepare('SELECT * FROM lease_keys ORDER BY 1').all(),
    leases: h.db.prepare('SELECT * FROM leases ORDER BY 1').all(),
    receipts: h.db.prepare('SELECT COUNT(*) AS n, MAX(seq) AS seq FROM receipt_entries').get(),
  };
}

const proposal = { from: 'editor-alice', to: 'publisher', reason: 'cover for the afternoon', max_depth: 0, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 } };

beforeAll(async () => {
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.UTC(2026, 5, 1, 12)) });
  // seo-agent-7 writes once (a receipt) and then holds a lease on a title, taken with a decision through d-orch-seo.
  const { answer: w } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'x' }, expected_version: 0 }, { release: true });
  expect(w.status).toBe(201);
  await decideAndLease(h, 'seo-agent-7', { resource: 'wp:post:7', fields: ['title'] });
}, 60_000);
afterAll(async () => h?.close());

describe('impact analysis of a revocation', () => {
  it('a delegation with part of its scope outside the registry is still listed as orphaned by a revocation above it', async () => {
    // Both written as a Writ without the scope check could: one unknown action among known ones.
    const scope = { actions: ['update_post', 'update_psot'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], constraints: { risk_max: 1 } };
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'typo-lead', kind: 'agent', keys: [] });
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'typo-worker', kind: 'agent', keys: [] });
    await commitGraphChange(h.ctx, GOVERNANCE_ID, (_graph, now) => [
      { type: 'edge.created', edge: { id: 'g-typo-lead', kind: 'grant', from: GOVERNANCE_ID, to: 'typo-lead', scope, max_depth: 1, reason: 'old', creator: GOVERNANCE_ID, created_at: now, not_before: null, expires_at: null } },
      { type: 'edge.created', edge: { id: 'd-typo-worker', kind: 'delegate', from: 'typo-lead', to: 'typo-worker', scope, max_depth: 0, reason: 'old', creator: 'typo-lead', created_at: now, not_before: null, expires_at: null } },
    ]);
    const r = await analyseImpact(h.ctx, GOVERNANCE_ID, { revoke: { edge: 'g-typo-lead' } });
    expect(r.orphaned_delegations.map((o) => o.edge.id)).toEqual(['d-typo-worker']);
    expect(r.orphaned_delegations[0]!.reasons.join(' ')).not.toContain('update_psot" is not an action');
  });

  it('revoking d-orch-seo: seo-agent-7 loses update_post on wp:post:* in production for title and meta_description; its lease would end; nothing changes', async () => {
    const was = await state(h);
    const r = await analyseImpact(h.ctx, GOVERNANCE_ID, { revoke: { edge: 'd-orch-seo' } });
    expect(r.lost).toEqual([
      { principal: 'seo-agent-7', capabilities: [{ action: 'update_post', resource: 'wp:post:*', environment: 'production', fields: ['meta_description', 'title'], via: [['g-orchestrator', 'd-orch-seo']] }] },
    ]);
    expect(r.gained).toEqual([]);
    expect(r.leases_ending).toHaveLength(1);
    expect(r.leases_ending[0]).toMatchObject({ holder: 'seo-agent-7', keys: ['wp:post:7#title'], code: 'AUTHORITY_REVOKED' });
    expect(r.leases_ending[0]!.reason).toContain('d-orch-seo');
    expect(r.graph_revision).toBe(was.revision);
    expect(await state(h)).toEqual(was);
    // The live graph still gives seo-agent-7 its authority.
    await decideOk(h, 'seo-agent-7', { resource: 'wp:post:9', fields: ['meta_description'] });
  });

  it('revoking the orchestrator: both agents below it lose what they held, the orchestrator too, and its delegations become orphans', async () => {
    const was = await state(h);
    const r = await analyseImpact(h.ctx, GOVERNANCE_ID, { revoke: { principal: 'orchestrator' } });
    expect(r.lost.map((p) => p.principal)).toEqual(['content-agent-3', 'orchestrator', 'seo-agent-7']);
    const orch = r.lost.find((p) => p.principal === 'orchestrator')!.capabilities.map((c) => `${c.action} ${c.resource} ${c.environment} [${c.fields.join(',')}]`);
    expect(orch).toEqual(['read_post wp:post:* production [*]', 'read_post wp:post:* staging [*]', 'update_post wp:post:* production [*]', 'update_post wp:post:* staging [*]']);
    expect(r.orphaned_delegations.map((o) => o.edge.id)).toEqual(['d-orch-content', 'd-orch-seo']);
    expect(r.orphaned_delegations[0]!.reasons.join(' ')).toMatch(/orchestrator/);
    expect(r.leases_ending.map((l) => l.holder)).toEqual(['seo-agent-7']);
    expect(await state(h)).toEqual(was);
  });

  it('revoking an ownership: no capability changes, the lease on the owned field would end with OWNER_CHANGED', async () => {
    const r = await analyseImpact(h.ctx, GOVERNANCE_ID, { revoke: { edge: 'o-seo-metadata' } });
    expect(r.lost).toEqual([]);
    expect(r.leases_ending.map((l) => l.code)).toEqual(['OWNER_CHANGED']);
  });

  it('an unknown edge or principal is a clear error', async () => {
    await expect(analyseImpact(h.ctx, GOVERNANCE_ID, { revoke: { edge: 'nope' } })).rejects.toMatchObject({ code: 'UNKNOWN_EDGE' });
    await expect(analyseImpact(h.ctx, GOVERNANCE_ID, { revoke: { principal: 'nope' } })).rejects.toMatchObject({ code: 'UNKNOWN_PRINCIPAL' });
    await expect(analyseImpact(h.ctx, GOVERNANCE_ID, {} as never)).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    await expect(analyseImpact(h.ctx, GOVERNANCE_ID, { delegate: { ...proposal, to: 'nobody' } })).rejects.toMatchObject({ code: 'UNKNOWN_PRINCIPAL' });
    await expect(analyseImpact(h.ctx, GOVERNANCE_ID, { delegate: { ...proposal, id: 'd-orch-seo' } })).rejects.toMatchObject({ code: 'ALREADY_EXISTS' });
  });
});

describe('impact analysis of a new delegation', () => {

  it('what publisher would gain from editor-alice, without writing the delegation', async () => {
    const was = await state(h);
    const r = await analyseImpact(h.ctx, 'editor-alice', { delegate: proposal });
    expect(r.gained).toEqual([{ principal: 'publisher', capabilities: [{ action: 'update_post', resource: 'wp:post:*', environment: 'production', fields: ['title'], via: [['g-editor-alice', expect.stringMatching(/^impact-/)]] }] }]);
    expect(r.gained[0]!.capabilities[0]!.via[0]![0]).toBe('g-editor-alice');
    expect(r.lost).toEqual([]);
    expect(await state(h)).toEqual(was);
  });

  it('what the delegate would gain names only the chains that would give it, not the delegate\'s other chains (its own affair)', async () => {
    // publisher holds publish_post on wp:post:* in production for status through g-publisher; editor-alice would add title.
    const r = await analyseImpact(h.ctx, 'editor-alice', { delegate: { ...proposal, scope: { ...proposal.scope, actions: ['publish_post'], risk_max: 2 } } });
    expect(r.gained).toEqual([{ principal: 'publisher', capabilities: [{ action: 'publish_post', resource: 'wp:post:*', environment: 'production', fields: ['title'], via: [['g-editor-alice', expect.stringMatching(/^impact-/)]] }] }]);
  });

  it('a delegation beyond the delegator\'s scope is refused as it would be when written', async () => {
    await expect(analyseImpact(h.ctx, 'editor-alice', { delegate: { ...proposal, scope: { ...proposal.scope, actions: ['deploy'] } } })).rejects.toMatchObject({ code: 'ATTENUATION_VIOLATION' });
  });

  it('a delegation that could never apply (an action the policy does not know) is refused as it would be when written', async () => {
    await expect(analyseImpact(h.ctx, 'editor-alice', { delegate: { ...proposal, scope: { ...proposal.scope, actions: ['update_psot'] } } })).rejects.toMatchObject({
      code: 'UNPROCESSABLE',
      message: expect.stringContaining('"update_psot" is not an action of the policy'),
    });
  });
});

describe('who may ask', () => {
  it('the principal who could make the change may ask; an unrelated agent may not; an audit_read holder over the subjects may', async () => {
    await expect(analyseImpact(h.ctx, 'orchestrator', { revoke: { edge: 'd-orch-seo' } })).resolves.toMatchObject({ lost: [{ principal: 'seo-agent-7' }] });
    // An edge it may not read is as unknown to it as one that does not exist (it may not learn d-orch-seo is there).
    await expect(analyseImpact(h.ctx, 'content-agent-3', { revoke: { edge: 'd-orch-seo' } })).rejects.toMatchObject({ code: 'UNKNOWN_EDGE' });
    await expect(analyseImpact(h.ctx, 'content-agent-3', { delegate: { ...proposal, from: 'orchestrator' } })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'auditor-1', kind: 'human', keys: [] });
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-auditor-1', to: 'auditor-1', reason: 'reads every principal', scope: { actions: ['audit_read'], resources: ['audit:principal:*'], environments: ['*'], fields: ['*'], risk_max: 0 } });
    await expect(analyseImpact(h.ctx, 'auditor-1', { revoke: { edge: 'd-orch-seo' } })).resolves.toMatchObject({ lost: [{ principal: 'seo-agent-7' }] });
  });

  it('audit_read limited to some environments asks about nobody: a report spans every environment', async () => {
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'auditor-staging', kind: 'human', keys: [] });
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-auditor-staging', to: 'auditor-staging', reason: 'reads staging only', scope: { actions: ['audit_read'], resources: ['audit:principal:*'], environments: ['staging'], fields: ['*'], risk_max: 0 } });
    await expect(analyseImpact(h.ctx, 'auditor-staging', { revoke: { principal: 'seo-agent-7' } })).rejects.toMatchObject({ code: expect.stringMatching(/^(FORBIDDEN|UNKNOWN_PRINCIPAL)$/) });
    await expect(analyseImpact(h.ctx, 'auditor-staging', { revoke: { edge: 'd-orch-seo' } })).rejects.toMatchObject({ code: expect.stringMatching(/^(FORBIDDEN|UNKNOWN_EDGE)$/) });
  });
});

/**
 * boss-1 (granted, max_depth 2) → mid-1 (d-boss-mid, max_depth 1) → leaf-1 (d-mid-leaf); spare-1 holds
 * nothing; peeker-1 holds audit_read on mid-1 only. None of them holds audit_read on the others.
 */
describe('what the principal who could make the change itself learns: itself and the other end of its own edge, nothing below', () => {
  const update = (fields: string[]) => ({ actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields, risk_max: 1 });
  const audit = (resource: string) => ({ actions: ['audit_read'], resources: [resource], environments: ['*'], fields: ['*'], risk_max: 0 });
  const FORBIDDEN = (caller: string) => ({ code: 'FORBIDDEN', message: expect.stringMatching(new RegExp(`^${caller} may not ask about this change`)) });
  const refusal = async (p: Promise<unknown>) => p.then(() => expect.unreachable('answered'), (e: { code: string; message: string }) => e);

  beforeAll(async () => {
    for (const id of ['boss-1', 'mid-1', 'leaf-1', 'spare-1', 'peeker-1']) await registerPrincipal(h.ctx, GOVERNANCE_ID, { id, kind: 'agent', keys: [] });
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-boss-1', to: 'boss-1', reason: 'leads', max_depth: 2, scope: update(['*']) });
    await createDelegation(h.ctx, 'boss-1', { id: 'd-boss-mid', from: 'boss-1', to: 'mid-1', reason: 'middle', max_depth: 1, scope: update(['title', 'body']) });
    await createDelegation(h.ctx, 'mid-1', { id: 'd-mid-leaf', from: 'mid-1', to: 'leaf-1', reason: 'leaf', max_depth: 0, scope: update(['title']) });
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-peeker-1', to: 'peeker-1', reason: 'reads mid-1', scope: audit('audit:principal:mid-1') });
  });

  const toMid = { from: 'boss-1', to: 'mid-1', reason: 'more', max_depth: 0, scope: update(['meta_description']) };

  it('a delegation of its own to a principal with delegates: FORBIDDEN, naming none of them (the report would count and list them)', async () => {
    const e = await refusal(analyseImpact(h.ctx, 'boss-1', { delegate: toMid }));
    expect(e).toMatchObject(FORBIDDEN('boss-1'));
    expect(e.message).not.toContain('leaf-1');
    // To a principal with nothing below it: what it would gain is the delegator's to see.
    const r = await analyseImpact(h.ctx, 'boss-1', { delegate: { ...toMid, to: 'spare-1' } });
    expect(r).toMatchObject({ principals_examined: 1, gained: [{ principal: 'spare-1' }] });
  });

  it('revoking an edge of its own: what its delegate loses, not what the principals below it lose', async () => {
    expect(await refusal(analyseImpact(h.ctx, 'boss-1', { revoke: { edge: 'd-boss-mid' } }))).toMatchObject(FORBIDDEN('boss-1'));
    const r = await analyseImpact(h.ctx, 'mid-1', { revoke: { edge: 'd-mid-leaf' } });
    expect(r.lost.map((p) => p.principal)).toEqual(['leaf-1']);
  });

  it('a principal asking about its own revocation: itself and the ends of its own edges, nothing further', async () => {
    expect(await refusal(analyseImpact(h.ctx, 'boss-1', { revoke: { principal: 'boss-1' } }))).toMatchObject(FORBIDDEN('boss-1'));
    const r = await analyseImpact(h.ctx, 'mid-1', { revoke: { principal: 'mid-1' } });
    expect(r.lost.map((p) => p.principal)).toEqual(['leaf-1', 'mid-1']);
    expect(r.orphaned_delegations.map((o) => o.edge.id)).toEqual(['d-mid-leaf']);
  });

  it('a delegation on another\'s behalf: refused before anything about its ends is checked, as POST /v1/delegations refuses it', async () => {
    const asks = [
      { ...proposal, from: 'orchestrator', to: 'publisher' },
      { ...proposal, from: 'orchestrator', to: 'nobody' }, // unknown delegate
      { ...proposal, from: 'nobody', to: 'publisher' }, // unknown delegator
      { ...proposal, from: 'orchestrator', scope: { ...proposal.scope, actions: ['deploy'] } }, // beyond what orchestrator holds
    ];
    for (const delegate of asks) {
      const e = await refusal(analyseImpact(h.ctx, 'content-agent-3', { delegate }));
      expect(e, JSON.stringify(delegate)).toMatchObject(FORBIDDEN('content-agent-3'));
      expect(e.message).not.toMatch(/nobody|orchestrator|publisher/);
      await expect(createDelegation(h.ctx, 'content-agent-3', delegate)).rejects.toMatchObject({ code: 'FORBIDDEN' });
    }
  });

  it('a delegation of its own tells what writing it would: an unknown delegate, one beyond its scope', async () => {
    const cases: [DelegationInput, string][] = [[{ ...proposal, to: 'nobody' }, 'UNKNOWN_PRINCIPAL'], [{ ...proposal, scope: { ...proposal.scope, actions: ['deploy'] } }, 'ATTENUATION_VIOLATION']];
    for (const [delegate, code] of cases) {
      await expect(analyseImpact(h.ctx, 'editor-alice', { delegate })).rejects.toMatchObject({ code });
      await expect(createDelegation(h.ctx, 'editor-alice', delegate)).rejects.toMatchObject({ code });
    }
  });

  it('FORBIDDEN names no principal the caller did not name: peeker-1 reads mid-1, not leaf-1 below it', async () => {
    for (const change of [{ revoke: { principal: 'mid-1' } }, { revoke: { edge: 'd-boss-mid' } }] as const) {
      const e = await refusal(analyseImpact(h.ctx, 'peeker-1', change));
      expect(e).toMatchObject({ code: 'FORBIDDEN' });
      expect(e.message).not.toContain('leaf-1');
    }
  });

  it('with audit_read on every principal below, the principal who could make the change may ask about all of it', async () => {
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-boss-1-reads-leaf', to: 'boss-1', reason: 'reads leaf-1', scope: audit('audit:principal:leaf-1') });
    await expect(analyseImpact(h.ctx, 'boss-1', { revoke: { edge: 'd-boss-mid' } })).resolves.toMatchObject({ lost: [{ principal: 'leaf-1' }, { principal: 'mid-1' }] });
    await expect(analyseImpact(h.ctx, 'boss-1', { delegate: toMid })).resolves.toMatchObject({ principals_examined: 2 });
    await expect(analyseImpact(h.ctx, 'boss-1', { revoke: { principal: 'boss-1' } })).resolves.toMatchObject({ principals_examined: 3 });
  });
});

describe('a caller who may not ask learns nothing, not even whether what it names exists', () => {
  const refusal = async (p: Promise<unknown>) => p.then(() => expect.unreachable('answered'), (e: { code: string; message: string }) => e);

  it('an unknown principal and a known one it may not ask about: the same FORBIDDEN, word for word', async () => {
    const unknown = await refusal(analyseImpact(h.ctx, 'content-agent-3', { revoke: { principal: 'nobody' } }));
    const known = await refusal(analyseImpact(h.ctx, 'content-agent-3', { revoke: { principal: 'orchestrator' } }));
    expect(unknown).toMatchObject({ code: 'FORBIDDEN' });
    expect(known).toMatchObject({ code: 'FORBIDDEN', message: unknown.message });
  });

  it('an unknown edge and one it may not read: the same UNKNOWN_EDGE (as GET /v1/edges/:id answers), not who the edge is to', async () => {
    const unknown = await refusal(analyseImpact(h.ctx, 'content-agent-3', { revoke: { edge: 'nope' } }));
    const known = await refusal(analyseImpact(h.ctx, 'content-agent-3', { revoke: { edge: 'd-orch-seo' } }));
    expect(unknown).toMatchObject({ code: 'UNKNOWN_EDGE', message: 'no edge "nope"' });
    expect(known).toMatchObject({ code: 'UNKNOWN_EDGE', message: 'no edge "d-orch-seo"' });
  });

  it('governance and an auditor of every principal get the precise codes', async () => {
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'auditor-all', kind: 'human', keys: [] });
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-auditor-all', to: 'auditor-all', reason: 'reads every principal', scope: { actions: ['audit_read'], resources: ['audit:principal:*'], environments: ['*'], fields: ['*'], risk_max: 0 } });
    for (const caller of [GOVERNANCE_ID, 'auditor-all']) {
      await expect(analyseImpact(h.ctx, caller, { revoke: { edge: 'nope' } })).rejects.toMatchObject({ code: 'UNKNOWN_EDGE' });
      await expect(analyseImpact(h.ctx, caller, { revoke: { principal: 'nobody' } })).rejects.toMatchObject({ code: 'UNKNOWN_PRINCIPAL' });
      await expect(analyseImpact(h.ctx, caller, { delegate: { ...proposal, from: 'orchestrator', to: 'nobody' } })).rejects.toMatchObject({ code: 'UNKNOWN_PRINCIPAL' });
    }
  });
});

describe('impact analysis on a generated graph', () => {
  it('2,000 principals: revoking a lead\'s root grant lists everyone below it, within a loose bound, and changes nothing', { timeout: 60_000 }, async () => {
    const g2 = await startHarness({ example: false });
    try {
      const now = g2.clock.now();
      const graph = generateImpactGraph(2_000, now);
      await g2.ctx.store.readWrite((tx) => tx.graph.append(graph.events, GOVERNANCE_ID, now));
      const revision = (await g2.ctx.graph.current()).revision;
      const started = performance.now();
      const r = await analyseImpact(g2.ctx, GOVERNANCE_ID, { revoke: { edge: 'g-lead-0' } });
      const ms = performance.now() - started;
      // lead-0, its managers (every 20th of 200) and their agents, plus agents holding a second delegation from one of them.
      const managers = graph.managers.filter((_, i) => i % graph.leads.length === 0);
      const agents = graph.agents.filter((_, i) => (i % graph.managers.length) % graph.leads.length === 0);
      const losing = new Set(r.lost.map((p) => p.principal));
      for (const p of ['lead-0', ...managers]) expect(losing.has(p), p).toBe(true);
      // An agent below lead-0 loses something unless a second delegation, from a manager of another lead, covers it.
      const live = await g2.ctx.graph.current();
      for (const a of agents) {
        if (losing.has(a)) continue;
        expect(live.incoming(a, ['delegate']).some((e) => !managers.includes(e.from)), a).toBe(true);
      }
      expect(agents.filter((a) => losing.has(a)).length).toBeGreaterThan(agents.length * 0.7);
      expect(r.orphaned_delegations.map((o) => o.edge.from).every((from) => from === 'lead-0' || managers.includes(from))).toBe(true);
      expect(ms).toBeLessThan(5_000);
      expect((await g2.ctx.graph.current()).revision).toBe(revision);
    } finally {
      await g2.close();
    }
  });
});
