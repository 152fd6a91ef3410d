import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { graphEvents, openWrit } from '../../src/service/index.js';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

let dataDir: string;
const writ = (...args: string[]) => runWrit(dataDir, ...args);
const revision = async () => JSON.parse((await writ('graph', 'export')).stdout).revision as number;

beforeAll(async () => {
  requireDist();
  dataDir = mkdtempSync(join(tmpdir(), 'writ-revoke-'));
  expect((await writ('graph', 'apply', 'graph/example.yaml')).code).toBe(0);
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('writ revoke: the operator revokes from the command line, with a reason, and sees what it ended', () => {
  it('refuses without a reason, or one longer than HTTP takes (exit 2, nothing changed)', async () => {
    const before = await revision();
    const r = await writ('revoke', 'd-orch-seo');
    expect(r).toMatchObject({ code: 2, output: expect.stringContaining('--reason TEXT is required') });
    expect(await writ('revoke', 'd-orch-seo', '--reason', 'x'.repeat(2001))).toMatchObject({ code: 2, output: expect.stringContaining('--reason is at most 2000 characters') });
    expect(await revision()).toBe(before);
  });

  it('revokes an edge, lists what it ended, keeps the reason in the graph log, and the chain no longer counts', async () => {
    expect((await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title')).code).toBe(0);
    const r = await writ('revoke', 'd-orch-seo', '--reason', 'incident 42: key seen in a log');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toMatch(/^revoked edge d-orch-seo \(orchestrator → seo-agent-7 \[delegate\]\) at graph revision (\d+): "incident 42: key seen in a log"; .* What it ended \(analysed at revision (\d+), just before\):$/);
    expect(lines.slice(1, 4)).toEqual(['lost:', '  seo-agent-7', expect.stringMatching(/^ {4}update_post on wp:post:\* in production, fields \[meta_description, title\] {3}via g-orchestrator > d-orch-seo$/)]);
    expect(r.stdout).toContain('delegations that became orphans: (none)');
    expect(r.stdout).not.toMatch(/would/);

    const trace = await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title');
    expect(trace.code).toBe(3);
    expect(trace.stdout).toContain('edge d-orch-seo (orchestrator → seo-agent-7) was revoked');

    const w = await openWrit(loadConfig({ dataDir }, {}));
    try {
      const { events } = await graphEvents(w.ctx, 0, 1000);
      expect(events.filter((e) => e.type === 'edge.revoked')).toEqual([expect.objectContaining({ subject: 'd-orch-seo', actor: 'governance', reason: 'incident 42: key seen in a log' })]);
    } finally {
      await w.close();
    }

    const again = await writ('revoke', 'd-orch-seo', '--reason', 'again');
    expect(again).toMatchObject({ code: 0, stdout: expect.stringMatching(/^edge d-orch-seo \(orchestrator → seo-agent-7 \[delegate\]\) was already revoked at \S+Z; nothing changed\n$/) });

    // The manifest that made it, applied again, leaves it revoked, and says so rather than only "unchanged".
    const reapplied = await writ('graph', 'apply', 'graph/example.yaml');
    expect(reapplied.code).toBe(0);
    expect(reapplied.stdout).toMatch(/^applied graph\/example\.yaml: 0 created, \d+ unchanged \(1 of them revoked, and left so: delegation d-orch-seo\); graph revision \d+\n/);
    expect(reapplied.stdout).toContain('  ! delegation d-orch-seo is revoked: the manifest does not restore it (a revoked edge stays revoked; give it a new id to grant it again)');
    expect((await writ('trace', 'seo-agent-7', 'update_post', 'wp:post:1024', '--fields', 'title')).code).toBe(3);
  });

  it('revokes a principal when no edge has the name (or with --principal); --json answers in the API shapes; an unknown name is UNKNOWN_PRINCIPAL', async () => {
    const r = await writ('revoke', 'content-agent-3', '--reason', 'decommissioned', '--json');
    expect(r.code).toBe(0);
    const answer = JSON.parse(r.stdout);
    expect(answer).toMatchObject({ revoked: true, graph_revision: await revision(), impact: { change: { revoke: { principal: 'content-agent-3' } }, lost: [expect.objectContaining({ principal: 'content-agent-3' })] } });
    expect(answer.impact.computed_at).toMatch(/Z$/);
    expect((await writ('trace', 'content-agent-3', 'update_post', 'wp:post:1024', '--fields', 'body')).code).toBe(3);

    const again = JSON.parse((await writ('revoke', 'content-agent-3', '--reason', 'again', '--json')).stdout);
    expect(again).toEqual({ revoked: false, graph_revision: answer.graph_revision, revoked_at: expect.stringMatching(/Z$/) });
    // --principal: the name is a principal's even where an edge has it.
    expect((await writ('revoke', 'g-publisher', '--principal', '--reason', 'x')).output).toContain('UNKNOWN_PRINCIPAL');
    expect(JSON.parse((await writ('graph', 'export')).stdout).edges.find((e: { id: string }) => e.id === 'g-publisher').revoked_at).toBeNull();

    const ghost = await writ('revoke', 'ghost', '--reason', 'x');
    expect(ghost).toMatchObject({ code: 1, output: expect.stringContaining('UNKNOWN_PRINCIPAL') });
  });
});
