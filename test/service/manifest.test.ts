import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { WritError } from '../../src/errors.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { applyManifest, manifestOf, manifestYaml, registerPrincipal, type GraphManifest } from '../../src/service/index.js';
import { parse } from 'yaml';
import { ManualClock } from '../../src/clock.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { startHarness, type Harness } from '../support/harness.js';
import { generatePrincipalKeyPair } from '../../src/wire/principal-keys.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

const typo = { actions: ['update_psot'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], risk_max: 1 };

describe('applying a graph manifest', () => {
  it('an edge written before scopes were checked re-applies unchanged (a service with such a manifest still starts); a new one is refused, before anything is written', async () => {
    // As a Writ without the scope check would have written it.
    await commitGraphChange(h.ctx, GOVERNANCE_ID, (_graph, now) => [{
      type: 'edge.created',
      edge: { id: 'g-old-typo', kind: 'grant', from: GOVERNANCE_ID, to: 'editor-alice', scope: { actions: ['update_psot'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], constraints: { risk_max: 1 } }, max_depth: 0, reason: 'old', creator: GOVERNANCE_ID, created_at: now, not_before: null, expires_at: null },
    }]);
    const old: GraphManifest = { grants: [{ id: 'g-old-typo', to: 'editor-alice', reason: 'old', scope: typo, max_depth: 0 }] };
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, old, '.')).resolves.toMatchObject({ created: [], unchanged: ['grant g-old-typo'] });

    const revision = (await h.ctx.graph.current()).revision;
    const fresh: GraphManifest = {
      principals: [{ id: 'manifest-agent', kind: 'agent', keys: [] }],
      grants: [...old.grants!, { id: 'g-new-typo', to: 'editor-alice', reason: 'new', scope: typo }],
    };
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, fresh, '.')).rejects.toMatchObject({
      code: 'UNPROCESSABLE',
      message: expect.stringMatching(/^the graph manifest has an edge that could never apply under the policy; nothing was applied:\n {2}- grants\[1\] \(g-new-typo\)\.scope\.actions: "update_psot" is not an action of the policy .*\(did you mean "update_post"\?\)$/),
    });
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    expect((await h.ctx.graph.current()).principal('manifest-agent')).toBeUndefined();
  });

  it('names every scope that could never apply at once (actions, resources, environments, an owned key), each at its place', async () => {
    const revision = (await h.ctx.graph.current()).revision;
    const manifest: GraphManifest = {
      grants: [
        { id: 'g-typos', to: 'editor-alice', reason: 'r', scope: { actions: ['update_post', 'pubish_post'], resources: ['wp:post:*'], environments: ['prodution'], risk_max: 1 } },
        { id: 'g-fine', to: 'editor-alice', reason: 'r', scope: { actions: ['read_post'], resources: ['wp:post:*'], environments: ['staging'], risk_max: 0 } },
      ],
      ownerships: [{ id: 'o-typo', owner: 'editor-alice', resource: 'wp:psot:1', reason: 'r' }],
      approvals: [{ id: 'a-typo', from: 'editor-alice', to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_post'], resources: ['wordpress:article:*'], environments: ['stagig'], risk_max: 1 } }],
    };
    const error = await applyManifest(h.ctx, GOVERNANCE_ID, manifest, '.', { dryRun: true }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'UNPROCESSABLE' });
    expect((error as WritError).details?.problems).toEqual([
      expect.stringMatching(/^grants\[0\] \(g-typos\)\.scope\.actions: "pubish_post" is not an action of the policy .*\(did you mean "publish_post"\?\)$/),
      'grants[0] (g-typos).scope.environments: "prodution" is not an environment of the policy (data.writ.environments: production, staging, development) (did you mean "production"?)',
      expect.stringMatching(/^ownerships\[0\] \(o-typo\)\.resource: "wp:psot:1" matches no key of any resource class/),
      'approvals[0] (a-typo).scope.resources: "wordpress:article:*" is written with the alias "wordpress:article", and keys are matched as "wp:post": write "wp:post:*"',
      'approvals[0] (a-typo).scope.environments: "stagig" is not an environment of the policy (data.writ.environments: production, staging, development) (did you mean "staging"?)',
    ]);
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, manifest, '.')).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    expect((await h.ctx.graph.current()).edge('g-fine')).toBeUndefined();
  });

  it('a key file that cannot be read or an item without a scope is refused before anything is written, naming the item', async () => {
    const revision = (await h.ctx.graph.current()).revision;
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, { principals: [{ id: 'm-1', kind: 'agent', keys: [] }, { id: 'm-2', kind: 'agent', key_files: ['no-such.jwk'] }] }, '.')).rejects.toMatchObject({
      code: 'MALFORMED_REQUEST', message: expect.stringMatching(/^principal m-2: cannot read key file .*no-such\.jwk/),
    });
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, { principals: [{ id: 'm-1', kind: 'agent', keys: [] }], grants: [{ id: 'g-no-scope', to: 'm-1', reason: 'r' } as never] }, '.')).rejects.toMatchObject({
      code: 'MALFORMED_REQUEST', message: expect.stringContaining('grants[0] (g-no-scope): "scope" is missing'),
    });
    expect((await h.ctx.graph.current()).revision).toBe(revision);
  });

  it('is applied all or nothing: a problem only the graph shows (an unknown principal, a delegation wider than its delegator holds) in the last item leaves the items before it unwritten', async () => {
    const revision = (await h.ctx.graph.current()).revision;
    const scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 };
    const base: GraphManifest = {
      principals: [{ id: 'atomic-agent', kind: 'agent', keys: [] }],
      grants: [{ id: 'g-atomic-lead', to: 'editor-alice', reason: 'lead', max_depth: 1, scope }],
    };
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, { ...base, delegations: [{ id: 'd-ghost', from: 'ghost', to: 'atomic-agent', reason: 'r', scope }] }, '.')).rejects.toMatchObject({
      code: 'UNKNOWN_PRINCIPAL', message: expect.stringMatching(/^delegation d-ghost: delegator "ghost" is not a registered principal/),
    });
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, { ...base, delegations: [{ id: 'd-wider', from: 'orchestrator', to: 'atomic-agent', reason: 'r', scope: { ...scope, risk_max: 5 } }] }, '.')).rejects.toMatchObject({
      code: 'ATTENUATION_VIOLATION', message: expect.stringMatching(/^delegation d-wider: /),
    });
    const graph = await h.ctx.graph.current();
    expect(graph.revision).toBe(revision);
    expect(graph.principal('atomic-agent')).toBeUndefined();
    expect(graph.edge('g-atomic-lead')).toBeUndefined();

    // Whole, it is one commit, and each item sees the ones before it: a delegation from a grant the same manifest gives to a principal it registers.
    const appends = vi.spyOn(h.ctx.store, 'readWrite');
    const ok = await applyManifest(h.ctx, GOVERNANCE_ID, { ...base, delegations: [{ id: 'd-atomic', from: 'editor-alice', to: 'atomic-agent', reason: 'r', scope }] }, '.');
    expect(appends).toHaveBeenCalledTimes(1);
    appends.mockRestore();
    expect(ok).toEqual({ created: ['principal atomic-agent', 'grant g-atomic-lead', 'delegation d-atomic'], updated: [], unchanged: [], revoked: [], skipped: [], graph_revision: revision + 3 });
    const events = await h.ctx.store.read((tx) => tx.graph.read(revision));
    expect(events.map((e) => e.event.type)).toEqual(['principal.created', 'edge.created', 'edge.created']);
  });

  it('a dry run says what applying would do, with the same checks, and writes nothing', async () => {
    const revision = (await h.ctx.graph.current()).revision;
    const scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 };
    const manifest: GraphManifest = { principals: [{ id: 'dry-agent', kind: 'agent', keys: [] }], delegations: [{ id: 'd-dry', from: 'orchestrator', to: 'dry-agent', reason: 'r', scope }, { id: 'd-orch-seo', from: 'orchestrator', to: 'seo-agent-7', reason: 'SEO agent may rewrite titles and meta descriptions only', max_depth: 0, scope: { ...scope, fields: ['title', 'meta_description'] } }] };
    expect(await applyManifest(h.ctx, GOVERNANCE_ID, manifest, '.', { dryRun: true })).toEqual({ created: ['principal dry-agent', 'delegation d-dry'], updated: [], unchanged: ['delegation d-orch-seo'], revoked: [], skipped: [], graph_revision: revision });
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, { ...manifest, delegations: [{ id: 'd-dry', from: 'ghost', to: 'dry-agent', reason: 'r', scope }] }, '.', { dryRun: true })).rejects.toMatchObject({ code: 'UNKNOWN_PRINCIPAL' });
    const graph = await h.ctx.graph.current();
    expect(graph.revision).toBe(revision);
    expect(graph.principal('dry-agent')).toBeUndefined();
  });

  it('the graph exported as a manifest applies to its own graph as no change, and rebuilds it elsewhere; what a rebuild would refuse is left out and said', async () => {
    const scope = (fields: string[]) => ({ actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields, risk_max: 1 });
    const g = (payload: Record<string, unknown>, url = '/v1/delegations') => h.call('governance', { method: 'POST', url, payload });
    for (const id of ['x-lead', 'x-mid', 'x-leaf', 'x-temp']) await registerPrincipal(h.ctx, GOVERNANCE_ID, { id, kind: 'agent', keys: [] });
    // Created in an order their ids do not sort in: a rebuild must follow the creation order.
    expect((await g({ id: 'z-grant', to: 'x-lead', reason: 'root', max_depth: 2, scope: scope(['title', 'body']) }, '/v1/grants')).status).toBe(201);
    expect((await g({ id: 'z-d1', from: 'x-lead', to: 'x-mid', reason: 'r', max_depth: 1, scope: scope(['title', 'body']) })).status).toBe(201);
    expect((await g({ id: 'a-d2', from: 'x-mid', to: 'x-leaf', reason: 'r', max_depth: 0, not_before: new Date(h.clock.now()).toISOString(), expires_at: new Date(h.clock.now() + 7 * 86_400_000).toISOString(), scope: scope(['title']) })).status).toBe(201);
    // One that will have expired, and one orphaned by its parent's revocation.
    expect((await g({ id: 'd-soon', from: 'x-lead', to: 'x-temp', reason: 'r', max_depth: 0, expires_at: new Date(h.clock.now() + 60_000).toISOString(), scope: scope(['title']) })).status).toBe(201);
    expect((await g({ id: 'g-side', to: 'x-temp', reason: 'side', max_depth: 1, scope: scope(['body']) }, '/v1/grants')).status).toBe(201);
    expect((await g({ id: 'd-orphan', from: 'x-temp', to: 'x-leaf', reason: 'r', max_depth: 0, scope: scope(['body']) })).status).toBe(201);
    await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-side', payload: { reason: 'gone' } });
    await g({ id: 'a-export', from: 'editor-alice', to: 'publisher', reason: 'sign-off', scope: { actions: ['publish_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 3 } }, '/v1/approvals');
    (h.clock as ManualClock).advance(120_000);

    const graph = await h.ctx.graph.current();
    const { manifest, left_out } = manifestOf(h.ctx, graph, h.clock.now());
    expect(manifest.delegations!.map((d) => d.id).filter((id) => /^(z-|a-d2|d-soon|d-orphan)/.test(id ?? ""))).toEqual(['z-d1', 'a-d2']);
    expect(left_out).toEqual(expect.arrayContaining([
      { id: 'd-soon', why: expect.stringMatching(/^it expired at \S+Z$/) },
      { id: 'd-orphan', why: expect.stringMatching(/^it counts for nothing now \(writ orphans\): /) },
      { id: 'g-old-typo', why: expect.stringMatching(/^it counts for nothing now \(writ orphans\): .*update_psot/) },
    ]));
    const yaml = manifestYaml(h.ctx, graph, h.clock.now());
    expect(yaml).toMatch(/^# Writ graph at revision \d+, exported \S+Z as a manifest/);
    expect(yaml).toContain('#   d-orphan: it counts for nothing now (writ orphans): ');
    expect(yaml).not.toMatch(/[&*]a\d/); // no YAML anchors: each list stands where it is used
    const round = parse(yaml) as GraphManifest;
    expect(round).toEqual(JSON.parse(JSON.stringify(manifest)));

    const same = await applyManifest(h.ctx, GOVERNANCE_ID, round, '.', { dryRun: true });
    expect(same.created).toEqual([]);
    expect(same.updated).toEqual([]);
    const items = Object.values(round).reduce((n, list) => n + (list as unknown[]).length, 0);
    expect(same.unchanged).toHaveLength(items);

    const elsewhere = await startHarness({ example: false, clock: h.clock as ManualClock });
    try {
      const built = await applyManifest(elsewhere.ctx, GOVERNANCE_ID, round, '.');
      expect(built.created).toHaveLength(items);
      expect(manifestOf(elsewhere.ctx, await elsewhere.ctx.graph.current(), h.clock.now())).toEqual({ manifest, left_out: [], as_they_are: [] });
    } finally {
      await elsewhere.close();
    }
  });

  it('an edge part of whose scope the policy does not have (written before, the rest still counting) is exported as it is and named: its own graph takes the export unchanged, a new one refuses it with why', async () => {
    // As a Writ before environments were declared would have written it: `qa` is not one of the policy's.
    const scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production', 'qa'], fields: ['*'], constraints: { risk_max: 1 } };
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'qa-lead', kind: 'agent', keys: [] });
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'qa-bot', kind: 'agent', keys: [] });
    await commitGraphChange(h.ctx, GOVERNANCE_ID, (_graph, now) => [{
      type: 'edge.created',
      edge: { id: 'g-qa-lead', kind: 'grant', from: GOVERNANCE_ID, to: 'qa-lead', scope, max_depth: 1, reason: 'before environments were declared', creator: GOVERNANCE_ID, created_at: now, not_before: null, expires_at: null },
    }]);
    await applyManifest(h.ctx, GOVERNANCE_ID, { delegations: [{ id: 'd-qa-bot', from: 'qa-lead', to: 'qa-bot', reason: 'r', scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 1 } }] }, '.');
    const graph = await h.ctx.graph.current();
    const { manifest, left_out, as_they_are } = manifestOf(h.ctx, graph, h.clock.now());
    expect(manifest.grants!.find((g) => g.id === 'g-qa-lead')?.scope.environments).toEqual(['production', 'qa']);
    expect(manifest.delegations!.some((d) => d.id === 'd-qa-bot')).toBe(true);
    expect(left_out.map((x) => x.id)).not.toContain('g-qa-lead');
    expect(as_they_are).toEqual([{ id: 'g-qa-lead', why: 'scope.environments: "qa" is not an environment of the policy (data.writ.environments: production, staging, development)' }]);
    const yaml = manifestYaml(h.ctx, graph, h.clock.now());
    expect(yaml).toContain('# Written as they are (the rest of their scope still counts), but a new graph refuses them: edit them before rebuilding elsewhere:\n#   g-qa-lead: scope.environments: "qa"');
    const round = parse(yaml) as GraphManifest;
    const same = await applyManifest(h.ctx, GOVERNANCE_ID, round, '.', { dryRun: true });
    expect(same.created).toEqual([]);
    const elsewhere = await startHarness({ example: false, clock: h.clock as ManualClock });
    try {
      await expect(applyManifest(elsewhere.ctx, GOVERNANCE_ID, round, '.')).rejects.toMatchObject({
        code: 'UNPROCESSABLE', message: expect.stringContaining('(g-qa-lead).scope.environments: "qa" is not an environment of the policy'),
      });
    } finally {
      await elsewhere.close();
    }
  });

  it('a principal whose keys the manifest changes is reported as updated (its old keys stop verifying), not as unchanged', async () => {
    const { publicJwk } = await generatePrincipalKeyPair('rotated-key');
    await applyManifest(h.ctx, GOVERNANCE_ID, { principals: [{ id: 'keyed-agent', kind: 'agent', keys: [] }] }, '.');
    const r = await applyManifest(h.ctx, GOVERNANCE_ID, { principals: [{ id: 'keyed-agent', kind: 'agent', keys: [publicJwk as never] }] }, '.');
    expect(r).toMatchObject({ created: [], updated: ['principal keyed-agent'], unchanged: [] });
    expect((await h.ctx.graph.current()).principal('keyed-agent')?.keys.map((k) => k.kid)).toEqual(['rotated-key']);
    expect(await applyManifest(h.ctx, GOVERNANCE_ID, { principals: [{ id: 'keyed-agent', kind: 'agent', keys: [publicJwk as never] }] }, '.')).toMatchObject({ updated: [], unchanged: ['principal keyed-agent'] });
  });

  it('an item is checked with the schema its API body has: a misspelt or unknown property is refused, with what it most likely meant, before anything is written', async () => {
    const revision = (await h.ctx.graph.current()).revision;
    // Before, each was dropped without a word: the delegation gave every field and never expired, the
    // principal fell into its kind's default class, and the constraint limited nothing.
    const manifest = {
      principals: [{ id: 'typo-bot', kind: 'agent', keys: [], priorty_class: 'control' }],
      delegations: [{
        id: 'd-typo-bot', from: 'orchestrator', to: 'typo-bot', reason: 'titles only', max_depth: '0', expires: '2027-01-01T00:00:00Z',
        scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], feilds: ['title'], constraints: { risk_max: 1, risk_mx: 0 } },
      }],
      edges: [],
    };
    const refused = applyManifest(h.ctx, GOVERNANCE_ID, manifest as never, '.');
    await expect(refused).rejects.toMatchObject({ code: 'MALFORMED_REQUEST', details: { problems: [
      'the manifest: unknown property "edges"',
      'principals[0] (typo-bot): unknown property "priorty_class" (did you mean "priority_class"?)',
      'delegations[0] (d-typo-bot): unknown property "expires" (did you mean "expires_at"?)',
      'delegations[0] (d-typo-bot).scope: unknown property "feilds" (did you mean "fields"?)',
      'delegations[0] (d-typo-bot).scope.constraints: unknown property "risk_mx" (did you mean "risk_max"?)',
      'delegations[0] (d-typo-bot).max_depth must be integer (found "0")',
    ] } });
    await expect(refused).rejects.toThrow(/^the graph manifest has 6 problems; nothing was applied:\n {2}- the manifest: unknown property "edges"\n/);
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    expect((await h.ctx.graph.current()).principal('typo-bot')).toBeUndefined();
  });

  it('says one thing per problem, and suggests a name only when it is a likely typo', async () => {
    const manifest = {
      principals: [{ id: 'p-1', kind: 'agent', keys: [], ttl: 3, by: 'me' }],
      grants: [{ id: 'g-1', to: 'p-1', reason: 'r', expires_at: true, tokens: 1, scope: { actions: ['read_post'], resources: ['wp:post:*'], risk_max: 0, enviroments: ['production'] } }],
    };
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, manifest as never, '.')).rejects.toMatchObject({ details: { problems: [
      'principals[0] (p-1): unknown property "ttl"',
      'principals[0] (p-1): unknown property "by"',
      'grants[0] (g-1): unknown property "tokens"',
      'grants[0] (g-1).expires_at must be an RFC 3339 time, ms since the epoch or null (found true)',
      'grants[0] (g-1).scope: unknown property "enviroments" (did you mean "environments"?)',
    ] } });
  });

  it('a principal has at most 16 keys, its keys and key_files together', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'writ-keys-'));
    try {
      const pairs = await Promise.all(Array.from({ length: 17 }, (_, i) => generatePrincipalKeyPair(`k-${i}`)));
      writeFileSync(join(dir, 'k-16.pub.jwk'), JSON.stringify(pairs[16]!.publicJwk));
      const manifest = { principals: [{ id: 'many-keys', kind: 'agent' as const, keys: pairs.slice(0, 16).map((p) => p.publicJwk as never), key_files: ['k-16.pub.jwk'] }] };
      await expect(applyManifest(h.ctx, GOVERNANCE_ID, manifest, dir)).rejects.toMatchObject({ code: 'UNPROCESSABLE', message: 'principal many-keys: a principal has at most 16 keys, not 17' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an edge applied while its typo was dropped is refused when the manifest is applied again, so the wider edge is found (and replaced under a new id)', async () => {
    const scope = { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], risk_max: 1 };
    // As the manifest without the check applied `feilds: [title]`: a delegation of every field.
    await applyManifest(h.ctx, GOVERNANCE_ID, { delegations: [{ id: 'd-wide', from: 'orchestrator', to: 'content-agent-3', reason: 'titles only', max_depth: 0, scope }] }, '.');
    expect((await h.ctx.graph.current()).edge('d-wide')?.scope.fields).toEqual(['*']);
    const again = { delegations: [{ id: 'd-wide', from: 'orchestrator', to: 'content-agent-3', reason: 'titles only', max_depth: 0, scope: { ...scope, feilds: ['title'] } }] };
    await expect(applyManifest(h.ctx, GOVERNANCE_ID, again as never, '.')).rejects.toMatchObject({ code: 'MALFORMED_REQUEST', details: { problems: ['delegations[0] (d-wide).scope: unknown property "feilds" (did you mean "fields"?)'] } });
  });
});
