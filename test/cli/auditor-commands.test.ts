import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { commitGraphChange } from '../../src/service/graph-changes.js';
import { act, decideLeaseWrite } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { requireDist } from '../support/server-process.js';
import { runWrit } from '../support/cli.js';
import { misplacedTimes, WIRE_TIME } from '../support/wire-times.js';

let h: Harness;
const story: { written?: string; refused?: string; revisionBeforeRevoke?: number; timeBeforeRevoke?: string } = {};

const writ = (...args: string[]) => runWrit(h.dataDir, ...args);

beforeAll(async () => {
  requireDist();
  // A real clock reading, so the CLI (which uses the system clock) sees the same "now".
  h = await startHarness({ upstream: true, clock: new ManualClock(Date.now()) });
  const { answer: ok } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'Audited' }, expected_version: 0 });
  story.written = ok.body.receipt.receipt_id;
  const bad = await act(h, 'content-agent-3', { resource: 'wp:post:1024', fields: ['body'], payload: { body: 'no decision' }, expected_version: 1 }, {});
  story.refused = bad.body.receipt_id;
  // An expiring delegation, and an orphan: editor-alice delegates, then loses her grant.
  const soon = new Date(Date.now() + 30 * 60_000).toISOString();
  await h.call('editor-alice', {
    method: 'POST', url: '/v1/delegations',
    payload: { id: 'd-alice-temp', from: 'editor-alice', to: 'publisher', reason: 'cover for the afternoon', max_depth: 0, expires_at: soon, scope: { actions: ['update_post'], resources: ['wp:post:*'], environments: ['production'], fields: ['title'], risk_max: 1 } },
  });
  story.revisionBeforeRevoke = (await h.ctx.graph.current()).revision;
  story.timeBeforeRevoke = new Date(h.clock.now()).toISOString();
  (h.clock as ManualClock).advance(1000);
  await h.call('governance', { method: 'DELETE', url: '/v1/edges/g-editor-alice', payload: { reason: 'editor left the team' } });
  // A grant as a Writ without the scope check could write it: an action the policy does not know.
  await commitGraphChange(h.ctx, GOVERNANCE_ID, (_graph, now) => [{
    type: 'edge.created',
    edge: { id: 'g-old-typo', kind: 'grant', from: GOVERNANCE_ID, to: 'content-agent-3', scope: { actions: ['update_psot'], resources: ['wp:post:*'], environments: ['production'], fields: ['*'], constraints: { risk_max: 1 } }, max_depth: 0, reason: 'written before scopes were checked', creator: GOVERNANCE_ID, created_at: now, not_before: null, expires_at: null },
  }]);
}, 60_000);
afterAll(async () => h?.close());

describe('auditor commands tell what really happened', () => {
  it('writ why: receipt → decision → chain with each edge\'s creator, reason and scope', async () => {
    const { stdout, code } = await writ('why', story.written!);
    expect(code).toBe(0);
    expect(stdout).toContain(`receipt ${story.written}: COMPLETED`);
    expect(stdout).toContain('seo-agent-7 update_post wp:post:1024 fields [title]');
    expect(stdout).toMatch(/1\. g-orchestrator: governance → orchestrator \[grant\]/);
    expect(stdout).toMatch(/2\. d-orch-seo: orchestrator → seo-agent-7 \[delegate\]/);
    expect(stdout).toContain('"SEO agent may rewrite titles and meta descriptions only"');
    expect(stdout).toContain('fields [meta_description, title]');
    const mermaid = await writ('why', story.written!, '--format', 'mermaid');
    expect(mermaid.stdout).toMatch(/orchestrator/);
    expect(mermaid.stdout).toMatch(/seo-agent-7/);
  });

  it('writ who: every live principal allowed, with its chain; --all the denied too, with why; --json the explanations', async () => {
    const { stdout, code } = await writ('who', 'update_post', 'wp:post:1024', '--fields', 'title');
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^who may update_post wp:post:1024 in production fields \[title\]: \d+ of \d+ live principal\(s\) \(graph revision \d+, policy sha256:[0-9a-f]{16}\)$/);
    expect(lines).toContain('  ALLOW seo-agent-7              via g-orchestrator → d-orch-seo  (needs a lease)');
    expect(stdout).not.toContain('editor-alice'); // its grant was revoked
    const all = await writ('who', 'update_post', 'wp:post:1024', '--fields', 'title', '--all');
    expect(all.stdout).toMatch(/\n {2}deny {2}editor-alice {13}.*g-editor-alice.*revoked/);
    const json = JSON.parse((await writ('who', 'update_post', 'wp:post:1024', '--fields', 'title', '--kind', 'agent', '--json')).stdout);
    expect(json.map((x: { principal: string; allow: boolean }) => [x.principal, x.allow])).toEqual([['seo-agent-7', true]]);
    expect(misplacedTimes(json)).toEqual([]);
    // A misspelt action: nobody is allowed, and the list says what denies every one, not just 0 of N.
    const typo = await writ('who', 'updat_post', 'wp:post:1024');
    expect(typo.code).toBe(0);
    expect(typo.stdout).toMatch(/: 0 of \d+ live principal/);
    expect(typo.stdout).toContain('  every one denied: action updat_post is not in the action catalogue');
  });

  it('writ why on an id the store does not hold says an archived receipt is in its archive file', async () => {
    const r = await writ('why', 'rcpt_archived-or-never');
    expect(r).toMatchObject({ code: 1, output: 'writ: NOT_FOUND (Not found): no receipt rcpt_archived-or-never in the store (a receipt archived by writ audit archive is only in its archive file)\n' });
  });

  it('writ why on a refused write says so', async () => {
    const { stdout } = await writ('why', story.refused!);
    expect(stdout).toContain('REJECTED');
    expect(stdout).toContain('DECISION_INVALID');
  });

  it('writ audit verify on a copy of the data directory without its keys/ makes no key, and says which keys it read', async () => {
    expect((await writ('audit', 'checkpoint')).code).toBe(0);
    const copy = mkdtempSync(join(tmpdir(), 'writ-copy-'));
    try {
      expect((await writ('backup', join(copy, 'writ.sqlite'))).code).toBe(0); // the store alone, as an auditor is given it
      const v = await runWrit(copy, 'audit', 'verify');
      expect(v).toMatchObject({ code: 3, stdout: expect.stringContaining(`the keys read from ${join(copy, 'keys')} (none)`) }); // nothing checked: not BROKEN (1)
      expect(existsSync(join(copy, 'keys'))).toBe(false); // before: a new signing key, as if this copy were a server's data directory
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('writ receipts lists both, with their status', async () => {
    const { stdout } = await writ('receipts', '--resource', 'wp:post:1024');
    expect(stdout).toContain(`${story.written}  COMPLETED`);
    expect(stdout).toContain(`${story.refused}  REJECTED`);
  });

  it.each([
    [['--limit', 'abc'], '--limit is a whole number from 1 to 1000, got "abc"'],
    [['--limit', '0'], '--limit is a whole number from 1 to 1000, got "0"'],
    [['--limit', '1001'], '--limit is a whole number from 1 to 1000, got "1001"'],
    [['--status', 'bogus'], '--status is one of PENDING, COMPLETED, FAILED, REJECTED, got "bogus"'],
    [['--status', 'completed'], '--status is one of PENDING, COMPLETED, FAILED, REJECTED, got "completed"'],
    [['--order', 'latest'], '--order is oldest or newest, got "latest"'],
    [['--order', 'newest', '--after', '1'], '--order newest pages with --before, not --after'],
    [['--before', '5'], '--before pages receipts newest first: add --order newest'],
    [['--decision', ''], '--decision is a decision id of 1 to 256 characters, got 0'],
    [['--decision', 'd'.repeat(257)], '--decision is a decision id of 1 to 256 characters, got 257'],
  ])('writ receipts %j is refused as GET /v1/receipts refuses it: one line, exit 2', async (args, message) => {
    const r = await writ('receipts', ...args);
    expect([r.code, r.output.trim()]).toEqual([2, `writ: ${message}`]);
  });

  it('writ receipts says when a page is cut short and how to get the rest; --order newest shows the latest first', async () => {
    const oldest = await writ('receipts', '--resource', 'wp:post:1024', '--limit', '1');
    expect(oldest.code).toBe(0);
    expect(oldest.stdout.trim().split('\n')).toEqual([expect.stringContaining(`${story.written}  COMPLETED`)]);
    expect(oldest.output).toMatch(/\(1 shown; more newer receipts: add --after (\d+), or --order newest for the latest first\)/);
    const next = /--after (\d+)/.exec(oldest.output)![1]!;
    const rest = await writ('receipts', '--resource', 'wp:post:1024', '--limit', '1', '--after', next);
    expect(rest.stdout).toContain(`${story.refused}  REJECTED`);
    expect(rest.output).not.toContain('shown;');
    const newest = await writ('receipts', '--resource', 'wp:post:1024', '--limit', '1', '--order', 'newest');
    expect(newest.stdout.trim().split('\n')).toEqual([expect.stringContaining(`${story.refused}  REJECTED`)]);
    expect(newest.output).toMatch(/\(1 shown; more older receipts: add --before \d+\)/);
    const json = JSON.parse((await writ('receipts', '--resource', 'wp:post:1024', '--status', 'COMPLETED', '--json')).stdout);
    expect(json.receipts.map((r: { receipt_id: string }) => r.receipt_id)).toEqual([story.written]);
  });

  it('writ can: what a principal could do, now and before a revocation', async () => {
    const now = await writ('can', 'publisher');
    expect(now.stdout).toMatch(/CAN +publish_post,unpublish_post on wp:post:\*/);
    expect(now.stdout).toMatch(/not +update_post on wp:post:\*/);
    expect(now.stdout).toMatch(/g-editor-alice.*revoked/);
    const before = await writ('can', 'publisher', '--at', story.timeBeforeRevoke!);
    expect(before.stdout).toMatch(/CAN +update_post on wp:post:\* in production fields \[title\]/);
    expect(before.stdout).toContain('via g-editor-alice → d-alice-temp');
  });

  it('writ expiring --within 1h lists the afternoon delegation; --within 10m does not', async () => {
    expect((await writ('expiring', '--within', '1h')).stdout).toContain('d-alice-temp: editor-alice → publisher');
    expect((await writ('expiring', '--within', '10m')).stdout).toContain('(none)');
  });

  it('writ orphans lists the delegation whose delegator lost its grant', async () => {
    const { stdout } = await writ('orphans');
    expect(stdout).toContain('d-alice-temp: editor-alice → publisher');
    expect(stdout).toContain('chain: editor-alice holds no valid chain from governance');
    expect(stdout).not.toContain('d-orch-seo');
  });

  it('writ orphans lists an edge whose scope the policy\'s registry does not cover, with the reason a new one would be refused', async () => {
    const { stdout } = await writ('orphans');
    expect(stdout).toContain('g-old-typo: governance → content-agent-3\n    scope.actions: "update_psot" is not an action of the policy');
    const http = await h.call('governance', { method: 'GET', url: '/v1/audit/orphans?principal=content-agent-3' });
    expect(http.body.orphans).toMatchObject([{ edge: { id: 'g-old-typo', kind: 'grant' }, violations: [expect.stringContaining('"update_psot" is not an action of the policy')] }]);
  });

  it('GET /v1/audit/orphans narrowed to a principal judges and lists only its edges', async () => {
    const ids = async (query: string) => ((await h.call('governance', { method: 'GET', url: `/v1/audit/orphans${query}` })).body as { orphans: { edge: { id: string } }[] }).orphans.map((o) => o.edge.id);
    expect(await ids('')).toContain('d-alice-temp');
    expect(await ids('?principal=publisher')).toEqual(['d-alice-temp']);
    expect(await ids('?principal=editor-alice')).toEqual(['d-alice-temp']);
    expect(await ids('?principal=seo-agent-7')).toEqual([]);
  });

  it('writ audit verify and writ lease ls', async () => {
    const v = await writ('audit', 'verify');
    expect(v.code).toBe(0);
    expect(v.stdout).toMatch(/^OK: \d+ entries/);
    const l = await writ('lease', 'ls', '--resource', 'wp:post:1024#title');
    // Held by seo-agent-7 at epoch 1 (EXPIRED by now in real time: the harness clock stood still while the CLI uses the system clock).
    expect(l.stdout).toMatch(/wp:post:1024#title\s+(HELD|EXPIRED)\s+holder seo-agent-7\s+epoch 1/);
    // The resource a receipt names (its resource_key) finds the leases of its fields: before, "(no leases)".
    const byResource = await writ('lease', 'ls', '--resource', 'wp:post:1024');
    expect(byResource.stdout).toMatch(/^wp:post:1024#title\s+(HELD|EXPIRED)\s+holder seo-agent-7\s+epoch 1/);
    expect((await writ('lease', 'ls', '--resource', 'wp:post:102')).stdout).toBe('(no leases)\n');
  });

  it('every --json output carries instants as RFC 3339 strings, as the HTTP answers do', async () => {
    const outputs = {
      receipts: await writ('receipts', '--json'),
      why: await writ('why', story.written!, '--format', 'json'),
      trace: await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title', '--json'),
      can: await writ('can', 'publisher', '--json'),
      expiring: await writ('expiring', '--within', '1h', '--json'),
      orphans: await writ('orphans', '--json'),
      leases: await writ('lease', 'ls', '--json'),
      graph: await writ('graph', 'export'),
    };
    for (const [name, out] of Object.entries(outputs)) expect(misplacedTimes(JSON.parse(out.stdout)), name).toEqual([]);
    const receipts = JSON.parse(outputs.receipts.stdout).receipts;
    expect(receipts.find((r: { receipt_id: string }) => r.receipt_id === story.written).created_at).toMatch(WIRE_TIME);
    expect(JSON.parse(outputs.expiring.stdout)[0].expires_at).toMatch(WIRE_TIME);
    expect(JSON.parse(outputs.leases.stdout).leases.find((l: { key: string }) => l.key === 'wp:post:1024#title').expiresAt).toMatch(WIRE_TIME);
    expect(JSON.parse(outputs.why.stdout).chain[0].edge.created_at).toMatch(WIRE_TIME);
  });

  it('writ graph export --at shows the grant before its revocation', async () => {
    const { stdout } = await writ('graph', 'export', '--at', String(story.revisionBeforeRevoke));
    const g = JSON.parse(stdout);
    expect(g.edges.find((e: { id: string }) => e.id === 'g-editor-alice').revoked_at).toBeNull();
  });
});
