import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWrit } from '../support/cli.js';
import { requireDist } from '../support/server-process.js';

let dataDir: string;
const writ = (...args: string[]) => runWrit(dataDir, ...args);

/** A manifest of grants to publisher (which graph/example.yaml registers), each with its expires_at. */
function manifest(name: string, grants: Record<string, string>): string {
  const file = join(dataDir, `${name}.yaml`);
  writeFileSync(file, [
    'grants:',
    ...Object.entries(grants).flatMap(([id, expiresAt]) => [
      `  - id: ${id}`,
      '    to: publisher',
      `    reason: "grant ${id}"`,
      `    expires_at: "${expiresAt}"`,
      '    scope: { actions: [read_post], resources: ["wp:post:*"], environments: [production], fields: ["*"], risk_max: 1 }',
    ]),
  ].join('\n'));
  return file;
}

beforeAll(async () => {
  requireDist();
  dataDir = mkdtempSync(join(tmpdir(), 'writ-skip-expired-'));
  expect((await writ('graph', 'apply', 'graph/example.yaml')).code).toBe(0);
}, 60_000);
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('writ graph apply --skip-expired', () => {
  it('a manifest holding an edge that expired is refused as before, all or nothing, saying how to apply the rest', async () => {
    const file = manifest('old-export', { 'g-live': '2099-01-01T00:00:00Z', 'g-old': '2020-01-01T00:00:00Z' });
    const refused = await writ('graph', 'apply', file);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^writ: UNPROCESSABLE \(.*\): grant g-old: expires_at 2020-01-01T00:00:00\.000Z is not after now \(\S+\): the edge would never count \(an old export, say: writ graph apply --skip-expired applies the rest, listing the expired edges it leaves out\)$/m);
    const dry = await writ('graph', 'apply', file, '--dry-run');
    expect(dry.code).toBe(1);
    expect(dry.stdout).toContain('grant g-old: expires_at 2020-01-01T00:00:00.000Z is not after now');

    const plan = await writ('graph', 'apply', file, '--dry-run', '--skip-expired');
    expect(plan.code, plan.stdout).toBe(0);
    expect(plan.stdout).toMatch(/would give: 1 created, 0 unchanged, 1 expired edge\(s\) skipped \(dry run: nothing written\)/);
    expect(plan.stdout).toMatch(/^ {2}\+ grant g-live$/m);
    expect(plan.stdout).toMatch(/^ {2}- g-old skipped: it expired at 2020-01-01T00:00:00\.000Z \(not after now, \S+Z\): created, it would never count$/m);

    const applied = await writ('graph', 'apply', file, '--skip-expired');
    expect(applied.code, applied.stdout).toBe(0);
    expect(applied.stdout).toMatch(/^applied \S+: 1 created, 0 unchanged, 1 expired edge\(s\) skipped; graph revision \d+$/m);
    expect(applied.stdout).toMatch(/^ {2}- g-old skipped: it expired at 2020-01-01T00:00:00\.000Z/m);
    const graph = JSON.parse((await writ('graph', 'export')).stdout);
    const ids = graph.edges.map((e: { id: string }) => e.id);
    expect(ids).toContain('g-live');
    expect(ids).not.toContain('g-old');

    const again = await writ('graph', 'apply', file, '--skip-expired');
    expect(again.stdout).toMatch(/: 0 created, 1 unchanged, 1 expired edge\(s\) skipped;/);
  });

  it('an expired edge the graph holds under its id is left alone, as before, with or without --skip-expired', { timeout: 60_000 }, async () => {
    // Time enough for a CLI start on a busy machine, then waited out.
    const expiresAt = Date.now() + 6_000;
    const file = manifest('soon', { 'g-soon': new Date(expiresAt).toISOString() });
    expect((await writ('graph', 'apply', file)).stdout).toMatch(/: 1 created, 0 unchanged;/);
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 200));
    const plain = await writ('graph', 'apply', file);
    expect(plain.code, plain.stdout).toBe(0);
    expect(plain.stdout).toMatch(/: 0 created, 1 unchanged;/);
    const skipping = await writ('graph', 'apply', file, '--skip-expired');
    expect(skipping.stdout).toMatch(/: 0 created, 1 unchanged;/);
    expect(skipping.stdout).not.toContain('skipped');
  });
});
