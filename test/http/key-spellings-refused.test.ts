/**
 * One name, one key: a resource key or a field not in Unicode NFC, and a key that spells a host segment
 * of its resource class (data.writ.resource_classes[].host_segments) in capitals, are refused where keys
 * enter — decisions, AuthZEN, gateway writes, graph scopes — with UNPROCESSABLE and the spelling to send,
 * and nothing is recorded: no decision in the decision log, no lease, no receipt, no graph change.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { GOVERNANCE_ID } from '../../src/graph/model.js';
import { act, decideLeaseWrite, decideOk } from '../support/agent.js';
import { startHarness, type Harness } from '../support/harness.js';
import { until } from '../support/wait.js';

const NFD = 'deploy:site:cafe\u0301';
const NFC = 'deploy:site:caf\u00e9';
const TEMPLATE = 'site:EXAMPLE.COM:template:canonical';

let h: Harness;
let work: string;
let logFile: string;
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'writ-key-spellings-'));
  logFile = join(work, 'decisions.jsonl');
  h = await startHarness({ example: true, upstream: true, config: { decisionLog: { ...loadConfig({}, {}).decisionLog, file: logFile, flushMs: 50 } } });
});
afterAll(async () => {
  await h?.close();
  rmSync(work, { recursive: true, force: true });
});

const logged = (): any[] => (existsSync(logFile) ? readFileSync(logFile, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l)) : []);
const receipts = async (): Promise<any[]> => (await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/receipts?limit=500' })).body.receipts;
const held = async (): Promise<string[]> => (await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/leases?state=HELD' })).body.leases.map((l: any) => l.key);

async function refusedDecision(principal: string, payload: Record<string, unknown>) {
  const r = await h.call(principal, { method: 'POST', url: '/v1/decisions', payload: { environment: 'production', ...payload } });
  expect(r.status, JSON.stringify(r.body)).toBe(422);
  expect(r.body.code).toBe('UNPROCESSABLE');
  expect(r.body.token).toBeUndefined();
  return r.body.detail as string;
}

describe('refused where keys enter, naming the spelling to send; nothing recorded', () => {
  it('a decision on a key or a field not in NFC, or on a site in capitals, is refused; no decision is logged, so none can be leased', async () => {
    expect(await refusedDecision('release-controller', { action: 'deploy', resource: NFD, fields: [] }))
      .toBe(`resource: resource key is not in Unicode NFC; send "${NFC}" ("deploy:site:caf\\u00e9")`);
    expect(await refusedDecision('release-controller', { action: 'deploy', resource: 'deploy:site:www', fields: ['cafe\u0301'] }))
      .toBe('fields: field is not in Unicode NFC; send "caf\u00e9" ("caf\\u00e9")');
    expect(await refusedDecision('seo-control-plane', { action: 'update_template', resource: TEMPLATE, fields: [] }))
      .toBe(`resource: resource key "${TEMPLATE}": segment 1 is a host name (resource class site:*:template:canonical, host_segments), which is read without case, so keys spell it in lower case; send "site:example.com:template:canonical"`);
    expect(await refusedDecision('seo-control-plane', { action: 'bulk_update_canonical', resource: 'site:Example.com:canonical-bulk', fields: [] }))
      .toContain('send "site:example.com:canonical-bulk"');
    // Through an alias, the key as sent is judged first.
    expect(await refusedDecision('editor-alice', { action: 'update_post', resource: 'wordpress:article:cafe\u0301', fields: ['title'] })).toContain('send "wordpress:article:caf\u00e9"');
    // A long key is not repeated.
    const long = `deploy:${'e\u0301'.repeat(250)}`;
    const detail = await refusedDecision('release-controller', { action: 'deploy', resource: long, fields: [] });
    expect(detail).toContain('not in Unicode NFC');
    expect(detail.length).toBeLessThan(200);

    // The decision log: only the allowed decision asked after the refusals.
    const ok = await decideOk(h, 'release-controller', { action: 'deploy', resource: NFC, fields: [] });
    await until('the allowed decision in the decision log', () => logged().some((e) => e.decision_id === ok.body.decision_id));
    expect(logged().map((e) => e.decision_id)).toEqual([ok.body.decision_id]);
    // No key of another spelling is held, nor was ever leased.
    expect((await held()).filter((k) => k.includes('EXAMPLE') || k.includes('Example') || k.normalize('NFC') !== k)).toEqual([]);
    const everLeased = (await h.call(GOVERNANCE_ID, { method: 'GET', url: '/v1/leases?limit=500' })).body.leases.map((l: any) => l.key as string) as string[];
    expect(everLeased.filter((k) => k.normalize('NFC') !== k || /^site:[^:]*[A-Z]/.test(k))).toEqual([]);
  });

  it('an AuthZEN evaluation of a key not in NFC, or of a site in capitals, is refused', async () => {
    for (const [id, type, send] of [[NFD, 'deploy:site', NFC], [TEMPLATE, 'site:EXAMPLE.COM:template', 'site:example.com:template:canonical']] as const) {
      const r = await h.call('seo-control-plane', { method: 'POST', url: '/access/v1/evaluation', payload: { subject: { type: 'control_plane', id: 'seo-control-plane' }, action: { name: 'update_template' }, resource: { type, id, properties: { environment: 'production' } } } });
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(r.body.code).toBe('UNPROCESSABLE');
      expect(r.body.detail).toContain(`send "${send}"`);
    }
  });

  it('a gateway write naming the key or a field in another spelling is refused before it is checked: no receipt, the upstream untouched', async () => {
    const { decision, lease, answer } = await decideLeaseWrite(h, 'seo-agent-7', { resource: 'wp:post:1024', payload: { title: 'first' }, expected_version: 0 });
    expect(answer.status).toBe(201);
    const before = await receipts();
    const headers = { decision: decision.token, lease };
    // A field in NFD: "titlé" (e + combining acute), and the same for the key of an open class.
    const field = await act(h, 'seo-agent-7', { resource: 'wp:post:1024', fields: ['title\u0301'], payload: { 'title\u0301': 'x' }, expected_version: 1 }, headers);
    expect(field.status).toBe(422);
    expect(field.body).toMatchObject({ code: 'UNPROCESSABLE', detail: 'fields: field is not in Unicode NFC; send "titl\u00e9" ("titl\\u00e9")' });
    const key = await act(h, 'release-controller', { action: 'deploy', resource: NFD, fields: [], payload: {} }, {});
    expect(key.status).toBe(422);
    expect(key.body.detail).toContain(`send "${NFC}"`);
    const site = await act(h, 'seo-control-plane', { action: 'update_template', resource: TEMPLATE, fields: [], payload: {} }, {});
    expect(site.status).toBe(422);
    expect(site.body.detail).toContain('send "site:example.com:template:canonical"');
    expect(await receipts()).toEqual(before);
    // The post is as the first write left it: read it through the sample upstream.
    const post = await fetch(`${h.upstreamUrl}/posts/1024`).then((r) => r.json() as Promise<any>);
    expect(post.fields.title).toBe('first');
  });

  it('a grant, delegation or ownership whose pattern or field is spelt otherwise is refused when written: it would match no key', async () => {
    const before = (await h.ctx.graph.current()).revision;
    const grant = (scope: Record<string, unknown>) => h.call(GOVERNANCE_ID, { method: 'POST', url: '/v1/grants', payload: { to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_template'], risk_max: 1, ...scope } } });
    const cases: [Record<string, unknown>, string][] = [
      [{ resources: ['site:EXAMPLE.COM:**'] }, 'scope.resources: resource pattern "site:EXAMPLE.COM:**": segment 1 is a host name (resource class site:*:template:canonical, host_segments), which is read without case, so keys spell it in lower case; the edge would never apply to those keys: write "site:example.com:**"'],
      [{ resources: ['site:Example.com:template:canonical'] }, 'write "site:example.com:template:canonical"'],
      [{ resources: ['deploy:cafe\u0301:**'] }, 'scope.resources: entry is not in Unicode NFC; send "deploy:caf\u00e9:**"'],
      [{ resources: ['deploy:**'], fields: ['cafe\u0301'] }, 'scope.fields: entry is not in Unicode NFC; send "caf\u00e9"'],
    ];
    for (const [scope, message] of cases) {
      const r = await grant(scope);
      expect(r.status, JSON.stringify(r.body)).toBe(422);
      expect(r.body.code).toBe('UNPROCESSABLE');
      expect(r.body.detail).toContain(message);
    }
    const ownership = await h.call(GOVERNANCE_ID, { method: 'POST', url: '/v1/ownerships', payload: { owner: 'seo-control-plane', resource: 'site:EXAMPLE.COM:canonical-bulk', reason: 'r' } });
    expect(ownership.status, JSON.stringify(ownership.body)).toBe(422);
    expect(ownership.body.detail).toContain('write "site:example.com:canonical-bulk"');
    const delegation = await h.call('seo-control-plane', { method: 'POST', url: '/v1/delegations', payload: { from: 'seo-control-plane', to: 'seo-agent-7', reason: 'r', scope: { actions: ['update_template'], resources: ['site:EXAMPLE.COM:template:canonical'], environments: ['production'], risk_max: 1 } } });
    expect(delegation.status, JSON.stringify(delegation.body)).toBe(422);
    expect(delegation.body.detail).toContain('write "site:example.com:template:canonical"');
    expect((await h.ctx.graph.current()).revision).toBe(before);
  });
});
