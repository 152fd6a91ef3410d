import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { misplacedTimes } from '../support/wire-times.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/index.js';
import { decideOk, leaseOk } from '../support/agent.js';
import { REPO, startHarness, type Harness } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';
import { TWO_VALUES_FILE, TWO_VALUES_RULE } from '../support/policy-mistakes.js';

let h: Harness;
let work: string;

const writ = (...args: string[]) => runWrit(h.dataDir, ...args);

beforeAll(async () => {
  requireDist();
  work = mkdtempSync(join(tmpdir(), 'writ-impact-cli-'));
  // A real clock reading, so the CLI (which uses the system clock) sees the same "now".
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.now()), config: { decisionLog: { ...loadConfig({}, {}).decisionLog, file: join(work, 'decisions.jsonl') } } });
  const d = await decideOk(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title'] });
  // The CLI reads the lease by the system clock: the longest lease, so a slow run (88 s into this file under load)
  // still finds it held, where the default 10 s had it lapse before the last command ran.
  await leaseOk(h, 'seo-agent-7', [d.token], { ttl_ms: 300_000 });
  await h.ctx.decisionLog.flush();
}, 60_000);
afterAll(async () => {
  await h?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('writ impact and writ policy impact', () => {
  it('writ impact revoke d-orch-seo lists seo-agent-7\'s lost capabilities and its lease, and changes nothing', async () => {
    const revision = (await h.ctx.graph.current()).revision;
    const { stdout, code } = await writ('impact', 'revoke', 'd-orch-seo');
    expect(code, stdout).toBe(0);
    expect(stdout).toContain(`impact of revoking edge d-orch-seo at graph revision ${revision}`);
    expect(stdout).toMatch(/would lose:\n {2}seo-agent-7\n {4}update_post on wp:post:\* in production, fields \[meta_description, title\] {3}via g-orchestrator > d-orch-seo/);
    expect(stdout).toMatch(/leases ending at their next renewal:\n {2}\S+ held by seo-agent-7 on wp:post:1024#title: AUTHORITY_REVOKED/);
    const json = JSON.parse((await writ('impact', 'revoke', 'orchestrator', '--json')).stdout);
    expect(json.orphaned_delegations.map((o: { edge: { id: string } }) => o.edge.id)).toEqual(['d-orch-content', 'd-orch-seo']);
    // --json speaks the wire's language: instants as RFC 3339, like every other answer.
    expect(misplacedTimes(json)).toEqual([]);
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    expect((await h.ctx.graph.current()).edge('d-orch-seo')!.revoked_at).toBeNull();
  });

  it('writ impact delegate shows what the delegate would gain; an unknown edge is a clear error', async () => {
    const { stdout, code } = await writ('impact', 'delegate', 'editor-alice', 'publisher', '--actions', 'update_post', '--resources', 'wp:post:*', '--environments', 'production', '--fields', 'title', '--risk-max', '1');
    expect(code, stdout).toBe(0);
    expect(stdout).toMatch(/would gain:\n {2}publisher\n {4}update_post on wp:post:\* in production, fields \[title\]/);
    const bad = await writ('impact', 'revoke', 'no-such-thing');
    expect(bad.code).not.toBe(0);
    expect(bad.stdout).toContain('UNKNOWN_PRINCIPAL');
  });

  it('writ impact delegate as the README writes it (no --environments, --fields, --risk-max): what FROM holds now is proposed for them', async () => {
    // Another grant of FROM's, for other actions and resources in another environment at a higher risk:
    // not taken into the proposal (its staging and risk 8 would widen it past every chain FROM has).
    const other = await h.call('governance', { method: 'POST', url: '/v1/grants', payload: { id: 'g-orch-deploy-staging', to: 'orchestrator', reason: 'staging deploys', max_depth: 1, scope: { actions: ['deploy'], resources: ['deploy:**'], environments: ['staging'], fields: ['*'], risk_max: 8 } } });
    expect(other.status, other.raw).toBe(201);
    const revision = (await h.ctx.graph.current()).revision;
    // README, "Impact analysis": node bin/writ impact delegate FROM TO --actions update_post --resources 'wp:post:*'
    const { stdout, code } = await writ('impact', 'delegate', 'orchestrator', 'seo-agent-7', '--actions', 'update_post', '--resources', 'wp:post:*');
    expect(code, stdout).toBe(0);
    expect(stdout).toMatch(/^impact of delegating orchestrator → seo-agent-7 at graph revision \d+ \(computed on a copy; nothing changed/);
    expect(stdout).toMatch(/would gain:\n {2}seo-agent-7\n {4}update_post on wp:post:\* in production, fields \[\*\]/);
    // What is said still counts (and is judged): a risk above the delegator's is refused.
    const wider = await writ('impact', 'delegate', 'orchestrator', 'seo-agent-7', '--actions', 'update_post', '--resources', 'wp:post:*', '--risk-max', '9');
    expect(wider.code).toBe(1);
    expect(wider.stdout).toContain('ATTENUATION_VIOLATION');
    const none = await writ('impact', 'delegate', 'no-such-principal', 'seo-agent-7', '--actions', 'update_post', '--resources', 'wp:post:*');
    expect([none.code, none.stdout.trim()]).toEqual([2, 'writ: --risk-max N is needed: no-such-principal holds no live grant or delegation for update_post on wp:post:* to take it from']);
    expect((await h.ctx.graph.current()).revision).toBe(revision);
    expect((await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-orch-deploy-staging', payload: { reason: 'test done' } })).status).toBe(200);
  });

  it('writ policy impact POLICIES_DIR lists the decisions that would flip (exit 4), with the reason', { timeout: 60_000 }, async () => {
    const dir = join(work, 'policies');
    cpSync(join(REPO, 'policies'), dir, { recursive: true });
    const data = JSON.parse(readFileSync(join(dir, 'data.json'), 'utf8'));
    data.writ.actions.update_post.risk = 2;
    writeFileSync(join(dir, 'data.json'), JSON.stringify(data, null, 2));
    const { stdout, code } = await writ('policy', 'impact', dir, '--decision-log', join(work, 'decisions.jsonl'));
    expect(code, stdout).toBe(4);
    expect(stdout).toMatch(/1 decision\(s\) replayed from the decision log/);
    expect(stdout).toMatch(/1 decision\(s\) would flip:\n {2}ALLOW→DENY {2}\S+ at .*\n {6}seo-agent-7 update_post wp:post:1024 in production fields \[title\]/);
    const unchanged = await writ('policy', 'impact', join(REPO, 'build/policy'), '--decision-log', join(work, 'decisions.jsonl'));
    expect(unchanged.code).toBe(0);
    expect(unchanged.stdout).toContain('no decision would flip');
    // --json speaks the wire's language here too (the flips' `at` was epoch ms until 2026-12-03).
    const json = JSON.parse((await writ('policy', 'impact', dir, '--decision-log', join(work, 'decisions.jsonl'), '--json')).stdout);
    expect(json.flips).toHaveLength(1);
    expect(misplacedTimes(json)).toEqual([]);
  });

  it('writ policy impact lists the live edges a candidate\'s registry would strand (exit 4)', { timeout: 60_000 }, async () => {
    const dir = join(work, 'policies-stranding');
    cpSync(join(REPO, 'policies'), dir, { recursive: true });
    const data = JSON.parse(readFileSync(join(dir, 'data.json'), 'utf8'));
    delete data.writ.actions.rollback;
    writeFileSync(join(dir, 'data.json'), JSON.stringify(data, null, 2));
    const { stdout, code } = await writ('policy', 'impact', dir, '--decision-log', join(work, 'decisions.jsonl'));
    expect(code, stdout).toBe(4);
    // Their other actions stay in the catalogue: they still count for those.
    expect(stdout).toMatch(/2 live edge\(s\) the candidate's registry would no longer cover in full \(they would stay in the graph\):\n {2}g-incident-commander \(grant governance → incident-commander\) would count only for the rest of its scope: scope\.actions: "rollback" is not an action of the policy/);
    expect(stdout).toMatch(/\n {2}g-release-controller \(grant governance → release-controller\) would count only for the rest of its scope: /);
  });

  it('writ policy impact lists the decisions a candidate fails on (exit 4), with Rego\'s message', { timeout: 60_000 }, async () => {
    const dir = join(work, 'policies-conflict');
    cpSync(join(REPO, 'policies'), dir, { recursive: true });
    writeFileSync(join(dir, TWO_VALUES_FILE), TWO_VALUES_RULE);
    const { stdout, code } = await writ('policy', 'impact', dir, '--decision-log', join(work, 'decisions.jsonl'));
    expect(code, stdout).toBe(4);
    expect(stdout).toContain('no decision would flip');
    expect(stdout).toMatch(/1 decision\(s\) the candidate fails on \(it would answer them INTERNAL\):\n {2}ALLOW→ERROR {2}\S+ at .*\n {6}seo-agent-7 update_post wp:post:1024 in production fields \[title\]\n {6}.*two_values\.rego:\d+:\d+: var assignment conflict/);
    const json = JSON.parse((await writ('policy', 'impact', dir, '--decision-log', join(work, 'decisions.jsonl'), '--json')).stdout);
    expect(json.failures).toMatchObject([{ current: true, request: { principal: 'seo-agent-7' }, error: expect.stringContaining('var assignment conflict') }]);
    expect(json.stranded_edges).toEqual([]);
    expect(misplacedTimes(json)).toEqual([]);
  });

  it('writ policy impact does not pass on what it did not check: 5 when a decision could not be replayed, 6 when none was (0 with --allow-empty)', { timeout: 60_000 }, async () => {
    const unchanged = join(REPO, 'build/policy');
    const log = readFileSync(join(work, 'decisions.jsonl'), 'utf8');
    const partial = join(work, 'decisions-partial.jsonl');
    writeFileSync(partial, `${log}not json\n`);
    const some = await writ('policy', 'impact', unchanged, '--decision-log', partial);
    expect(some.code, some.stdout).toBe(5);
    expect(some.stdout).toMatch(/1 decision\(s\) replayed from the decision log/);
    expect(some.stdout).toContain('no decision would flip');
    expect(some.stdout).toMatch(/1 decision\(s\) not replayed, so not checked:\n {2}\(no id\): /);

    const empty = join(work, 'decisions-empty.jsonl');
    writeFileSync(empty, '');
    const none = await writ('policy', 'impact', unchanged, '--decision-log', empty);
    expect(none.code, none.stdout).toBe(6);
    expect(none.stdout).toContain('WARNING: no decision was replayed (none in the decision log): no verdict was checked, only the registry (stranded edges)');
    expect(none.stdout).toContain('no replayed decision would flip');
    expect((await writ('policy', 'impact', unchanged, '--decision-log', empty, '--allow-empty')).code).toBe(0);
    // Not replayable at all is not "empty": 5, --allow-empty or not.
    const only = join(work, 'decisions-unreadable.jsonl');
    writeFileSync(only, 'not json\n');
    expect((await writ('policy', 'impact', unchanged, '--decision-log', only, '--allow-empty')).code).toBe(5);
  });

  it('writ policy impact warns when the decisions were made under another bundle than its folder\'s live one (one the service refused, say)', { timeout: 60_000 }, async () => {
    const live = readFileSync(join(REPO, 'build/policy/revision'), 'utf8').trim();
    const other = join(work, 'decisions-other-bundle.jsonl');
    const event = JSON.parse(readFileSync(join(work, 'decisions.jsonl'), 'utf8').split('\n').find((l) => l.includes('"seo-agent-7"'))!);
    event.bundles.writ.revision = 'sha256:00000000000000aa';
    writeFileSync(other, `${JSON.stringify(event)}\n`);
    const r = await writ('policy', 'impact', join(REPO, 'build/policy'), '--decision-log', other);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toContain(`(against ${live}, the live bundle of ${join(REPO, 'build/policy')})`);
    expect(r.stdout).toMatch(new RegExp(`WARNING: the latest decision read \\(${event.decision_id} at \\S+\\) was made under policy sha256:00000000000000aa, not ${live}: the service may not run the bundle of \\S+ \\(a rebuild it refused shows in its GET /readyz as policy_refused\\)`));
    const json = JSON.parse((await writ('policy', 'impact', join(REPO, 'build/policy'), '--decision-log', other, '--json')).stdout);
    expect(json.latest_recorded).toEqual({ decision_id: event.decision_id, at: expect.stringMatching(/Z$/), revision: 'sha256:00000000000000aa' });
    const same = await writ('policy', 'impact', join(REPO, 'build/policy'), '--decision-log', join(work, 'decisions.jsonl'));
    expect(same.stdout).not.toContain('WARNING');
  });
});