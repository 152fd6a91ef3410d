import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { findOpa } from '../../src/cli/opa.js';
import { buildPolicyBundle, loadCandidatePolicy } from '../../src/policy/index.js';
import { createGrant, policyImpact, registerPrincipal, revokeEdge, revokePrincipal, type PolicyImpactReport } from '../../src/service/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { act, decideOk, leaseOk } from '../support/agent.js';
import { BUNDLE_DIR, REPO, startHarness, type Harness } from '../support/harness.js';
import { TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';

let h: Harness;
let work: string;
let logFile: string;
const ids: Record<string, string> = {};

/** A copy of policies/ with one edit applied. */
function candidatePolicies(name: string, edit: (dir: string) => void): string {
  const dir = join(work, name);
  cpSync(join(REPO, 'policies'), dir, { recursive: true });
  edit(dir);
  return dir;
}

/** update_post becomes risk 2: every chain whose risk ceiling is 1 (the agents' delegations) no longer covers it. */
const raiseUpdateRisk = (dir: string) => {
  const file = join(dir, 'data.json');
  const data = JSON.parse(readFileSync(file, 'utf8'));
  data.writ.actions.update_post.risk = 2;
  writeFileSync(file, JSON.stringify(data, null, 2));
};

async function state() {
  return {
    revision: (await h.ctx.graph.current()).revision,
    leases: h.db.prepare('SELECT * FROM leases ORDER BY 1').all(),
    receipts: h.db.prepare('SELECT COUNT(*) AS n, MAX(seq) AS seq FROM receipt_entries').get(),
    log: readFileSync(logFile, 'utf8'),
    bundle: readFileSync(join(BUNDLE_DIR, 'revision'), 'utf8'),
  };
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'writ-policy-impact-'));
  logFile = join(work, 'decisions.jsonl');
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.UTC(2026, 5, 1, 12)), config: { decisionLog: { ...loadConfig({}, {}).decisionLog, file: logFile } } });
  const seo = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
  ids.seo = seo.body.decision_id;
  ids.content = (await decideOk(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['body'] })).body.decision_id;
  ids.orchestrator = (await decideOk(h, 'orchestrator', { resource: 'wp:post:5', fields: ['title'] })).body.decision_id;
  const denied = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['body'] } });
  expect(denied.body.allow).toBe(false);
  ids.denied = denied.body.decision_id;
  const ownerOnly = await h.call('editor-alice', {
    method: 'POST', url: '/access/v1/evaluation',
    payload: { subject: { type: 'human', id: 'editor-alice' }, resource: { type: 'wp:post', id: 'wp:post:12', properties: { environment: 'production', fields: ['title'], ownerID: 'editor-bob' } }, action: { name: 'update_post' } },
  });
  expect(ownerOnly.body.decision).toBe(false);
  // seo-agent-7 writes with its decision: a receipt carrying the decision id.
  const lease = await leaseOk(h, 'seo-agent-7', [seo.token]);
  const w = await act(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'], payload: { title: 'x' }, expected_version: 0 }, { decision: seo.token, lease });
  expect(w.status).toBe(201);
  ids.receipt = w.body.receipt.receipt_id;
  await h.ctx.decisionLog.flush();
}, 60_000);
afterAll(async () => {
  await h?.close();
  rmSync(work, { recursive: true, force: true });
});

const flipsOf = (r: PolicyImpactReport) => r.flips.map((f) => `${f.flip} ${f.request.principal} ${f.request.action} ${f.request.resource} [${f.request.fields.join(',')}]`).sort();

describe('writ policy impact: the decisions a candidate bundle would flip', () => {
  it('raising update_post to risk 2 flips the agents\' allows to denies, with the reason; the orchestrator (ceiling 2) keeps its allow; nothing changes', { timeout: 60_000 }, async () => {
    const before = await state();
    const { engine, built } = await loadCandidatePolicy(candidatePolicies('risk', raiseUpdateRisk), findOpa);
    expect(built).toBe(true);
    const r = await policyImpact(h.ctx, engine);
    expect(r.source).toBe('decision_log');
    expect(r.replayed).toBe(5);
    expect(r.skipped).toEqual([]);
    expect(r.failures).toEqual([]);
    expect(r.not_reproduced).toEqual([]);
    expect(flipsOf(r)).toEqual([
      'allow→deny content-agent-3 update_post wp:post:1024 [body]',
      'allow→deny seo-agent-7 update_post wp:post:1024 [title]',
    ]);
    const seo = r.flips.find((f) => f.decision_id === ids.seo)!;
    expect(seo.reasons.join(' ')).toMatch(/risk/);
    expect(seo.chain).toEqual(['g-orchestrator', 'd-orch-seo']);
    expect(r.candidate_revision).not.toBe(r.current_revision);
    expect(await state()).toEqual(before);
  });

  it('a policies folder with a stray policy.wasm beside its Rego (an opa build there) is built from the Rego, not read as that wasm', { timeout: 60_000 }, async () => {
    const dir = candidatePolicies('stray-wasm', (d) => {
      raiseUpdateRisk(d);
      copyFileSync(join(BUNDLE_DIR, readFileSync(join(BUNDLE_DIR, 'revision'), 'utf8').trim().replace('sha256:', 'bundles/'), 'policy.wasm'), join(d, 'policy.wasm'));
    });
    const { engine, built } = await loadCandidatePolicy(dir, findOpa);
    expect(built).toBe(true);
    expect(flipsOf(await policyImpact(h.ctx, engine))).toContain('allow→deny seo-agent-7 update_post wp:post:1024 [title]');
    // An extracted `opa build -t wasm` bundle carries its Rego too: its .manifest says it is a bundle.
    writeFileSync(join(dir, '.manifest'), '{"revision":"","roots":[""]}');
    expect((await loadCandidatePolicy(dir, findOpa)).built).toBe(false);
  });

  it('removing the owner_only domain rule flips editor-alice\'s denial to an allow, naming the chain', { timeout: 60_000 }, async () => {
    const dir = candidatePolicies('owner-only', (d) => rmSync(join(d, 'writ/authz/domain/owner_only.rego')));
    const { engine } = await loadCandidatePolicy(dir, findOpa);
    const r = await policyImpact(h.ctx, engine);
    expect(flipsOf(r)).toEqual(['deny→allow editor-alice update_post wp:post:12 [title]']);
    expect(r.flips[0]!.reasons).toEqual(['the candidate allows it through chain g-editor-alice']);
  });

  it('a rule that fails on some inputs: those decisions are listed as failures with Rego\'s message (they would be answered INTERNAL), not skipped and not flips', { timeout: 60_000 }, async () => {
    const dir = candidatePolicies('two-values', (d) =>
      writeFileSync(join(d, TWO_VALUES_FILE), TWO_VALUES_RULE),
    );
    const { engine } = await loadCandidatePolicy(dir, findOpa);
    const r = await policyImpact(h.ctx, engine);
    expect(r.replayed).toBe(5);
    expect(r.skipped).toEqual([]);
    // Production without title: the rule's deny holds, so those allows flip; production with title: the conflict.
    expect(flipsOf(r)).toEqual(['allow→deny content-agent-3 update_post wp:post:1024 [body]']);
    expect(r.failures.map((f) => `${f.current ? 'allow' : 'deny'} ${f.request.principal} ${f.request.resource} [${f.request.fields.join(',')}]`).sort()).toEqual([
      'allow orchestrator wp:post:5 [title]',
      'allow seo-agent-7 wp:post:1024 [title]',
      'deny editor-alice wp:post:12 [title]',
    ]);
    expect(r.failures[0]!.error).toMatch(/two_values\.rego:\d+:\d+: var assignment conflict/);
  });

  it('an action taken out of the catalogue and a resource class removed: the live edges that would count for nothing, or only in part, are listed, saying which', { timeout: 60_000 }, async () => {
    const dir = candidatePolicies('registry', (d) => {
      const file = join(d, 'data.json');
      const data = JSON.parse(readFileSync(file, 'utf8'));
      delete data.writ.actions.unpublish_post;
      data.writ.resource_classes = data.writ.resource_classes.filter((r: { pattern: string }) => r.pattern !== 'deploy:**');
      writeFileSync(file, JSON.stringify(data, null, 2));
    });
    // Edges that will count (not yet valid) are listed; ones that never will again (revoked, or to a revoked principal) are not.
    const scope = { actions: ['unpublish_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['status'], risk_max: 2 };
    const now = h.ctx.clock.now();
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-later', to: 'publisher', reason: 'from tomorrow', not_before: now + 86_400_000, scope });
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-revoked', to: 'publisher', reason: 'revoked', scope });
    await revokeEdge(h.ctx, GOVERNANCE_ID, 'g-revoked', 'test');
    await registerPrincipal(h.ctx, GOVERNANCE_ID, { id: 'gone-agent', kind: 'agent', keys: [] });
    await createGrant(h.ctx, GOVERNANCE_ID, { id: 'g-gone', to: 'gone-agent', reason: 'its principal goes', scope });
    await revokePrincipal(h.ctx, GOVERNANCE_ID, 'gone-agent', 'test');
    // A decision on a key the candidate no longer registers: it would refuse it (UNKNOWN_RESOURCE), a failure, not a flip.
    const deploy = await h.call('release-controller', { method: 'POST', url: '/v1/decisions', payload: { action: 'deploy', resource: 'deploy:web:prod', environment: 'production', fields: [] } });
    expect(deploy.body.allow).toBe(true);
    await h.ctx.decisionLog.flush();
    const { engine } = await loadCandidatePolicy(dir, findOpa);
    const r = await policyImpact(h.ctx, engine);
    expect(r.failures.filter((f) => f.decision_id === deploy.body.decision_id)).toEqual([expect.objectContaining({
      current: true, code: 'UNKNOWN_RESOURCE', error: expect.stringContaining('"deploy:web:prod" is not a registered coordination key'),
    })]);
    expect(r.flips.map((f) => f.decision_id)).not.toContain(deploy.body.decision_id);
    expect(r.stranded_edges.map((e) => `${e.edge_id} ${e.kind}`)).toEqual([
      'g-editor-alice grant',
      'g-incident-commander grant',
      'g-later grant',
      'g-publisher grant',
      'g-release-controller grant',
      'o-release owns',
    ]);
    expect(r.stranded_edges.find((e) => e.edge_id === 'g-publisher')).toMatchObject({ from: 'governance', to: 'publisher', problem: expect.stringContaining('scope.actions: "unpublish_post" is not an action of the policy') });
    expect(r.stranded_edges.find((e) => e.edge_id === 'o-release')!.problem).toContain('"deploy:**" matches no key of any resource class');
    // Its only pattern gone, the ownership counts for nothing; the publisher's grant keeps its other actions.
    expect(r.stranded_edges.find((e) => e.edge_id === 'o-release')!.counts_in_part).toBe(false);
    expect(r.stranded_edges.find((e) => e.edge_id === 'g-later')!.counts_in_part).toBe(false);
    expect(r.stranded_edges.find((e) => e.edge_id === 'g-publisher')!.counts_in_part).toBe(true);
    // The running bundle strands nothing it does not strand itself.
    const { engine: same } = await loadCandidatePolicy(BUNDLE_DIR, findOpa);
    expect((await policyImpact(h.ctx, same)).stranded_edges).toEqual([]);
  });

  it('an environment no longer declared: the live edges that name it are listed (as a rebuild would refuse them)', { timeout: 60_000 }, async () => {
    const dir = candidatePolicies('environments', (d) => {
      const file = join(d, 'data.json');
      const data = JSON.parse(readFileSync(file, 'utf8'));
      data.writ.environments = ['production'];
      writeFileSync(file, JSON.stringify(data, null, 2));
    });
    // A decision asked in staging: the candidate would refuse it before any chain (UNPROCESSABLE), which is a failure, not a flip.
    const staging = await h.call('orchestrator', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:5', environment: 'staging', fields: ['title'] } });
    expect(staging.body.allow).toBe(true);
    await h.ctx.decisionLog.flush();
    const { engine } = await loadCandidatePolicy(dir, findOpa);
    const r = await policyImpact(h.ctx, engine);
    expect(r.stranded_edges.map((e) => `${e.edge_id} ${e.kind}: ${e.problem}`)).toEqual([
      'g-orchestrator grant: scope.environments: "staging" is not an environment of the policy (data.writ.environments: production)',
    ]);
    // production+staging under a candidate without staging: it still counts in production.
    expect(r.stranded_edges[0]!.counts_in_part).toBe(true);
    expect(r.failures.filter((f) => f.decision_id === staging.body.decision_id)).toEqual([expect.objectContaining({
      current: true, code: 'UNPROCESSABLE', error: 'environment: "staging" is not an environment of the policy (data.writ.environments: production)',
    })]);
    expect(r.flips.map((f) => f.decision_id)).not.toContain(staging.body.decision_id);
  });

  it('a field a closed class no longer lists: the edges naming it are listed, and a decision asking for it is one the candidate would refuse', { timeout: 60_000 }, async () => {
    const dir = candidatePolicies('fields', (d) => {
      const file = join(d, 'data.json');
      const data = JSON.parse(readFileSync(file, 'utf8'));
      const post = data.writ.resource_classes.find((r: { pattern: string }) => r.pattern === 'wp:post:*');
      delete post.fields.meta_description;
      writeFileSync(file, JSON.stringify(data, null, 2));
    });
    const asked = await h.call('seo-agent-7', { method: 'POST', url: '/v1/decisions', payload: { action: 'update_post', resource: 'wp:post:1024', environment: 'production', fields: ['meta_description'] } });
    expect(asked.body.allow).toBe(true);
    await h.ctx.decisionLog.flush();
    const { engine } = await loadCandidatePolicy(dir, findOpa);
    const r = await policyImpact(h.ctx, engine);
    // The edges that name the field are listed (the seo delegation and ownership still count for their other fields).
    expect(r.stranded_edges.map((e) => e.edge_id).sort()).toEqual(['d-orch-seo', 'o-seo-metadata']);
    expect(r.stranded_edges.find((e) => e.edge_id === 'o-seo-metadata')!.problem).toMatch(/^scope\.fields: "meta_description" is not a field of wp:post:\* \(body, canonical, status, tags, title\)/);
    // As decide would: refused before any chain (UNPROCESSABLE), a failure, not a flip.
    expect(r.failures.filter((f) => f.decision_id === asked.body.decision_id)).toEqual([expect.objectContaining({
      current: true, code: 'UNPROCESSABLE', error: expect.stringMatching(/^fields: "meta_description" is not a field of wp:post:1024: its resource class wp:post:\* \(body, canonical, status, tags, title\) closes its fields/),
    })]);
    expect(r.flips.map((f) => f.decision_id)).not.toContain(asked.body.decision_id);
  });

  it('from the receipts when no decision log is given: the write\'s decision is rebuilt from the receipt and flips too', { timeout: 60_000 }, async () => {
    const { engine } = await loadCandidatePolicy(candidatePolicies('risk-receipts', raiseUpdateRisk), findOpa);
    const r = await policyImpact(h.ctx, engine, { decisionLogFile: null });
    expect(r.source).toBe('receipts');
    expect(r.replayed).toBe(1);
    expect(r.flips).toMatchObject([{ decision_id: ids.seo, receipt_id: ids.receipt, flip: 'allow→deny', request: { principal: 'seo-agent-7', environment: 'production', fields: ['title'] } }]);
  });

  it('events it cannot replay are listed with why, not silently dropped: a masked request, a line that is not JSON', async () => {
    const file = join(work, 'odd.jsonl');
    const good = readFileSync(logFile, 'utf8').split('\n').find((l) => l.includes(ids.seo!))!;
    const masked = JSON.parse(good);
    delete masked.input.request;
    masked.decision_id = 'masked-1';
    writeFileSync(file, `${good}\n${JSON.stringify(masked)}\nnot json\n`);
    const { engine } = await loadCandidatePolicy(BUNDLE_DIR, findOpa);
    const r = await policyImpact(h.ctx, engine, { decisionLogFile: file });
    expect(r.replayed).toBe(1);
    expect(r.skipped).toEqual([
      { decision_id: 'masked-1', reason: expect.stringMatching(/lacks the request/) },
      { decision_id: null, reason: expect.stringMatching(/line 3 .* is not JSON/) },
    ]);
  });

  it('a candidate bundle in each layout the README shows: writ policy build\'s folder, policy.wasm + data.json alone; the two mixed is a clear error', { timeout: 60_000 }, async () => {
    const built = join(work, 'candidate-bundle');
    const { revision } = await buildPolicyBundle({ opaPath: findOpa(), policiesDir: candidatePolicies('layouts', raiseUpdateRisk), outDir: built });
    expect(readdirSync(built).sort()).toEqual(['bundles', 'revision']);
    const judged = async (dir: string) => {
      const { engine, built: compiled } = await loadCandidatePolicy(dir, findOpa);
      expect(compiled).toBe(false);
      expect(engine.revision).toBe(revision);
      expect(flipsOf(await policyImpact(h.ctx, engine))).toContain('allow→deny seo-agent-7 update_post wp:post:1024 [title]');
    };
    await judged(built);
    const flat = join(work, 'candidate-flat');
    mkdirSync(flat);
    for (const f of ['policy.wasm', 'data.json']) copyFileSync(join(built, 'bundles', revision.slice('sha256:'.length), f), join(flat, f));
    await judged(flat);
    copyFileSync(join(built, 'revision'), join(flat, 'revision'));
    await expect(loadCandidatePolicy(flat, findOpa)).rejects.toMatchObject({
      code: 'POLICY_UNAVAILABLE',
      message: expect.stringContaining(`; ${flat} names its bundle in a \`revision\` file, so it is read from bundles/<revision>/ (the layout \`writ policy build\` writes), not from the policy.wasm and data.json beside it: remove \`revision\` to read those`),
    });
  });

  it('the running bundle itself flips nothing; a folder with no policy is a clear error', async () => {
    const { engine, built } = await loadCandidatePolicy(BUNDLE_DIR, findOpa);
    expect(built).toBe(false);
    expect((await policyImpact(h.ctx, engine)).flips).toEqual([]);
    const empty = join(work, 'empty');
    mkdirSync(empty);
    await expect(loadCandidatePolicy(empty, findOpa)).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
    await expect(policyImpact(h.ctx, engine, { limit: 0 })).rejects.toMatchObject({ code: 'UNPROCESSABLE' });
  });
});
